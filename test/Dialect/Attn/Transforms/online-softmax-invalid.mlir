// RUN: flashlight-opt %s --attn-online-softmax --verify-diagnostics

// An attention whose empty rows still need their mean is not lowered.
func.func @negative_mean_empty_rows(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{an attention with 'mean_empty_rows' reaches code generation (run attn-expand-empty-rows first)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax {mean_empty_rows} -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}
