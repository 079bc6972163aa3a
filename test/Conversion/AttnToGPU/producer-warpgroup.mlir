// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 ping-pong=false tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=NOTURNS
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=BOUNDS

// Two consumer warpgroups on 128 x 128 tiles and a producer warpgroup
// (threads 256..383) that copies every K/V tile (the default).
// CHECK-LABEL: gpu.func @vanilla
// CHECK-SAME: known_block_size = array<i32: 384, 1, 1>
// K and V have their own barriers: the producer's 128 threads fill a
// buffer (full: count 128), the 256 consumers release it (empty: 256).
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// A block barrier shows the mbarriers' initialization; the producer then
// forks off without waiting for the consumers' Q copies (its first K and V
// copies overlap them): it gives up registers, and for each tile t waits
// for the release of K_{t-2} before copying K_t, then for V_{t-2}'s before
// copying V_t. A tile is full once its copies landed and the producer
// thread's proxy fence ordered them before the consumers' wgmma reads: it
// lets V_{t-1} land after issuing K_t (all but the newest group), and K_t
// after issuing V_t; the last V before it exits.
// CHECK-NOT: nvgpu.device_async_wait
// CHECK: gpu.barrier
// CHECK-NOT: nvgpu.device_async_wait
// CHECK: %[[PRODUCER:.*]] = arith.cmpi uge, %thread_id_x, %c256
// CHECK: scf.if %[[PRODUCER]] {
// CHECK: nvvm.setmaxregister decrease 56
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: scf.if
// CHECK-NEXT: arith.subi
// CHECK-NEXT: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: nvvm.fence.proxy
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvgpu.device_async_copy %arg2
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK-NEXT: nvvm.fence.proxy
// CHECK: nvvm.mbarrier.arrive
// CHECK: scf.yield
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: nvvm.fence.proxy
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.exit
// CHECK-NOT: nvvm.cp.async.mbarrier.arrive
// The consumers take the registers and let their Q copies land (a barrier
// among the 256 of them); warpgroup 1 lets warpgroup 0 take the first turn,
// and each warpgroup waits for its own.
// CHECK: nvvm.setmaxregister increase 224
// CHECK-NEXT: nvgpu.device_async_wait
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: nvvm.barrier id = %c5_i32 number_of_threads = %c256_i32
// CHECK: nvvm.barrier.arrive id = %c3_i32 number_of_threads = %c256_i32
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// Each step: wait for K_t, issue S_t (the turn's last product), hand the
// turn over, wait for S_t and the P V before it; release K_t, and (after
// the first step) V_{t-1}.
// (One branch: the P V that began the turn stays in flight behind S.)
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvgpu.device_async_copy
// CHECK-NOT: nvvm.wgmma.wait.group
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.mbarrier.arrive
// CHECK: scf.if
// CHECK: nvvm.mbarrier.arrive
// After the softmax: wait for V_t, take the turn, issue P V and leave it in
// flight (no wait before the next step).
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: llvm.inline_asm {{.*}}wgmma.mma_async
// CHECK-NOT: nvvm.wgmma.wait.group
// CHECK: scf.yield
// After the loop: hand the last turn over, wait for the last P V;
// warpgroup 0 takes the turn warpgroup 1 handed over last. Block-wide
// barriers are the consumers' own from here on.
// CHECK: nvvm.barrier.arrive
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.barrier id = %c3_i32 number_of_threads = %c256_i32
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.barrier id = %c5_i32 number_of_threads = %c256_i32
// CHECK-NOT: gpu.barrier
// CHECK: gpu.return

// Without ping-pong, no turns; each step waits for its P V.
// NOTURNS-LABEL: gpu.func @vanilla
// NOTURNS: nvvm.exit
// NOTURNS-NOT: nvvm.barrier.arrive
// NOTURNS: llvm.inline_asm {{.*}}wgmma.mma_async
// NOTURNS: nvvm.wgmma.wait.group.sync.aligned 0
// NOTURNS: scf.yield
// NOTURNS: gpu.return
func.func @vanilla(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                   %v: tensor<1x2x512x128xbf16>) -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) scale [0.088388] normalizer softmax
      -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}

// The producer's tiles lie within K and V when whole tiles divide the
// key length (512): no clamp of the row, so that a thread's copies differ
// by constant offsets.
// BOUNDS-LABEL: gpu.func @vanilla
// BOUNDS: nvvm.setmaxregister decrease 56
// BOUNDS-NOT: arith.minsi
// BOUNDS: nvvm.exit
// With 500 keys the last tile is partial: rows are clamped (and zero-filled).
// BOUNDS-LABEL: gpu.func @partial_tile
// BOUNDS: nvvm.setmaxregister decrease 56
// BOUNDS: scf.for
// BOUNDS: arith.minsi %{{.*}}, %c499
// BOUNDS: nvgpu.device_async_copy %arg1
// BOUNDS: nvvm.exit
func.func @partial_tile(%q: tensor<1x2x500x128xbf16>, %k: tensor<1x2x500x128xbf16>,
                        %v: tensor<1x2x500x128xbf16>) -> tensor<1x2x500x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x500x128xbf16>) k(%k : tensor<1x2x500x128xbf16>)
      v(%v : tensor<1x2x500x128xbf16>) scale [0.088388] normalizer softmax
      -> tensor<1x2x500x128xbf16>
  return %o : tensor<1x2x500x128xbf16>
}

// A staged pair-bias tile goes with K: the consumers release both once the
// step's softmax has read the tile, before the P V (which waits for V's own
// full barrier), so that the producer's copies of the tile after next,
// from DRAM, start a P V earlier.
// CHECK-LABEL: gpu.func @pair_bias
// CHECK: nvvm.setmaxregister increase 224
// CHECK: scf.for
// CHECK: nvvm.wgmma.mma_async
// CHECK: vector.load
// CHECK: nvvm.mbarrier.arrive
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id
// CHECK: llvm.inline_asm {{.*}}wgmma.mma_async
// CHECK-NOT: nvvm.mbarrier.arrive
// CHECK: scf.yield
func.func @pair_bias(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                     %v: tensor<1x2x512x128xbf16>, %bias: tensor<1x2x512x512xbf16>)
    -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) captures(%bias : tensor<1x2x512x512xbf16>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<1x2x512x512xbf16>):
        %c0 = arith.constant 0 : index
        %x = tensor.extract %t[%c0, %h, %i, %j] : tensor<1x2x512x512xbf16>
        %y = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %y : f32
        attn.yield %r : f32
      } -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}
