// RUN: flashlight-opt %s --attn-plan="block-m=4 block-n=32" --attn-online-softmax --attn-tile --canonicalize --attn-to-gpu --verify-diagnostics | FileCheck %s

// A program the tensor-core generator cannot take gets the reference kernel,
// and a remark that says why.
// CHECK-LABEL: gpu.func @f32_inputs
// CHECK-SAME: generator = reference
func.func @f32_inputs(%q: tensor<1x2x64x64xf32>, %k: tensor<1x2x64x64xf32>,
                      %v: tensor<1x2x64x64xf32>) -> tensor<1x2x64x64xf32> {
  // expected-remark @+1 {{tensor-core path not taken: Q/K/V are not f16 or bf16; using the reference kernel}}
  %o = attn.attention q(%q : tensor<1x2x64x64xf32>) k(%k : tensor<1x2x64x64xf32>)
      v(%v : tensor<1x2x64x64xf32>) scale [0.125] normalizer softmax
      -> tensor<1x2x64x64xf32>
  return %o : tensor<1x2x64x64xf32>
}
