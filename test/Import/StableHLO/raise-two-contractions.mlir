// RUN: %raise %s 2>&1 | FileCheck %s

// MLA's decoupled RoPE: the logits add two Q.K-shaped contractions along
// the keys, q_nope.k_nope (32 dims) and q_pe.k_pe (16 dims, one k_pe shared
// by every head). They fold into one contraction over the concatenated
// head dims (48), built before the kernel; the score keeps only the scale.
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, mask=none score=[identity]
// CHECK: attn.attention q({{.*}} : tensor<2x4x16x48xbf16>) k({{.*}} : tensor<2x4x16x48xbf16>) v({{.*}} : tensor<2x4x16x32xbf16>)
// CHECK-SAME: scale [1.250000e-01]
func.func @main(%q: tensor<2x16x4x32xbf16>, %k: tensor<2x16x4x32xbf16>, %v: tensor<2x16x4x32xbf16>, %qr: tensor<2x16x4x16xbf16>, %kr: tensor<2x16x16xbf16>) -> tensor<2x4x16x32xf32> {
  %s1 = stablehlo.dot_general %q, %k, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3] : (tensor<2x16x4x32xbf16>, tensor<2x16x4x32xbf16>) -> tensor<2x4x16x16xf32>
  %krb = stablehlo.broadcast_in_dim %kr, dims = [0, 1, 3] : (tensor<2x16x16xbf16>) -> tensor<2x16x4x16xbf16>
  %s2 = stablehlo.dot_general %qr, %krb, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3] : (tensor<2x16x4x16xbf16>, tensor<2x16x4x16xbf16>) -> tensor<2x4x16x16xf32>
  %sum = stablehlo.add %s1, %s2 : tensor<2x4x16x16xf32>
  %c = stablehlo.constant dense<1.250000e-01> : tensor<2x4x16x16xf32>
  %l = stablehlo.multiply %sum, %c : tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%l init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %l, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %vf = stablehlo.convert %v : (tensor<2x16x4x32xbf16>) -> tensor<2x16x4x32xf32>
  %o = stablehlo.dot_general %p, %vf, batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1] : (tensor<2x4x16x16xf32>, tensor<2x16x4x32xf32>) -> tensor<2x4x16x32xf32>
  return %o : tensor<2x4x16x32xf32>
}
