// RUN: flashlight-opt %s --attn-gradient=saved-statistics | FileCheck %s

// attn-gradient{saved-statistics}: the forward is not computed again. After
// dO come each branch's own output and log-sum-exp; dO reaches each branch
// through the epilogue's derivative at those outputs, Delta is
// rowsum(dO_r * O_r), and the dQ/dK attentions read the given log-sum-exps.
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: %arg5: tensor<1x2x16x32xf16>, %[[O0:[^:]+]]: tensor<1x2x16x32xf16>, %[[L0:[^:]+]]: tensor<1x2x16xf32>, %[[O1:[^:]+]]: tensor<1x2x16x32xf16>, %[[L1:[^:]+]]: tensor<1x2x16xf32>)
// CHECK-NOT: normalizer softmax
// CHECK: %[[DO0:.+]] = linalg.generic {{.*}} ins(%[[O0]], %[[O1]], %arg5
// CHECK: %[[D0:.+]] = linalg.generic {{.*}} ins(%[[DO0]], %[[O0]]
// CHECK: attn.attention q(%arg0, %[[DO0]] {{.*}} captures(%[[L0]], %[[D0]]
// CHECK: %[[DO1:.+]] = linalg.generic {{.*}} ins(%[[O0]], %[[O1]], %arg5
// CHECK: %[[D1:.+]] = linalg.generic {{.*}} ins(%[[DO1]], %[[O1]]
// CHECK: attn.attention q(%arg1, %[[DO1]] {{.*}} captures(%[[L1]], %[[D1]]
// CHECK-NOT: normalizer softmax
// CHECK: return
func.func @two_branches(%q1: tensor<1x2x16x32xf16>, %q2: tensor<1x2x16x32xf16>, %k1: tensor<1x2x16x32xf16>, %k2: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  %o = attn.attention q(%q1, %q2 : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) k(%k1, %k2 : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25, 0.125] normalizer softmax
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %keep = arith.cmpi ule, %j, %i : index
      attn.yield %keep : i1
    }
    epilogue {
    ^bb0(%o0: f32, %o1: f32, %b: index, %h: index, %i: index, %d: index):
      %l = arith.constant 0.5 : f32
      %x = arith.mulf %o1, %l : f32
      %r = arith.subf %o0, %x : f32
      attn.yield %r : f32
    } -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}
