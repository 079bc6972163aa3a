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

// -----

// Advanced indexing as torch.export writes `table[:, bucket]`: a null entry
// takes dim 0 whole; the index tensor's dims replace the indexed dim. The
// source is read in the body at the loaded index, negative indices counted
// from the end, then clamped into the dim.
// CHECK-LABEL: func @index_leading_none
// CHECK: linalg.generic {indexing_maps = [#[[IDX:.+]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[B:.+]] : tensor<3x5xi64>) outs(%{{.*}} : tensor<4x3x5xf32>)
// CHECK: ^bb0(%[[I:.+]]: i64, %{{.*}}: f32):
// CHECK: %[[H:.+]] = linalg.index 0
// CHECK: %[[X:.+]] = arith.index_cast %[[I]] : i64 to index
// CHECK: %[[NEG:.+]] = arith.cmpi slt, %[[X]], %c0
// CHECK: %[[UP:.+]] = arith.addi %[[X]], %c8
// CHECK: %[[W:.+]] = arith.select %[[NEG]], %[[UP]], %[[X]]
// CHECK: %[[LO:.+]] = arith.maxsi %[[W]], %c0
// CHECK: %[[HI:.+]] = arith.minsi %[[LO]], %c7
// CHECK: tensor.extract %{{.*}}[%[[H]], %[[HI]]] : tensor<4x8xf32>
func.func @index_leading_none(%table: !torch.vtensor<[4,8],f32>, %bucket: !torch.vtensor<[3,5],si64>) -> !torch.vtensor<[4,3,5],f32> {
  %none = torch.constant.none
  %list = torch.prim.ListConstruct %none, %bucket : (!torch.none, !torch.vtensor<[3,5],si64>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %table, %list : !torch.vtensor<[4,8],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[4,3,5],f32>
  return %0 : !torch.vtensor<[4,3,5],f32>
}

// -----

// Index tensors broadcast together ([3, 1] with [1, 4]); separated by a
// dim taken whole, their dims come first (x[i, :, j] is [3, 4, 6]).
// CHECK-DAG: #[[ROWS:.+]] = affine_map<(d0, d1, d2) -> (d0, 0)>
// CHECK-DAG: #[[COLS:.+]] = affine_map<(d0, d1, d2) -> (0, d1)>
// CHECK-LABEL: func @index_broadcast_apart
// CHECK: linalg.generic {indexing_maps = [#[[ROWS]], #[[COLS]], #{{.+}}], {{.*}} ins(%{{.*}}, %{{.*}} : tensor<3x1xi64>, tensor<1x4xi32>) outs(%{{.*}} : tensor<3x4x6xf32>)
// CHECK: ^bb0(%[[I:.+]]: i64, %[[J:.+]]: i32, %{{.*}}: f32):
// CHECK: arith.index_cast %[[I]] : i64 to index
// CHECK: %[[K:.+]] = linalg.index 2
// CHECK: arith.index_cast %[[J]] : i32 to index
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[K]], %{{.*}}] : tensor<5x6x7xf32>
func.func @index_broadcast_apart(%x: !torch.vtensor<[5,6,7],f32>, %i: !torch.vtensor<[3,1],si64>, %j: !torch.vtensor<[1,4],si32>) -> !torch.vtensor<[3,4,6],f32> {
  %none = torch.constant.none
  %list = torch.prim.ListConstruct %i, %none, %j : (!torch.vtensor<[3,1],si64>, !torch.none, !torch.vtensor<[1,4],si32>) -> !torch.list<optional<vtensor>>
  %0 = torch.aten.index.Tensor %x, %list : !torch.vtensor<[5,6,7],f32>, !torch.list<optional<vtensor>> -> !torch.vtensor<[3,4,6],f32>
  return %0 : !torch.vtensor<[3,4,6],f32>
}

// -----

// embedding: rows of the weight; gather: out[i][j] = x[i][index[i][j]];
// index_select: x read at index[i] along dim 0. Integer abs stays integer.
// CHECK-LABEL: func @embedding_gather_index_select
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3x4xbf16>)
// CHECK: tensor.extract %{{.*}} : tensor<10x4xbf16>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<3x2xi64>) outs(%{{.*}} : tensor<3x2xf32>)
// CHECK: %[[R:.+]] = linalg.index 0
// CHECK: tensor.extract %{{.*}}[%[[R]], %{{.*}}] : tensor<3x4xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<5xi64>) outs(%{{.*}} : tensor<5x4xf32>)
// CHECK: %[[C:.+]] = linalg.index 1
// CHECK: tensor.extract %{{.*}}[%{{.*}}, %[[C]]] : tensor<3x4xf32>
// CHECK: math.absi %{{.*}} : i64
func.func @embedding_gather_index_select(%w: !torch.vtensor<[10,4],bf16>, %ids: !torch.vtensor<[2,3],si64>, %x: !torch.vtensor<[3,4],f32>, %g: !torch.vtensor<[3,2],si64>, %s: !torch.vtensor<[5],si64>) -> (!torch.vtensor<[2,3,4],bf16>, !torch.vtensor<[3,2],f32>, !torch.vtensor<[5,4],f32>, !torch.vtensor<[5],si64>) {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %0 = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[10,4],bf16>, !torch.vtensor<[2,3],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,3,4],bf16>
  %1 = torch.aten.gather %x, %int1, %g, %false : !torch.vtensor<[3,4],f32>, !torch.int, !torch.vtensor<[3,2],si64>, !torch.bool -> !torch.vtensor<[3,2],f32>
  %2 = torch.aten.index_select %x, %int0, %s : !torch.vtensor<[3,4],f32>, !torch.int, !torch.vtensor<[5],si64> -> !torch.vtensor<[5,4],f32>
  %3 = torch.aten.abs %s : !torch.vtensor<[5],si64> -> !torch.vtensor<[5],si64>
  return %0, %1, %2, %3 : !torch.vtensor<[2,3,4],bf16>, !torch.vtensor<[3,2],f32>, !torch.vtensor<[5,4],f32>, !torch.vtensor<[5],si64>
}
