// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64 branch-lookahead=true producer-warpgroup=false tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=WGMMA
// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=MMA
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64 branch-lookahead=false producer-warpgroup=false tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=SEQ
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64 tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=PRODUCER

// Differential attention on tensor cores: two logit branches, each with its
// own Q and K tiles, online-softmax state and accumulators, sharing one V
// tile per step; the epilogue combines o_1 - lambda * o_2.

// wgmma: per branch a Q tile (128 x 64) and a double-buffered K tile, one
// double-buffered V tile, the mbarriers, and the 1024 alignment bytes:
// 1024 + 2 * 16384 + 2 * 16384 + 16384 + 32.
// WGMMA-LABEL: gpu.func @differential
// WGMMA-SAME: generator = wgmma
// WGMMA-SAME: flashlight.dynamic_shared_memory = 82976
// WGMMA-SAME: known_block_size = array<i32: 256, 1, 1>
// (The WGMMA and SEQ runs keep the consumers' own copies; the default, a
// producer warpgroup, is checked below with the PRODUCER prefix.)
// lambda (batch/head-free) is read once, before the loop.
// WGMMA: %[[LAMBDA:.*]] = memref.load %arg5[] : memref<f32>
// Both branches' Q tiles are filled from their own tensors.
// WGMMA: nvgpu.device_async_copy %arg0
// WGMMA: nvgpu.device_async_copy %arg1
// The loop carries max and sum (2 rows each) and 32 accumulators per branch.
// WGMMA: scf.for {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32,
// The first tile: both K tiles, then V, then one arrival on "full".
// WGMMA: nvgpu.device_async_copy %arg2
// WGMMA: nvgpu.device_async_copy %arg3
// WGMMA: nvgpu.device_async_copy %arg4
// WGMMA: nvvm.cp.async.mbarrier.arrive
// S_1 = Q_1 K_1^T (four k16 steps), then S_2 issued ahead: the tensor cores
// compute it during softmax_1 (wait for all groups but the newest).
// WGMMA: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// WGMMA-COUNT-3: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// WGMMA-NEXT: nvvm.wgmma.commit.group.sync.aligned
// WGMMA: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// WGMMA-COUNT-3: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// WGMMA-NEXT: nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// P_1 V, left in flight while S_2 is waited for (softmax_2 then runs
// alongside it).
// WGMMA-COUNT-4: llvm.inline_asm {{.*}}m64n64k16
// WGMMA-NEXT: nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NOT: nvvm.wgmma.mma_async
// WGMMA: nvvm.wgmma.wait.group.sync.aligned 1
// The next tile's K of both branches and V go to the other buffers.
// WGMMA: nvgpu.device_async_copy %arg2
// WGMMA: nvgpu.device_async_copy %arg3
// WGMMA: nvgpu.device_async_copy %arg4
// P_2 V.
// WGMMA: llvm.inline_asm {{.*}}m64n64k16
// The buffers are released once, after the last P V.
// WGMMA: nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-NOT: nvvm.wgmma
// WGMMA: nvvm.mbarrier.arrive
// WGMMA-NOT: nvvm.mbarrier.arrive
// WGMMA: scf.yield
// The epilogue: o_1 - lambda * o_2 per element (a bf16 output: afn too).
// WGMMA: %[[SCALED:.*]] = arith.mulf %[[LAMBDA]], %{{.*}} fastmath<reassoc,contract,afn> : f32
// WGMMA: arith.subf %{{.*}}, %[[SCALED]] fastmath<reassoc,contract,afn> : f32

// Without branch-lookahead (the default until checked on a GPU), each
// branch's S, softmax and P V complete before the next branch's S.
// SEQ-LABEL: gpu.func @differential
// SEQ: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// SEQ-COUNT-3: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// SEQ-NEXT: nvvm.wgmma.commit.group.sync.aligned
// SEQ-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// SEQ-COUNT-4: llvm.inline_asm {{.*}}m64n64k16
// SEQ-NEXT: nvvm.wgmma.commit.group.sync.aligned
// SEQ-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// SEQ: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// SEQ-LABEL: gpu.func @mixed

