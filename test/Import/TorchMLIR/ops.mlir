// RUN: flashlight-opt %s --split-input-file --flashlight-import-torch | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --verify-roundtrip -o /dev/null
// RUN: flashlight-opt %s --split-input-file --flashlight-import-torch --canonicalize --attn-raise --canonicalize --attn-explain -o /dev/null 2>&1 | FileCheck %s --check-prefix=RAISE

// SDPA kept whole (torch-mlir keeps it when its decompositions are off):
// every argument is positional (attn_mask, dropout_p, is_causal, scale,
// enable_gqa) and read from its constant.
// CHECK-LABEL: func @sdpa_causal_gqa
// CHECK-SAME: (%{{.*}}: tensor<2x8x64x32xf16>, %{{.*}}: tensor<2x2x64x32xf16>, %{{.*}}: tensor<2x2x64x32xf16>) -> tensor<2x8x64x32xf16>
// RAISE: remark: attn.attention: 1 branch, softmax, heads 8/2, mask=causal(offset=0) score=[identity]
func.func @sdpa_causal_gqa(%q: !torch.vtensor<[2,8,64,32],f16>, %k: !torch.vtensor<[2,2,64,32],f16>, %v: !torch.vtensor<[2,2,64,32],f16>) -> !torch.vtensor<[2,8,64,32],f16> {
  %none = torch.constant.none
  %zero = torch.constant.float 0.000000e+00
  %true = torch.constant.bool true
  %scale = torch.constant.float 2.500000e-01
  // The scale is a constant factor of the logits.
  // CHECK: arith.constant 2.500000e-01 : f32
  // CHECK-NOT: torch.
  %0 = torch.aten.scaled_dot_product_attention %q, %k, %v, %none, %zero, %true, %scale, %true : !torch.vtensor<[2,8,64,32],f16>, !torch.vtensor<[2,2,64,32],f16>, !torch.vtensor<[2,2,64,32],f16>, !torch.none, !torch.float, !torch.bool, !torch.float, !torch.bool -> !torch.vtensor<[2,8,64,32],f16>
  return %0 : !torch.vtensor<[2,8,64,32],f16>
}

// -----

// A boolean mask operand (True keeps), through `torch.operator`, the form
// torch-mlir prints for an op it has no definition of.
// CHECK-LABEL: func @sdpa_mask_operator
// RAISE: remark: attn.attention: 1 branch, softmax, heads 4/4, mask=data_dependent score=[identity] mask:capture0[b, 0, q, kv]
func.func @sdpa_mask_operator(%q: !torch.vtensor<[2,4,16,8],bf16>, %k: !torch.vtensor<[2,4,16,8],bf16>, %v: !torch.vtensor<[2,4,16,8],bf16>, %m: !torch.vtensor<[2,1,16,16],i1>) -> !torch.vtensor<[2,4,16,8],bf16> {
  %none = torch.constant.none
  %zero = torch.constant.float 0.000000e+00
  %false = torch.constant.bool false
  // CHECK-NOT: torch.operator
  %0 = torch.operator "aten.scaled_dot_product_attention"(%q, %k, %v, %m, %zero, %false, %none, %false) : (!torch.vtensor<[2,4,16,8],bf16>, !torch.vtensor<[2,4,16,8],bf16>, !torch.vtensor<[2,4,16,8],bf16>, !torch.vtensor<[2,1,16,16],i1>, !torch.float, !torch.bool, !torch.none, !torch.bool) -> !torch.vtensor<[2,4,16,8],bf16>
  return %0 : !torch.vtensor<[2,4,16,8],bf16>
}

// -----

// The generic form reads like the pretty one; signed integer tensors
// (si64) are signless tensors, their literals bit-identical.
// CHECK-LABEL: func @generic_form_and_si64
// CHECK: arith.constant dense<[0, 5, -3]> : tensor<3xi64>
// CHECK: linalg.generic
// CHECK: arith.addi
// CHECK-NOT: torch.
func.func @generic_form_and_si64(%x: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3],si64> {
  %0 = torch.vtensor.literal(dense<[0, 5, -3]> : tensor<3xsi64>) : !torch.vtensor<[3],si64>
  %one = "torch.constant.int"() {value = 1 : i64} : () -> !torch.int
  %1 = "torch.aten.add.Tensor"(%x, %0, %one) : (!torch.vtensor<[3],si64>, !torch.vtensor<[3],si64>, !torch.int) -> !torch.vtensor<[3],si64>
  return %1 : !torch.vtensor<[3],si64>
}

// -----

// max.dim has two results; its indices are not computed, and not used.
// Non-finite floats are printed in hex.
// CHECK-LABEL: func @max_dim_and_hex_float
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: linalg.generic {{.*}}["parallel", "reduction"]
// CHECK: arith.maximumf
func.func @max_dim_and_hex_float(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
  %int-1 = torch.constant.int -1
  %true = torch.constant.bool true
  %ninf = torch.constant.float 0xFFF0000000000000
  %values, %indices = torch.aten.max.dim %x, %int-1, %true : !torch.vtensor<[4,8],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4,1],f32>, !torch.vtensor<[4,1],si64>
  %0 = torch.aten.eq.Scalar %x, %ninf : !torch.vtensor<[4,8],f32>, !torch.float -> !torch.vtensor<[4,8],i1>
  %1 = torch.aten.where.self %0, %values, %x : !torch.vtensor<[4,8],i1>, !torch.vtensor<[4,1],f32>, !torch.vtensor<[4,8],f32> -> !torch.vtensor<[4,8],f32>
  return %1 : !torch.vtensor<[4,8],f32>
}

