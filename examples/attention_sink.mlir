// Attention sinks (as in gpt-oss): a learned per-head logit joins every
// softmax denominator, so a query may put attention mass "nowhere"; causal.
// RUN: flashlight-opt %s --verify-roundtrip --attn-explain 2>&1 | FileCheck %s
// CHECK: remark: attn.attention: 1 branch, softmax, heads 8/2, sinks, mask=causal(offset=0) score=[identity]

func.func @attention_sink(%q: tensor<2x8x128x64xbf16>,
                          %k: tensor<2x2x128x64xbf16>,
                          %v: tensor<2x2x128x64xbf16>, %sink: tensor<8xf32>)
    -> tensor<2x8x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x8x128x64xbf16>)
                      k(%k : tensor<2x2x128x64xbf16>)
                      v(%v : tensor<2x2x128x64xbf16>)
                      sinks(%sink : tensor<8xf32>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<2x8x128x64xbf16>
  return %o : tensor<2x8x128x64xbf16>
}