// mma.sync: Q of both branches in registers (128 columns in all), staged
// through the first K tile one branch after the other.
// MMA-LABEL: gpu.func @differential
// MMA-SAME: generator = mma_sync
// MMA: nvgpu.device_async_copy %arg0
// MMA: nvgpu.device_async_wait
// MMA: nvgpu.ldmatrix
// The second branch's Q reuses the staging tile once every warp read it.
// MMA: gpu.barrier
// MMA-NEXT: nvgpu.device_async_copy %arg1
// MMA: scf.for
// Both K tiles are staged, then V; S_1 is 8 mma per k16 step.
// MMA: nvgpu.device_async_copy %arg2
// MMA: nvgpu.device_async_copy %arg3
// MMA: nvgpu.device_async_copy %arg4
// MMA-COUNT-32: nvvm.mma.sync
func.func @differential(%q1: tensor<2x4x256x64xbf16>, %q2: tensor<2x4x256x64xbf16>,
                        %k1: tensor<2x4x256x64xbf16>, %k2: tensor<2x4x256x64xbf16>,
                        %v: tensor<2x4x256x64xbf16>, %lambda: tensor<f32>)
    -> tensor<2x4x256x64xbf16> {
  %o = attn.attention q(%q1, %q2 : tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>)
                      k(%k1, %k2 : tensor<2x4x256x64xbf16>, tensor<2x4x256x64xbf16>)
                      v(%v : tensor<2x4x256x64xbf16>)
                      captures(%lambda : tensor<f32>)
         scale [0.125, 0.125] normalizer softmax
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index,
              %l: tensor<f32>):
           %lam = tensor.extract %l[] : tensor<f32>
           %scaled = arith.mulf %lam, %o2 : f32
           %r = arith.subf %o1, %scaled : f32
           attn.yield %r : f32
         } -> tensor<2x4x256x64xbf16>
  return %o : tensor<2x4x256x64xbf16>
}

// With the producer warpgroup (the default): it copies both K tiles, then
// V, each set with its own full barrier. Two branches' state: the
// consumers take 240 registers, the producer keeps 24. After both K tiles
// (two groups), the previous V has landed once two groups are pending.
// PRODUCER-LABEL: gpu.func @differential
// PRODUCER-SAME: known_block_size = array<i32: 384, 1, 1>
// PRODUCER: nvvm.setmaxregister decrease 24
// PRODUCER: nvgpu.device_async_copy %arg2
// PRODUCER: nvgpu.device_async_copy %arg3
// PRODUCER: nvgpu.device_async_wait %{{.*}} {numGroups = 2 : i32}
// PRODUCER: nvvm.mbarrier.arrive
// PRODUCER: nvgpu.device_async_copy %arg4
// PRODUCER: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// PRODUCER: nvvm.mbarrier.arrive
// PRODUCER: nvvm.exit
// PRODUCER: nvvm.setmaxregister increase 240
// Ping-pong: a step takes two turns (no branch lookahead). S_1 ends the
// turn the previous tile's P_2 V began; P_1 V begins the next turn and S_2
// ends it; then P_2 V begins a turn. With two branches, a turn's P V
// completes before its S is issued, so that P's registers and S's
// accumulators are never live at once.
// PRODUCER: scf.for
// PRODUCER: nvvm.wgmma.wait.group.sync.aligned 0
// PRODUCER-NEXT: nvvm.wgmma.fence.aligned
// PRODUCER: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// PRODUCER: nvvm.barrier.arrive
// PRODUCER-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// PRODUCER: nvvm.barrier id
// PRODUCER: llvm.inline_asm {{.*}}wgmma.mma_async
// PRODUCER: nvvm.wgmma.wait.group.sync.aligned 0
// PRODUCER-NEXT: nvvm.wgmma.fence.aligned
// PRODUCER: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// PRODUCER: nvvm.barrier.arrive
// PRODUCER-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// Both S done: K_t is released.
// PRODUCER: nvvm.mbarrier.arrive
// PRODUCER: nvvm.barrier id
// PRODUCER: llvm.inline_asm {{.*}}wgmma.mma_async
// PRODUCER-NOT: nvvm.wgmma.wait.group
// PRODUCER: scf.yield

// -----

// A score region that mixes the branches (logit 0 reads s_1): both S
// products come before either softmax.
// WGMMA-LABEL: gpu.func @mixed
// WGMMA: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// WGMMA-COUNT-3: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// WGMMA-NEXT: nvvm.wgmma.commit.group.sync.aligned
// WGMMA-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WGMMA-NOT: llvm.inline_asm {{.*}}wgmma.mma_async
// WGMMA: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// MMA-LABEL: gpu.func @mixed
func.func @mixed(%q: tensor<1x2x128x64xf16>, %k: tensor<1x2x128x64xf16>,
                 %v: tensor<1x2x128x64xf16>) -> tensor<1x2x128x64xf16> {
  %o = attn.attention q(%q, %q : tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>)
      k(%k, %k : tensor<1x2x128x64xf16>, tensor<1x2x128x64xf16>)
      v(%v : tensor<1x2x128x64xf16>) scale [0.125, 0.25] normalizer softmax
      score {
      ^bb0(%s0: f32, %s1: f32, %b: index, %h: index, %i: index, %j: index):
        %m = arith.addf %s0, %s1 : f32
        attn.yield %m, %s1 : f32, f32
      }
      epilogue {
      ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
        %r = arith.subf %o1, %o2 : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xf16>
  return %o : tensor<1x2x128x64xf16>
}

