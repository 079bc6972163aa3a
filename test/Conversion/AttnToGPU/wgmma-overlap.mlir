// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s --check-prefix=WIDE

// wgmma's software-pipelined KV loop: each step issues S_t = Q K_t^T and the
// P V of tile t - 1, and computes softmax_t while that P V runs.
// CHECK-LABEL: gpu.func @vanilla
// 128 x 128 tiles keep the plain loop (measured slower pipelined).
// WIDE-LABEL: gpu.func @vanilla
// WIDE-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// WIDE: gpu.return
// The peeled first step: S_0 alone, then K_1 and V_0 are copied (V one step
// behind K) and P_0 is converted.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: nvvm.wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-COUNT-4: nvgpu.device_async_copy %arg1
// CHECK-COUNT-4: nvgpu.device_async_copy %arg2
// CHECK: arith.truncf {{.*}} to vector<2xbf16>
// The loop starts at the second tile and carries P (as f32 bit patterns).
// CHECK: scf.for %{{.*}} = %c64 to %c256 step %c64
// CHECK: nvgpu.device_async_wait
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// S_t first, then the owed P_{t-1} V_{t-1}, each its own group; the wait
// lets P V run on. O takes the previous step's rescale while S_t runs.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: nvvm.wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: arith.mulf
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK-COUNT-4: llvm.inline_asm has_side_effects {{.*}}"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// Softmax_t overlaps P V: no conversion of P_t to 16 bits before P V has
// landed (it takes P_{t-1}'s registers).
// CHECK-NOT: arith.truncf
// exp2 flushes subnormal weights to 0: one MUFU instruction each
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK-NOT: arith.truncf
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: arith.truncf {{.*}} to vector<2xbf16>
// CHECK: scf.yield
// After the loop: the last tile's P V, once its V has landed (and O has
// taken the last rescale).
// CHECK: nvgpu.device_async_wait
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: gpu.barrier
// CHECK: arith.mulf
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: llvm.inline_asm has_side_effects {{.*}}"wgmma.mma_async
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
func.func @vanilla(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>,
                   %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x128xbf16>) k(%k : tensor<1x2x256x128xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) scale [0.088] normalizer softmax
      -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}

// -----

// Sequence lengths known at run time: a KV range may be empty, so the
// peeled step, the loop and the last P V run only when it is not.
// CHECK-LABEL: gpu.func @dynamic
// CHECK: %[[ANY:.*]] = arith.cmpi sgt, %{{.*}}, %c0 : index
// CHECK: scf.if %[[ANY]]
// CHECK: scf.for
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: scf.yield
// CHECK: llvm.inline_asm has_side_effects {{.*}}"wgmma.mma_async
// CHECK: } else {
func.func @dynamic(%q: tensor<1x2x?x64xf16>, %k: tensor<1x2x?x64xf16>,
                   %v: tensor<1x2x?x64xf16>) -> tensor<1x2x?x64xf16> {
  %o = attn.attention q(%q : tensor<1x2x?x64xf16>) k(%k : tensor<1x2x?x64xf16>)
      v(%v : tensor<1x2x?x64xf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x?x64xf16>
  return %o : tensor<1x2x?x64xf16>
}

// -----

// Causal: the full/partial scf.if is converted twice (the peeled step and
// the loop), and each branch issues S_t and the owed P V.
// CHECK-LABEL: gpu.func @causal
// The pipelined loop keeps its block-wide barrier (mbarriers measured
// slower there).
// CHECK-NOT: mbarrier
// CHECK: scf.for
// CHECK: scf.if
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: } else {
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
func.func @causal(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>,
                  %v: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x64xbf16>) k(%k : tensor<1x2x256x64xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sle, %j, %i : index
        attn.yield %keep : i1
      } -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}

// -----

// A block-masked program keeps the plain loop (it visits kept tiles only).
// CHECK-LABEL: gpu.func @documents
// CHECK-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: gpu.return
func.func @documents(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>,
                     %v: tensor<1x2x256x64xbf16>, %doc: tensor<1x256xi32>)
    -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x64xbf16>) k(%k : tensor<1x2x256x64xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) captures(%doc : tensor<1x256xi32>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<1x256xi32>):
        %di = tensor.extract %d[%b, %i] : tensor<1x256xi32>
        %dj = tensor.extract %d[%b, %j] : tensor<1x256xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      } -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}
