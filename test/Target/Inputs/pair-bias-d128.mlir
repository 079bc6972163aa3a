// A pair bias [B, H, N, N] added to the logits (Evoformer's), at D = 128.
func.func @pair_bias(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                     %v: tensor<1x2x512x128xbf16>, %bias: tensor<1x2x512x512xbf16>)
    -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) captures(%bias : tensor<1x2x512x512xbf16>)
      scale [0.088] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
           %t: tensor<1x2x512x512xbf16>):
        %x = tensor.extract %t[%b, %h, %i, %j] : tensor<1x2x512x512xbf16>
        %xf = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %xf : f32
        attn.yield %r : f32
      } -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}
