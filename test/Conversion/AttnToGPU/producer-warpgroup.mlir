// RUN: flashlight-opt %s --attn-online-softmax --attn-tile="block-m=128 block-n=128" --canonicalize --cse --attn-to-gpu="tensor-cores=true wgmma=true producer-warpgroup=true ping-pong=true" --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-online-softmax --attn-tile="block-m=128 block-n=128" --canonicalize --cse --attn-to-gpu="tensor-cores=true wgmma=true producer-warpgroup=true" --canonicalize --cse | FileCheck %s --check-prefix=NOTURNS

// Two consumer warpgroups on 128 x 128 tiles and a producer warpgroup
// (threads 256..383) that copies every K/V tile.
// CHECK-LABEL: gpu.func @vanilla
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// The producer's 128 threads fill a buffer (full barriers count 128), the
// 256 consumers release it (empty barriers count 256).
// CHECK: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c256_i32
// Every thread waits for the consumers' Q copies, then the producer forks
// off: it gives up registers, and for each tile t waits for the release of
// tile t - 2 before copying into its buffer, arrives as its copies land,
// and exits.
// CHECK: nvgpu.device_async_wait
// CHECK: gpu.barrier
// CHECK: %[[PRODUCER:.*]] = arith.cmpi uge, %thread_id_x, %c256
// CHECK: scf.if %[[PRODUCER]] {
// CHECK: nvvm.setmaxregister decrease 56
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvgpu.device_async_copy
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true}
// CHECK: nvvm.exit
// The consumers take the registers; warpgroup 1 lets warpgroup 0 issue the
// first S.
// CHECK: nvvm.setmaxregister increase 224
// CHECK: nvvm.barrier.arrive id = %c3_i32 number_of_threads = %c256_i32
// Each step: wait for the tile, take the turn, issue S, hand the turn over.
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.mbarrier.arrive
// CHECK: scf.yield
// Warpgroup 0 takes the turn warpgroup 1 handed over last; block-wide
// barriers are the consumers' own from here on.
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.barrier id = %c5_i32 number_of_threads = %c256_i32
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return

// Without ping-pong, no turns.
// NOTURNS-LABEL: gpu.func @vanilla
// NOTURNS: nvvm.exit
// NOTURNS-NOT: nvvm.barrier.arrive
// NOTURNS: gpu.return
func.func @vanilla(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                   %v: tensor<1x2x512x128xbf16>) -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) scale [0.088388] normalizer softmax
      -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}
