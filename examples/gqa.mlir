// Grouped-query attention, 4 query heads per key/value head (8 / 2), causal,
// also returning the log-sum-exp of every row (for split-KV decoding or a
// backward pass).
// RUN: flashlight-opt %s --verify-roundtrip --attn-explain 2>&1 | FileCheck %s
// CHECK: remark: attn.attention: 1 branch, softmax, heads 8/2, lse, mask=causal(offset=0) score=[identity]

func.func @gqa(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x2x128x64xbf16>,
               %v: tensor<2x2x128x64xbf16>)
    -> (tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>) {
  %o, %lse = attn.attention q(%q : tensor<2x8x128x64xbf16>)
                            k(%k : tensor<2x2x128x64xbf16>)
                            v(%v : tensor<2x2x128x64xbf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>
  return %o, %lse : tensor<2x8x128x64xbf16>, tensor<2x8x128xf32>
}
