// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_80" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a tensor-cores=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s --check-prefix=REF

// Terms (the score region's yields after the logit): the kernel takes
// their tensors as outputs after the attention's. A term that keeps every
// dim (a pair bias's gradient) is stored per element; one summed over the
// batch added atomically per element; a per-head one summed by each thread
// over its elements, then over the warp (five shuffles), one atomic add
// per warp and step. Elements the mask drops add 0; rows past M (a
// partial query tile's: M = 100) add nothing, under a bounds test.
// CHECK-LABEL: gpu.func @terms
// CHECK-SAME: %{{.*}}: memref<2x2x100x100xf32, strided<[?, ?, ?, 1]>>, %{{.*}}: memref<2x100x100xf32, strided<[?, ?, 1]>>, %{{.*}}: memref<2xf32, strided<[1]>>)
// CHECK: wgmma.mma_async
// CHECK: scf.if
// CHECK: memref.store %{{.*}} : memref<2x2x100x100xf32, strided<[?, ?, ?, 1]>>
// CHECK: memref.atomic_rmw addf %{{.*}} : (f32, memref<2x100x100xf32, strided<[?, ?, 1]>>) -> f32
// CHECK-COUNT-5: gpu.shuffle  xor
// CHECK: scf.if
// CHECK: memref.atomic_rmw addf %{{.*}} : (f32, memref<2xf32, strided<[1]>>) -> f32
// mma.sync shares the fragments' code.
// SM80-LABEL: gpu.func @terms
// SM80: nvvm.mma.sync
// SM80: memref.store %{{.*}} : memref<2x2x100x100xf32, strided<[?, ?, ?, 1]>>
// SM80: memref.atomic_rmw addf %{{.*}} : (f32, memref<2x100x100xf32, strided<[?, ?, 1]>>) -> f32
// SM80-COUNT-5: gpu.shuffle  xor
// SM80: memref.atomic_rmw addf %{{.*}} : (f32, memref<2xf32, strided<[1]>>) -> f32
// The reference generator: lane 0 of the row's warp, per element (the
// per-head term atomically too; canonicalization merges the guards).
// REF-LABEL: gpu.func @terms
// REF: %[[FIRST:.+]] = arith.cmpi eq, %{{.*}}, %c0
// REF: %[[VALID:.+]] = arith.andi %{{.*}}, %[[FIRST]] : i1
// REF: scf.if %[[VALID]] {
// REF-NEXT: memref.store %{{.*}} : memref<2x2x100x100xf32, strided<[?, ?, ?, 1]>>
// REF-NEXT: memref.atomic_rmw addf %{{.*}} : (f32, memref<2x100x100xf32, strided<[?, ?, 1]>>) -> f32
// REF-NEXT: memref.atomic_rmw addf %{{.*}} : (f32, memref<2xf32, strided<[1]>>) -> f32
func.func @terms(%q: tensor<2x2x100x64xbf16>, %k: tensor<2x2x100x64xbf16>, %v: tensor<2x2x100x64xbf16>, %bias: tensor<2x2x100x100xbf16>) -> (tensor<2x2x100x64xbf16>, tensor<2x2x100x100xf32>, tensor<2x100x100xf32>, tensor<2xf32>) {
  %o, %t0, %t1, %t2 = attn.attention q(%q : tensor<2x2x100x64xbf16>) k(%k : tensor<2x2x100x64xbf16>) v(%v : tensor<2x2x100x64xbf16>) captures(%bias : tensor<2x2x100x100xbf16>) term_dims [array<i64: 0, 1, 2, 3>, array<i64: 1, 2, 3>, array<i64: 1>] scale [0.125] normalizer none
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2x2x100x100xbf16>):
      %x = tensor.extract %t[%b, %h, %i, %j] : tensor<2x2x100x100xbf16>
      %y = arith.extf %x : bf16 to f32
      %r = arith.addf %s, %y : f32
      %m = arith.mulf %s, %y : f32
      attn.yield %r, %y, %m, %s : f32, f32, f32, f32
    } mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %t: tensor<2x2x100x100xbf16>):
      %keep = arith.cmpi sle, %j, %i : index
      attn.yield %keep : i1
    } -> tensor<2x2x100x64xbf16>, tensor<2x2x100x100xf32>, tensor<2x100x100xf32>, tensor<2xf32>
  return %o, %t0, %t1, %t2 : tensor<2x2x100x64xbf16>, tensor<2x2x100x100xf32>, tensor<2x100x100xf32>, tensor<2xf32>
}

// -----

