// RUN: flashlight-opt %s --attn-online-softmax --attn-tile="block-m=4 block-n=8" --canonicalize --cse --attn-to-gpu --canonicalize | FileCheck %s

// One kernel per attention; the host function is gone. Its parameters are
// the function's tensors as memrefs: q, k, v, then the output.
// CHECK: module attributes {gpu.container_module}
// CHECK-NOT: func.func
// CHECK: gpu.module @flashlight_kernels
// CHECK: gpu.func @causal(%[[Q:.*]]: memref<2x4x32x8xf16, strided<[?, ?, ?, 1]>>, %[[K:.*]]: memref<2x2x32x8xf16, strided<[?, ?, ?, 1]>>, %[[V:.*]]: memref<2x2x32x8xf16, strided<[?, ?, ?, 1]>>, %[[OUT:.*]]: memref<2x4x32x8xf16, strided<[?, ?, ?, 1]>>) kernel
// block_m warps of 32 lanes
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// warp w owns query row q0 + w; lane l owns columns l, l + 32, ...
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: %[[WARP:.*]] = arith.divui %[[TID]]
// CHECK: %[[LANE:.*]] = arith.remui %[[TID]]
// (b, h, query tile) = block ids (z, y, x)
// CHECK-DAG: %[[B:.*]] = gpu.block_id z
// CHECK-DAG: %[[H:.*]] = gpu.block_id y
// CHECK-DAG: gpu.block_id x
// GQA: KV head h / 2
// CHECK: %[[HKV:.*]] = arith.divui %[[H]]
// Q is loaded into registers once, before the KV loop; with D = 8 < 32 the
// lanes past D read a clamped column and use 0
// CHECK: %[[COL:.*]] = arith.minsi %[[LANE]]
// CHECK: memref.load %[[Q]][%[[B]], %[[H]], %{{.*}}, %[[COL]]]
// CHECK: arith.select
// CHECK: scf.for %[[K0:.*]] = {{.*}} iter_args
// full tiles skip the mask
// CHECK: scf.if
// per key: s = scale * log2(e) * (warp sum of q . k), softmax in base 2
// CHECK: scf.for %[[J:.*]] =
// CHECK: memref.load %[[K]][%[[B]], %[[HKV]]
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: arith.mulf %{{.*}}, %cst{{.*}} : f32
// m_new = max(m, s); alpha = exp2(m - m_new); p = exp2(s - m_new)
// CHECK: arith.maximumf
// CHECK: math.exp2
// CHECK: math.exp2
// CHECK: } else {
// the partial tile evaluates the mask: kv <= q
// CHECK: arith.cmpi sge
// out = acc / l (0 for a row with no kept key), stored by valid rows
// CHECK: arith.divf
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[B]], %[[H]]
func.func @causal(%q: tensor<2x4x32x8xf16>, %k: tensor<2x2x32x8xf16>,
                  %v: tensor<2x2x32x8xf16>) -> tensor<2x4x32x8xf16> {
  %o = attn.attention q(%q : tensor<2x4x32x8xf16>) k(%k : tensor<2x2x32x8xf16>)
      v(%v : tensor<2x2x32x8xf16>) scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<2x4x32x8xf16>
  return %o : tensor<2x4x32x8xf16>
}
