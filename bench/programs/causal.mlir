// Causal attention: query i sees keys j <= i.

func.func @causal(%q: tensor<2x4x128x64xf16>, %k: tensor<2x4x128x64xf16>,
                  %v: tensor<2x4x128x64xf16>) -> tensor<2x4x128x64xf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xf16>)
                      k(%k : tensor<2x4x128x64xf16>)
                      v(%v : tensor<2x4x128x64xf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xf16>
  return %o : tensor<2x4x128x64xf16>
}
