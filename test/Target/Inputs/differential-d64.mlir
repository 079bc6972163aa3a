// Differential attention at D = 64 (two branches, causal): the input of
// codegen-tiles-wgmma.mlir's DIFF check.
func.func @differential(%q1: tensor<1x2x512x64xbf16>, %q2: tensor<1x2x512x64xbf16>,
                        %k1: tensor<1x2x512x64xbf16>, %k2: tensor<1x2x512x64xbf16>,
                        %v: tensor<1x2x512x64xbf16>) -> tensor<1x2x512x64xbf16> {
  %o = attn.attention q(%q1, %q2 : tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>)
                      k(%k1, %k2 : tensor<1x2x512x64xbf16>, tensor<1x2x512x64xbf16>)
                      v(%v : tensor<1x2x512x64xbf16>)
         scale [0.125, 0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         }
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
           %half = arith.constant 0.5 : f32
           %scaled = arith.mulf %half, %o2 : f32
           %r = arith.subf %o1, %scaled : f32
           attn.yield %r : f32
         } -> tensor<1x2x512x64xbf16>
  return %o : tensor<1x2x512x64xbf16>
}
