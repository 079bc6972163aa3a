// A score region with an op that has no derivative rule (attn-gradient).
func.func @no_rule(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xf16>) k(%k : tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %y = math.sin %s : f32
      attn.yield %y : f32
    } -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}
