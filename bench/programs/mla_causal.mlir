// Multi-head latent attention (Q.K head dim 192, V's 128; see mla.mlir)
// with a causal mask: query i sees keys j <= i.

func.func @mla_causal(%q: tensor<2x4x128x192xbf16>, %k: tensor<2x4x128x192xbf16>,
                      %v: tensor<2x4x128x128xbf16>) -> tensor<2x4x128x128xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x192xbf16>)
                      k(%k : tensor<2x4x128x192xbf16>)
                      v(%v : tensor<2x4x128x128xbf16>)
         scale [0.07216878364870323] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<2x4x128x128xbf16>
  return %o : tensor<2x4x128x128xbf16>
}
