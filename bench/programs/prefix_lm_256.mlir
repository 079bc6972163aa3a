// Prefix-LM: the first 16 positions (the prompt) are visible to every query;
// the rest is causal.

func.func @prefix_lm(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                     %v: tensor<2x4x128x64xbf16>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %prefix = arith.constant 256 : index
           %in_prefix = arith.cmpi slt, %j, %prefix : index
           %causal = arith.cmpi sge, %i, %j : index
           %keep = arith.ori %in_prefix, %causal : i1
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
