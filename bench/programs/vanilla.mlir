// Vanilla attention: softmax(Q K^T / sqrt(D)) V, no mask, no score change.

func.func @vanilla(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                   %v: tensor<2x4x128x64xbf16>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
         scale [0.125] normalizer softmax -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
