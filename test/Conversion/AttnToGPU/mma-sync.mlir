// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --verify-diagnostics | FileCheck %s

// The tensor-core generator: 4 warps of 16 query rows; K and V tiles staged
// in dynamic shared memory with rows padded by 8 elements; ptxas budgets
// registers for 3 blocks per SM.
// CHECK-LABEL: gpu.func @causal
// CHECK-SAME: generator = mma_sync
// CHECK-SAME: flashlight.dynamic_shared_memory = 18432
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: nvvm.minctasm = 3
// CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[KS:.*]] = memref.view %[[SMEM]][%c0][] {{.*}} to memref<64x72xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[VS:.*]] = memref.view %[[SMEM]][%c9216][] {{.*}} to memref<64x72xbf16, #gpu.address_space<workgroup>>
// Q goes through shared memory (cp.async, waited for) into A fragments,
// once, before the KV loop.
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[KS]]
// CHECK: %[[QG:.*]] = nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %[[QG]] {numGroups = 0 : i32}
// CHECK: gpu.barrier
// CHECK: nvgpu.ldmatrix %[[KS]]{{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: scf.for
// each KV tile: one barrier; K is copied here only for the first tile (later
// tiles' K was prefetched by the previous step); V's copies form a group
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[KS]]
// CHECK: nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[VS]]
// CHECK: %[[VG:.*]] = nvgpu.device_async_create_group
// CHECK: scf.if
// S = Q K^T as soon as K has landed (V may still be in flight)
// CHECK: nvgpu.device_async_wait %[[VG]] {numGroups = 1 : i32}
// CHECK: nvgpu.ldmatrix %[[KS]]{{.*}} {numTiles = 4 : i32, transpose = false}
// CHECK: nvvm.mma.sync {{.*}} multiplicandAPtxType = #nvvm.mma_type<bf16>{{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>
// once every warp has read K, the next tile's K is prefetched into it
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy %{{.*}}, %[[KS]]
// CHECK: nvgpu.device_async_create_group
// the row max combines the 4 lanes of a row
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c2_i32
// exp2 flushes subnormal weights to 0: one MUFU instruction each
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// P stays in registers as the A operand; V is read transposed
// CHECK: arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// V has landed (the next K may still be in flight)
// CHECK: nvgpu.device_async_wait %[[VG]] {numGroups = 1 : i32}
// CHECK: nvgpu.ldmatrix %[[VS]]{{.*}} {numTiles = 4 : i32, transpose = true}
// CHECK: nvvm.mma.sync
// the output leaves as column pairs, one aligned 4-byte store each
// CHECK: scf.yield
// CHECK: vector.from_elements %{{.*}}, %{{.*}} : vector<2xbf16>
// CHECK: vector.store %{{.*}} {alignment = 4 : i64} : memref<1x2x128x64xbf16, strided<[?, ?, ?, 1]>>, vector<2xbf16>
// CHECK-NOT: memref.store
func.func @causal(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                  %v: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}

// -----

// The reference generator cannot take 64-row tiles (64 warps per block).
func.func @f32_inputs(%q: tensor<1x2x64x64xf32>, %k: tensor<1x2x64x64xf32>,
                      %v: tensor<1x2x64x64xf32>) -> tensor<1x2x64x64xf32> {
  // expected-remark @+2 {{tensor-core path not taken: Q/K/V are not f16 or bf16}}
  // expected-error @+1 {{attn-plan: block-m 64 needs 2048 threads per block with the reference code generator (at most 1024)}}
  %o = attn.attention q(%q : tensor<1x2x64x64xf32>) k(%k : tensor<1x2x64x64xf32>)
      v(%v : tensor<1x2x64x64xf32>) scale [0.125] normalizer softmax
      -> tensor<1x2x64x64xf32>
  return %o : tensor<1x2x64x64xf32>
}
