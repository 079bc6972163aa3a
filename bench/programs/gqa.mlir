// Grouped-query attention, 4 query heads per key/value head, causal
// (benchmark program; attn-specialize sets the sizes).
func.func @gqa(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x2x128x64xbf16>,
               %v: tensor<2x2x128x64xbf16>) -> tensor<2x8x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x8x128x64xbf16>)
                      k(%k : tensor<2x2x128x64xbf16>)
                      v(%v : tensor<2x2x128x64xbf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<2x8x128x64xbf16>
  return %o : tensor<2x8x128x64xbf16>
}
