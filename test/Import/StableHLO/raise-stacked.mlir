// RUN: %raise %s 2>&1 | FileCheck %s

// Two attentions in a row (a layer stack): the second one's V is the first
// one's output, so V holds an exponential too, behind the tensor the
// program stores. The second attention raises (the exponential that makes
// the weights is its own), and then the first, which its V is computed
// from: two attention ops, no softmax left on the reference path.
// CHECK-NOT: remark: attn.attention
// CHECK-DAG: raise-stacked.mlir:[[# @LINE + 24]]:{{.*}} remark: attn.attention: 1 branch, softmax, heads 4/4
// CHECK-DAG: raise-stacked.mlir:[[# @LINE + 14]]:{{.*}} remark: attn.attention: 1 branch, softmax, heads 4/4
// CHECK-NOT: remark: attn.attention
// CHECK-NOT: math.exp
func.func @main(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>, %q2: tensor<2x4x16x8xf32>, %k2: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %s, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  %s2 = stablehlo.dot_general %q2, %k2, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
  %m2 = stablehlo.reduce(%s2 init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb2 = stablehlo.broadcast_in_dim %m2, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d2 = stablehlo.subtract %s2, %mb2 : tensor<2x4x16x16xf32>
  %e2 = stablehlo.exponential %d2 : tensor<2x4x16x16xf32>
  %den2 = stablehlo.reduce(%e2 init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb2 = stablehlo.broadcast_in_dim %den2, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p2 = stablehlo.divide %e2, %denb2 : tensor<2x4x16x16xf32>
  %o2 = stablehlo.dot_general %p2, %o, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %o2 : tensor<2x4x16x8xf32>
}
