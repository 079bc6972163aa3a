// RUN: flashlight-opt %s --attn-plan="arch=sm_90a" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=WGMMA
// RUN: flashlight-opt %s --attn-plan="arch=sm_80" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=MMA

// A gradient program's dQ (attn-gradient): the dP = dO V^T branch only
// feeds branch 0's score region, which yields the constant 0 as its
// weight (normalizer none). Its P V would add zeros: no product is issued
// for it and its accumulators fold away.
// wgmma (128 x 128): S of both branches (4 k-steps each at D = 64), one P V
// of 8 k-steps over the 128 keys.
// WGMMA-LABEL: gpu.func @dq
// WGMMA: scf.for
// WGMMA-COUNT-8: nvvm.wgmma.mma_async
// WGMMA-COUNT-8: llvm.inline_asm {{.*}}wgmma.mma_async
// WGMMA-NOT: wgmma.mma_async
// WGMMA: gpu.return
// mma.sync (64 x 64): S of both branches, 2 x 8 x 4 products, and one
// P V, 8 x 4; the loop carries one branch's 32 accumulators.
// MMA-LABEL: gpu.func @dq
// MMA: scf.for {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// MMA-COUNT-96: nvvm.mma.sync
// MMA-NOT: nvvm.mma.sync
// MMA: gpu.return
func.func @dq(%q: tensor<1x2x256x64xbf16>, %do: tensor<1x2x256x64xbf16>,
              %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q, %do : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
      k(%k, %v : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
      v(%k : tensor<1x2x256x64xbf16>) scale [0.125, 1.0] normalizer none
      score {
      ^bb0(%s: f32, %dp: f32, %b: index, %h: index, %i: index, %j: index):
        %y = arith.mulf %s, %dp : f32
        %zero = arith.constant 0.0 : f32
        attn.yield %y, %zero : f32, f32
      } epilogue {
      ^bb0(%x: f32, %x1: f32, %b: index, %h: index, %i: index, %d: index):
        attn.yield %x : f32
      } -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}
