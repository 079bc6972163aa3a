// A tanh soft-cap at D = 128 (codegen-tiles-wgmma.mlir).
func.func @softcap(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                   %v: tensor<1x2x512x128xbf16>) -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) scale [0.088] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %cap = arith.constant 30.0 : f32
        %x = arith.divf %s, %cap : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %t, %cap : f32
        attn.yield %r : f32
      } -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}
