// RUN: flashlight-opt %s --attn-gradient="fuse-key-value-from=0 fuse-query saved-statistics" | FileCheck %s

// FlashAttention's backward structure: one attention from K (and V) to the
// queries of their group computes dK and dV (value_columns) and, as its S
// branch's key-side product (scale dS^T times its queries, K), dQ: per KV
// head and grouped query row [B, Hkv, g M, D] in f32, seen as [B, Hq, M, D]
// and rounded to Q's type. No attention of its own for dQ. (GQA without a
// mask: with one that reads positions, K and V are repeated per query
// head instead, gradient.mlir.)
// CHECK-LABEL: func.func @gradient
// CHECK-NOT: attn.attention
// CHECK: %[[ALL:.+]]:2 = attn.attention q(%arg1, %arg2 : {{.*}}) k(%{{.*}}, %{{.*}} : tensor<1x2x32x64xbf16>, tensor<1x2x32x64xbf16>) v(%{{.*}} : tensor<1x2x32x128xbf16>) {{.*}} value_columns [64, 64] key_side 0 scale [1.250000e-01, 1.250000e-01] normalizer none
// CHECK: -> tensor<1x2x16x128xbf16>, tensor<1x2x32x64xf32>
// CHECK-NOT: attn.attention
// CHECK: %[[DK:.+]] = tensor.extract_slice %[[ALL]]#0[0, 0, 0, 0] [1, 2, 16, 64]
// CHECK: %[[DV:.+]] = tensor.extract_slice %[[ALL]]#0[0, 0, 0, 64] [1, 2, 16, 64]
// CHECK: %[[E:.+]] = tensor.expand_shape %[[ALL]]#1 {{\[}}[0], [1], [2, 3], [4]] output_shape [1, 2, 2, 16, 64] : tensor<1x2x32x64xf32> into tensor<1x2x2x16x64xf32>
// CHECK: %[[C:.+]] = tensor.collapse_shape %[[E]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x2x2x16x64xf32> into tensor<1x4x16x64xf32>
// CHECK: %[[DQ:.+]] = linalg.generic {{.*}} ins(%[[C]] : tensor<1x4x16x64xf32>) outs(%{{.*}} : tensor<1x4x16x64xbf16>)
// CHECK: arith.truncf
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
func.func @gqa(%q: tensor<1x4x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<1x4x16x64xbf16> {
  %o = attn.attention q(%q : tensor<1x4x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>) v(%v : tensor<1x2x16x64xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x4x16x64xbf16>
  return %o : tensor<1x4x16x64xbf16>
}
