// DeepSeek's multi-head latent attention at prefill, as its kernels see it:
// Q and K carry 192 columns (128 plus 64 of decoupled rotary), V 128;
// softmax(Q K^T / sqrt(192)) V, no mask. bench/prepare.sh keeps these head
// dims (the `mla` programs' D names Q.K's).

func.func @mla(%q: tensor<2x4x128x192xbf16>, %k: tensor<2x4x128x192xbf16>,
               %v: tensor<2x4x128x128xbf16>) -> tensor<2x4x128x128xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x192xbf16>)
                      k(%k : tensor<2x4x128x192xbf16>)
                      v(%v : tensor<2x4x128x128xbf16>)
         scale [0.07216878364870323] normalizer softmax -> tensor<2x4x128x128xbf16>
  return %o : tensor<2x4x128x128xbf16>
}
