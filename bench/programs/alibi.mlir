// ALiBi: causal attention plus a per-head linear bias slope[h] * (j - i).

func.func @alibi(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                 %v: tensor<2x4x128x64xbf16>, %slopes: tensor<4xf32>)
    -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
                      captures(%slopes : tensor<4xf32>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %m: tensor<4xf32>):
           %slope = tensor.extract %m[%h] : tensor<4xf32>
           %rel = arith.subi %j, %i : index
           %rel_i = arith.index_cast %rel : index to i64
           %rel_f = arith.sitofp %rel_i : i64 to f32
           %bias = arith.mulf %slope, %rel_f : f32
           %r = arith.addf %s, %bias : f32
           attn.yield %r : f32
         }
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<4xf32>):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
