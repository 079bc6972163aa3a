// RUN: flashlight-opt %s --attn-plan="block-m=128 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// 128-row tiles: 4 warps of two m16 tiles each (32 query rows). With
// D = 128, Q's A fragments would take 64 registers per thread next to 128 of
// accumulators, so Q stays in its own shared-memory tile (after K and V) and
// the dynamic shared memory passes 48 KB; ptxas budgets for 2 blocks per SM.
// CHECK-LABEL: gpu.func @vanilla
// CHECK-SAME: block_m = 128
// CHECK-SAME: flashlight.dynamic_shared_memory = 69632
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: nvvm.minctasm = 2
// CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[KS:.*]] = memref.view %[[SMEM]][%c0][] {{.*}} to memref<64x136xbf16
// CHECK: %[[VS:.*]] = memref.view %[[SMEM]][%c17408][] {{.*}} to memref<64x136xbf16
// CHECK: %[[QS:.*]] = memref.view %[[SMEM]][%c34816][] {{.*}} to memref<128x136xbf16
// The state per thread: 4 rows' max and sum, 2 x 16 accumulator fragments.
// CHECK: scf.for {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32
// Per 16-wide k step: one A fragment per m16 tile from the Q tile, then each
// K fragment (two 8-key blocks) feeds both m16 tiles: 4 mma per ldmatrix.
// CHECK: %[[A0:.*]] = nvgpu.ldmatrix %[[QS]]
// CHECK: %[[A1:.*]] = nvgpu.ldmatrix %[[QS]]
// CHECK: nvgpu.ldmatrix %[[KS]]
// CHECK-COUNT-4: nvvm.mma.sync
// CHECK-NOT: nvgpu.ldmatrix %[[QS]]
// CHECK: nvgpu.ldmatrix %[[KS]]
// P V: each V fragment (two 8-column blocks) feeds both m16 tiles too.
// CHECK: nvgpu.ldmatrix %[[VS]]{{.*}} transpose = true
// CHECK-COUNT-4: nvvm.mma.sync
// CHECK: nvgpu.ldmatrix %[[VS]]{{.*}} transpose = true
func.func @vanilla(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>,
                   %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x128xbf16>) k(%k : tensor<1x2x256x128xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) scale [0.088] normalizer softmax
      -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}
