// attn-plan's refusals: located errors, nothing planned.
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_80 block-m=192 block-n=128" --verify-diagnostics
// RUN: not flashlight-opt %s --attn-plan="arch=sm_80 block-m=128 block-n=64 warp-rows=48" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: not flashlight-opt %s --attn-plan="arch=sm_75" 2>&1 | FileCheck %s --check-prefix=ARCH

// ROWS: error: attn-plan: warp-rows 48 must be 16 or 32 and divide block-m 128
// ARCH: error: attn-plan: unsupported arch 'sm_75' (supported: sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a)

func.func @rows192(%q: tensor<1x4x1024x64xbf16>, %k: tensor<1x4x1024x64xbf16>,
                   %v: tensor<1x4x1024x64xbf16>) -> tensor<1x4x1024x64xbf16> {
  // expected-error @+1 {{attn-plan: block-m 192 needs wgmma (sm_90a)}}
  %o = attn.attention q(%q : tensor<1x4x1024x64xbf16>) k(%k : tensor<1x4x1024x64xbf16>)
         v(%v : tensor<1x4x1024x64xbf16>) scale [0.125] normalizer softmax
         -> tensor<1x4x1024x64xbf16>
  return %o : tensor<1x4x1024x64xbf16>
}
