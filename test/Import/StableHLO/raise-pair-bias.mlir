// RUN: %raise %s 2>&1 | FileCheck %s

// AlphaFold's attention with a pair bias: the logits hold two contractions
// along the keys, Q.K and a projection of the pair representation
// [q, k, c] by weights [c, h]. The second reads along the queries and the
// keys at once, so it is not Q.K: it is a bias, read from the tensor the
// program stores it in (computed before the kernel).
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, mask=none score=[additive] score:capture0[q, kv, h]
// CHECK-SAME: {{$}}
// CHECK: captures({{.*}} : tensor<16x16x4xf32>)
func.func @main(%q: tensor<2x16x4x8xf32>, %k: tensor<2x16x4x8xf32>, %v: tensor<2x16x4x8xf32>, %pair: tensor<16x16x32xf32>, %w: tensor<32x4xf32>) -> tensor<2x4x16x8xf32> {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3] : (tensor<2x16x4x8xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x16xf32>
  %pb = stablehlo.dot_general %pair, %w, contracting_dims = [2] x [0] : (tensor<16x16x32xf32>, tensor<32x4xf32>) -> tensor<16x16x4xf32>
  %pt = stablehlo.transpose %pb, dims = [2, 0, 1] : (tensor<16x16x4xf32>) -> tensor<4x16x16xf32>
  %pbb = stablehlo.broadcast_in_dim %pt, dims = [1, 2, 3] : (tensor<4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %l = stablehlo.add %s, %pbb : tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%l init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %l, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1] : (tensor<2x4x16x16xf32>, tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32>
  return %o : tensor<2x4x16x8xf32>
}