// -----

// all.dim is an and-reduction from true (a safe softmax's "every key is
// masked" guard).
// CHECK-LABEL: func @all_dim
// CHECK: %[[TRUE:.+]] = arith.constant true
// CHECK: linalg.fill ins(%[[TRUE]] : i1)
// CHECK: linalg.generic {{.*}}["parallel", "reduction"]
// CHECK: arith.andi
func.func @all_dim(%x: !torch.vtensor<[4,8],i1>) -> !torch.vtensor<[4,1],i1> {
  %int1 = torch.constant.int 1
  %true = torch.constant.bool true
  %0 = torch.aten.all.dim %x, %int1, %true : !torch.vtensor<[4,8],i1>, !torch.int, !torch.bool -> !torch.vtensor<[4,1],i1>
  return %0 : !torch.vtensor<[4,1],i1>
}

// -----

// List arguments (permute's dims) come from ListConstruct.
// CHECK: #[[PERM:.+]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-LABEL: func @permute_list
// CHECK: linalg.generic {indexing_maps = [#[[PERM]], 
func.func @permute_list(%x: !torch.vtensor<[2,3,4],f32>) -> !torch.vtensor<[3,4,2],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %dims = torch.prim.ListConstruct %int1, %int2, %int0 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.permute %x, %dims : !torch.vtensor<[2,3,4],f32>, !torch.list<int> -> !torch.vtensor<[3,4,2],f32>
  return %0 : !torch.vtensor<[3,4,2],f32>
}

// -----

// The ATen forms torch-mlir's default decompositions remove (so no fixture
// has them), written as torch-mlir prints them: matmul, softmax.int,
// masked_fill.Scalar of a triu mask, and _safe_softmax. Same handlers as
// the JSON graph: one attention each, causal.
// CHECK-LABEL: func @undecomposed_causal
// RAISE: remark: attn.attention: 1 branch, softmax, heads 4/4, mask=causal(offset=0) score=[identity]
// RAISE: remark: attn.attention: 1 branch, softmax, heads 4/4, mask=causal(offset=0) score=[identity]
func.func @undecomposed_causal(%q: !torch.vtensor<[2,4,16,8],f32>, %k: !torch.vtensor<[2,4,16,8],f32>, %v: !torch.vtensor<[2,4,16,8],f32>) -> (!torch.vtensor<[2,4,16,8],f32>, !torch.vtensor<[2,4,16,8],f32>) {
  %int-1 = torch.constant.int -1
  %int-2 = torch.constant.int -2
  %int1 = torch.constant.int 1
  %int11 = torch.constant.int 11
  %int16 = torch.constant.int 16
  %none = torch.constant.none
  %false = torch.constant.bool false
  %ninf = torch.constant.float 0xFFF0000000000000
  %cpu = torch.constant.device "cpu"
  %kt = torch.aten.transpose.int %k, %int-2, %int-1 : !torch.vtensor<[2,4,16,8],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,16],f32>
  %s = torch.aten.matmul %q, %kt : !torch.vtensor<[2,4,16,8],f32>, !torch.vtensor<[2,4,8,16],f32> -> !torch.vtensor<[2,4,16,16],f32>
  %size = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %ones = torch.aten.ones %size, %int11, %none, %cpu, %false : !torch.list<int>, !torch.int, !torch.none, !torch.Device, !torch.bool -> !torch.vtensor<[16,16],i1>
  %upper = torch.aten.triu %ones, %int1 : !torch.vtensor<[16,16],i1>, !torch.int -> !torch.vtensor<[16,16],i1>
  %masked = torch.aten.masked_fill.Scalar %s, %upper, %ninf : !torch.vtensor<[2,4,16,16],f32>, !torch.vtensor<[16,16],i1>, !torch.float -> !torch.vtensor<[2,4,16,16],f32>
  %p = torch.aten.softmax.int %masked, %int-1, %none : !torch.vtensor<[2,4,16,16],f32>, !torch.int, !torch.none -> !torch.vtensor<[2,4,16,16],f32>
  %o = torch.aten.matmul %p, %v : !torch.vtensor<[2,4,16,16],f32>, !torch.vtensor<[2,4,16,8],f32> -> !torch.vtensor<[2,4,16,8],f32>
  %ps = torch.aten._safe_softmax %masked, %int-1, %none : !torch.vtensor<[2,4,16,16],f32>, !torch.int, !torch.none -> !torch.vtensor<[2,4,16,16],f32>
  %os = torch.aten.matmul %ps, %v : !torch.vtensor<[2,4,16,16],f32>, !torch.vtensor<[2,4,16,8],f32> -> !torch.vtensor<[2,4,16,8],f32>
  // CHECK-NOT: torch.
  return %o, %os : !torch.vtensor<[2,4,16,8],f32>, !torch.vtensor<[2,4,16,8],f32>
}
