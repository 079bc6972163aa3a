// Sigmoid attention (Ramapuram et al., 2024): sigmoid(s + b) V with
// b = -log(N), no max and no sum; causal.
// RUN: flashlight-opt %s --verify-roundtrip --attn-explain 2>&1 | FileCheck %s
// CHECK: remark: attn.attention: 1 branch, sigmoid, heads 4/4, mask=causal(offset=0) score=[additive]

func.func @sigmoid(%q: tensor<2x4x128x64xf16>, %k: tensor<2x4x128x64xf16>,
                   %v: tensor<2x4x128x64xf16>) -> tensor<2x4x128x64xf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xf16>)
                      k(%k : tensor<2x4x128x64xf16>)
                      v(%v : tensor<2x4x128x64xf16>)
         scale [0.125] normalizer sigmoid
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           // -log(128)
           %bias = arith.constant -4.8520303 : f32
           %r = arith.addf %s, %bias : f32
           attn.yield %r : f32
         }
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xf16>
  return %o : tensor<2x4x128x64xf16>
}
