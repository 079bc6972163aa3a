// RUN: flashlight-opt %s --split-input-file --verify-diagnostics --attn-return-lse | FileCheck %s

// The attention gains its log-sum-exp, which the function returns after
// its own results, marked.
// CHECK-LABEL: func.func @causal(
// CHECK-SAME: -> (tensor<1x2x16x32xbf16>, tensor<1x2x16xf32>) attributes {attn.lse_result = 1 : i64}
// CHECK: %[[O:.+]]:2 = attn.attention {{.*}} mask {
// CHECK: -> tensor<1x2x16x32xbf16>, tensor<1x2x16xf32>
// CHECK: %[[T:.+]] = tensor.empty
// CHECK: return %{{.*}}, %[[O]]#1
func.func @causal(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>) -> tensor<1x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xbf16>) k(%k : tensor<1x2x16x32xbf16>) v(%v : tensor<1x2x16x32xbf16>) scale [0.25] normalizer softmax
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %keep = arith.cmpi ule, %j, %i : index
      attn.yield %keep : i1
    } -> tensor<1x2x16x32xbf16>
  %t = tensor.empty() : tensor<1x2x16x32xbf16>
  %c = linalg.copy ins(%o : tensor<1x2x16x32xbf16>) outs(%t : tensor<1x2x16x32xbf16>) -> tensor<1x2x16x32xbf16>
  return %c : tensor<1x2x16x32xbf16>
}

// -----

// Several branches: the backward needs each branch's own output.
func.func @two_branches(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  // expected-error @+1 {{attn-return-lse: several branches or an epilogue}}
  %o = attn.attention q(%q, %q : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) k(%k, %k : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25, 0.25] normalizer softmax
    epilogue {
    ^bb0(%o0: f32, %o1: f32, %b: index, %h: index, %i: index, %d: index):
      %r = arith.subf %o0, %o1 : f32
      attn.yield %r : f32
    } -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}

// -----

func.func @sigmoid(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  // expected-error @+1 {{attn-return-lse: only a softmax has a log-sum-exp}}
  %o = attn.attention q(%q : tensor<1x2x16x32xf16>) k(%k : tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25] normalizer sigmoid -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}

// -----

// A called function cannot return more than its callers take.
func.func @callee(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  // expected-error @+1 {{attn-return-lse: the attention's function is called}}
  %o = attn.attention q(%q : tensor<1x2x16x32xf16>) k(%k : tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25] normalizer softmax -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}
func.func @caller(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  %o = func.call @callee(%q, %k, %v) : (tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}
