// RUN: flashlight-opt %s --attn-online-softmax --attn-tile="block-m=4 block-n=32" --canonicalize --attn-to-gpu="tensor-cores=true" --verify-diagnostics | FileCheck %s

// A program the tensor-core generator cannot take gets the reference kernel,
// and a remark that says why.
// CHECK-LABEL: gpu.func @two_branches
// CHECK-SAME: flashlight.codegen = "reference"
// expected-remark @+1 {{tensor-core path not taken: it has 2 logit branches (one is supported); using the reference kernel}}
func.func @two_branches(%q: tensor<1x2x64x64xf16>, %k: tensor<1x2x64x64xf16>,
                        %v: tensor<1x2x64x64xf16>) -> tensor<1x2x64x64xf16> {
  %o = attn.attention q(%q, %q : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>)
      k(%k, %k : tensor<1x2x64x64xf16>, tensor<1x2x64x64xf16>)
      v(%v : tensor<1x2x64x64xf16>) scale [0.125, 0.125] normalizer softmax
      epilogue {
      ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
        %r = arith.subf %o1, %o2 : f32
        attn.yield %r : f32
      } -> tensor<1x2x64x64xf16>
  return %o : tensor<1x2x64x64xf16>
}
