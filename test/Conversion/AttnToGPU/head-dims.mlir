// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_80" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=MMA
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=NOTMA

// Head dims past 128 on tensor cores. Gemma's 256: wgmma on 128 x 64 tiles
// (197,696 bytes of shared memory, within sm_90a's 227 KiB) with the
// producer warpgroup: S = Q K^T in 16 k16 steps of m64n64, P V in 4 k16
// steps of m64n256 (P from registers). mma.sync (sm_80) takes one m16 tile
// per warp.
// CHECK-LABEL: gpu.func @gemma
// CHECK-SAME: shared_memory = 197696
// CHECK: nvvm.setmaxregister decrease 56
// CHECK: nvvm.exit
// CHECK: nvvm.setmaxregister increase 224
// CHECK-COUNT-16: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>
// CHECK: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// CHECK: gpu.return
// MMA-LABEL: gpu.func @gemma
// MMA-SAME: warp_rows = 16
// MMA: nvvm.mma.sync
// MMA: gpu.return
func.func @gemma(%q: tensor<1x2x256x256xbf16>, %k: tensor<1x2x256x256xbf16>,
                 %v: tensor<1x2x256x256xbf16>) -> tensor<1x2x256x256xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x256xbf16>) k(%k : tensor<1x2x256x256xbf16>)
      v(%v : tensor<1x2x256x256xbf16>) scale [0.0625] normalizer softmax
      -> tensor<1x2x256x256xbf16>
  return %o : tensor<1x2x256x256xbf16>
}

// -----

// MLA's head dims (Q.K 192, V 128): with the TMA producer, 128-key tiles
// fit sm_90a's budget (214,080 bytes; sm_80's 163 KiB takes 64 keys):
// S in 12 k16 steps of m64n128, P V of m64n128 over 8 k16 steps.
// CHECK-LABEL: gpu.func @mla
// CHECK-SAME: block_n = 128
// CHECK-SAME: shared_memory = 214080
// CHECK-COUNT-12: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// CHECK: gpu.return
// On sm_80 the 128-key tiles do not fit (163 KiB), and without TMA sm_90a
// decides on that budget too: 128 x 64.
// NOTMA-LABEL: gpu.func @mla
// NOTMA-SAME: block_n = 64
// MMA-LABEL: gpu.func @mla
// MMA-SAME: block_n = 64
// MMA: nvvm.mma.sync
func.func @mla(%q: tensor<1x2x256x192xbf16>, %k: tensor<1x2x256x192xbf16>,
               %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x192xbf16>) k(%k : tensor<1x2x256x192xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) scale [0.072] normalizer softmax
      -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}
