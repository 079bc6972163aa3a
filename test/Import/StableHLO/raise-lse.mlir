// RUN: flashlight-opt %s --split-input-file --flashlight-import-stablehlo --canonicalize --attn-raise=explain --canonicalize --attn-expand-empty-rows --attn-explain 2>&1 | FileCheck %s

// A second result that is the log-sum-exp of the first one's logits
// (jax.nn.dot_product_attention(..., return_residual=True)): the attention
// computes it, in the result's layout [B, M, H].
// CHECK-LABEL: remark: attn-raise: result 0 raised to attn.attention
// CHECK: remark: attn-raise: result 1 is the log-sum-exp of result 0's attention
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, lse, mask=causal(offset=0)
func.func @main(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>) -> (tensor<2x4x16x8xf32>, tensor<2x16x4xf32>) {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %i = stablehlo.iota dim = 0 : tensor<16x16xi32>
  %j = stablehlo.iota dim = 1 : tensor<16x16xi32>
  %keep2 = stablehlo.compare GE, %i, %j, SIGNED : (tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xi1>
  %keep = stablehlo.broadcast_in_dim %keep2, dims = [2, 3] : (tensor<16x16xi1>) -> tensor<2x4x16x16xi1>
  %fill = stablehlo.constant dense<-3.40282347E+38> : tensor<f32>
  %fillb = stablehlo.broadcast_in_dim %fill, dims = [] : (tensor<f32>) -> tensor<2x4x16x16xf32>
  %l = stablehlo.select %keep, %s, %fillb : tensor<2x4x16x16xi1>, tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %mx = stablehlo.reduce(%l init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %mx, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %l, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %log = stablehlo.log %den : tensor<2x4x16xf32>
  %lse = stablehlo.add %log, %mx : tensor<2x4x16xf32>
  %lset = stablehlo.transpose %lse, dims = [0, 2, 1] : (tensor<2x4x16xf32>) -> tensor<2x16x4xf32>
  return %o, %lset : tensor<2x4x16x8xf32>, tensor<2x16x4xf32>
}

// -----

// With a mask from data a row may be fully masked: the program's LSE there
// is the fill plus log N, not the op's -inf, so that result stays as the
// program computes it.
// CHECK: remark: attn-raise: result 0 raised to attn.attention
// CHECK-NOT: log-sum-exp of result 0
// CHECK: remark: attn-raise: result 1 is not raised
func.func @main(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>, %pad: tensor<2x1x16x16xi1>) -> (tensor<2x4x16x8xf32>, tensor<2x16x4xf32>) {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %keep = stablehlo.broadcast_in_dim %pad, dims = [0, 1, 2, 3] : (tensor<2x1x16x16xi1>) -> tensor<2x4x16x16xi1>
  %fill = stablehlo.constant dense<-3.40282347E+38> : tensor<f32>
  %fillb = stablehlo.broadcast_in_dim %fill, dims = [] : (tensor<f32>) -> tensor<2x4x16x16xf32>
  %l = stablehlo.select %keep, %s, %fillb : tensor<2x4x16x16xi1>, tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %mx = stablehlo.reduce(%l init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %mx, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %l, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %log = stablehlo.log %den : tensor<2x4x16xf32>
  %lse = stablehlo.add %log, %mx : tensor<2x4x16xf32>
  %lset = stablehlo.transpose %lse, dims = [0, 2, 1] : (tensor<2x4x16xf32>) -> tensor<2x16x4xf32>
  return %o, %lset : tensor<2x4x16x8xf32>, tensor<2x16x4xf32>
}