// Lengths that whole tiles divide, no mask: a term that keeps every dim
// goes out as 8-byte pairs (a row's two adjacent columns), no bounds test.
// CHECK-LABEL: gpu.func @terms_nomask
// CHECK-NOT: memref.store %{{.*}} : memref<2x4x256x256xf32
// CHECK: vector.store %{{.*}} {alignment = 8 : i64} : memref<2x4x256x256xf32, strided<[?, ?, ?, 1]>>, vector<2xf32>
// CHECK-NOT: memref.store %{{.*}} : memref<2x4x256x256xf32
// CHECK: gpu.return
func.func @terms_nomask(%q: tensor<2x4x256x64xbf16>, %k: tensor<2x4x256x64xbf16>, %v: tensor<2x4x256x64xbf16>, %bias: tensor<2x4x256x256xbf16>) -> (tensor<2x4x256x64xbf16>, tensor<2x4x256x256xf32>, tensor<4x256x256xf32>, tensor<4xf32>) {
  %o, %t0, %t1, %t2 = attn.attention q(%q : tensor<2x4x256x64xbf16>) k(%k : tensor<2x4x256x64xbf16>) v(%v : tensor<2x4x256x64xbf16>) captures(%bias : tensor<2x4x256x256xbf16>) term_dims [array<i64: 0, 1, 2, 3>, array<i64: 1, 2, 3>, array<i64: 1>] scale [0.125] normalizer none
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2x4x256x256xbf16>):
      %x = tensor.extract %t[%b, %h, %i, %j] : tensor<2x4x256x256xbf16>
      %y = arith.extf %x : bf16 to f32
      %r = arith.addf %s, %y : f32
      %m = arith.mulf %s, %y : f32
      attn.yield %r, %y, %m, %s : f32, f32, f32, f32
    } -> tensor<2x4x256x64xbf16>, tensor<2x4x256x256xf32>, tensor<4x256x256xf32>, tensor<4xf32>
  return %o, %t0, %t1, %t2 : tensor<2x4x256x64xbf16>, tensor<2x4x256x256xf32>, tensor<4x256x256xf32>, tensor<4xf32>
}

// -----

// Row terms (keep q_idx, not kv_idx: a learned slope's gradient sums):
// each thread sums its elements of each row it holds, the quad holding the
// row sums them (two shuffles), and its first lane adds the row's sum
// atomically, once per row and step. Rows past M add 0 (their elements
// are selected away before the sums).
// CHECK-LABEL: gpu.func @row_terms
// CHECK-SAME: %{{.*}}: memref<2x2x100xf32, strided<[?, ?, 1]>>, %{{.*}}: memref<100xf32, strided<[1]>>)
// CHECK: wgmma.mma_async
// CHECK-COUNT-2: gpu.shuffle  xor
// CHECK: scf.if
// CHECK-NEXT: memref.atomic_rmw addf %{{.*}} : (f32, memref<2x2x100xf32, strided<[?, ?, 1]>>) -> f32
// CHECK-NEXT: memref.atomic_rmw addf %{{.*}} : (f32, memref<100xf32, strided<[1]>>) -> f32
// SM80-LABEL: gpu.func @row_terms
// SM80: nvvm.mma.sync
// SM80-COUNT-2: gpu.shuffle  xor
// SM80: scf.if
// SM80-NEXT: memref.atomic_rmw addf %{{.*}} : (f32, memref<2x2x100xf32, strided<[?, ?, 1]>>) -> f32
// REF-LABEL: gpu.func @row_terms
// REF: scf.if %{{[0-9]+}} {
// REF-NEXT: memref.atomic_rmw addf %{{.*}} : (f32, memref<2x2x100xf32, strided<[?, ?, 1]>>) -> f32
// REF-NEXT: memref.atomic_rmw addf %{{.*}} : (f32, memref<100xf32, strided<[1]>>) -> f32
func.func @row_terms(%q: tensor<2x2x100x64xbf16>, %k: tensor<2x2x100x64xbf16>, %v: tensor<2x2x100x64xbf16>, %slope: tensor<2xf32>) -> (tensor<2x2x100x64xbf16>, tensor<2x2x100xf32>, tensor<100xf32>) {
  %o, %t0, %t1 = attn.attention q(%q : tensor<2x2x100x64xbf16>) k(%k : tensor<2x2x100x64xbf16>) v(%v : tensor<2x2x100x64xbf16>) captures(%slope : tensor<2xf32>) term_dims [array<i64: 0, 1, 2>, array<i64: 2>] scale [0.125] normalizer none
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
      %x = tensor.extract %m[%h] : tensor<2xf32>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %y = arith.mulf %x, %df : f32
      %r = arith.addf %s, %y : f32
      %g = arith.mulf %s, %df : f32
      attn.yield %r, %g, %s : f32, f32, f32
    } mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
      %keep = arith.cmpi sle, %j, %i : index
      attn.yield %keep : i1
    } -> tensor<2x2x100x64xbf16>, tensor<2x2x100xf32>, tensor<100xf32>
  return %o, %t0, %t1 : tensor<2x2x100x64xbf16>, tensor<2x2x100xf32>, tensor<100xf32>
}
