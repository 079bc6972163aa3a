// RUN: %raise %s 2>&1 | FileCheck %s

// Q, K and V are bf16 projections that the program widens to f32 before
// its contractions (flax's force_fp32_for_softmax, bloom's f32 baddbmm): the
// widening is exact, so the attention reads the bf16 tensors and stays on
// the tensor-core path.
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, mask=none score=[identity]
// CHECK: attn.attention q({{.*}} : tensor<2x4x16x32xbf16>) k({{.*}} : tensor<2x4x16x32xbf16>) v({{.*}} : tensor<2x4x16x32xbf16>)
// CHECK-SAME: -> tensor<2x4x16x32xf32>
func.func @main(%x: tensor<2x16x64xbf16>, %wq: tensor<64x4x32xbf16>, %wk: tensor<64x4x32xbf16>, %wv: tensor<64x4x32xbf16>) -> tensor<2x4x16x32xf32> {
  %q = stablehlo.dot_general %x, %wq, contracting_dims = [2] x [0] : (tensor<2x16x64xbf16>, tensor<64x4x32xbf16>) -> tensor<2x16x4x32xbf16>
  %k = stablehlo.dot_general %x, %wk, contracting_dims = [2] x [0] : (tensor<2x16x64xbf16>, tensor<64x4x32xbf16>) -> tensor<2x16x4x32xbf16>
  %v = stablehlo.dot_general %x, %wv, contracting_dims = [2] x [0] : (tensor<2x16x64xbf16>, tensor<64x4x32xbf16>) -> tensor<2x16x4x32xbf16>
  %qf = stablehlo.convert %q : (tensor<2x16x4x32xbf16>) -> tensor<2x16x4x32xf32>
  %kf = stablehlo.convert %k : (tensor<2x16x4x32xbf16>) -> tensor<2x16x4x32xf32>
  %vf = stablehlo.convert %v : (tensor<2x16x4x32xbf16>) -> tensor<2x16x4x32xf32>
  %s = stablehlo.dot_general %qf, %kf, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3] : (tensor<2x16x4x32xf32>, tensor<2x16x4x32xf32>) -> tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %s, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %vf, batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1] : (tensor<2x4x16x16xf32>, tensor<2x16x4x32xf32>) -> tensor<2x4x16x32xf32>
  return %o : tensor<2x4x16x32xf32>
}
