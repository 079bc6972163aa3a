// Sliding-window (local) causal attention: query i sees keys i-31 .. i.

func.func @sliding_window(%q: tensor<2x4x128x64xbf16>,
                          %k: tensor<2x4x128x64xbf16>,
                          %v: tensor<2x4x128x64xbf16>)
    -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %window = arith.constant 256 : index
           %causal = arith.cmpi sge, %i, %j : index
           %dist = arith.subi %i, %j : index
           %near = arith.cmpi slt, %dist, %window : index
           %keep = arith.andi %causal, %near : i1
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
