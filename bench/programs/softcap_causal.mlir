// Logit soft-capping (Gemma 2): s -> 30 * tanh(s / 30), with a causal mask.

func.func @softcap(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                   %v: tensor<2x4x128x64xbf16>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %cap = arith.constant 30.0 : f32
           %x = arith.divf %s, %cap : f32
           %t = math.tanh %x : f32
           %r = arith.mulf %t, %cap : f32
           attn.yield %r : f32
         }
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
