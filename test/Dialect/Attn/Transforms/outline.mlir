// RUN: flashlight-opt %s --split-input-file --attn-outline | FileCheck %s

// The attention moves into a kernel function of its own; the layout copies
// stay with the caller.
// CHECK-LABEL: func.func @main_attention0(
// CHECK-SAME: %[[Q:.+]]: tensor<1x2x16x8xf16>, %[[K:.+]]: tensor<1x2x16x8xf16>, %[[V:.+]]: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> attributes {attn.kernel}
// CHECK-NEXT: %[[O:.+]] = attn.attention q(%[[Q]] {{.*}} k(%[[K]] {{.*}} v(%[[V]]
// CHECK-NEXT: return %[[O]]
// CHECK-LABEL: func.func @main(
// CHECK: %[[QT:.+]] = linalg.generic
// CHECK: call @main_attention0(%[[QT]], %{{.*}}, %{{.*}})
// CHECK-NOT: attn.attention
func.func @main(%q: tensor<1x16x2x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  %e = tensor.empty() : tensor<1x2x16x8xf16>
  %qt = linalg.generic {indexing_maps = [affine_map<(b, h, i, d) -> (b, i, h, d)>, affine_map<(b, h, i, d) -> (b, h, i, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x16x2x8xf16>) outs(%e : tensor<1x2x16x8xf16>) {
  ^bb0(%x: f16, %o: f16):
    linalg.yield %x : f16
  } -> tensor<1x2x16x8xf16>
  %o = attn.attention q(%qt : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A function that is exactly one attention already is a kernel.
// CHECK-LABEL: func.func @kernel_shaped(
// CHECK-NEXT: attn.attention
// CHECK-NOT: call
func.func @kernel_shaped(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Attentions that compute the same thing (a sub-batched loop, unrolled)
// share one kernel; one that differs (its scale here) gets its own.
// CHECK-LABEL: func.func @chunks_attention0(
// CHECK: scale [3.500000e-01]
// CHECK-LABEL: func.func @chunks_attention1(
// CHECK: scale [2.500000e-01]
// CHECK-NOT: func.func @chunks_attention2
// CHECK-LABEL: func.func @chunks(
// CHECK: %[[A:.+]] = call @chunks_attention0(%arg0, %arg1, %arg2)
// CHECK: %[[B:.+]] = call @chunks_attention0(%arg1, %arg0, %arg2)
// CHECK: %[[C:.+]] = call @chunks_attention1(%arg0, %arg1, %arg2)
// CHECK: return %[[A]], %[[B]], %[[C]]
func.func @chunks(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> (tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) {
  %a = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax -> tensor<1x2x16x8xf16>
  %b = attn.attention q(%k : tensor<1x2x16x8xf16>) k(%q : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax -> tensor<1x2x16x8xf16>
  %c = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.25] normalizer softmax -> tensor<1x2x16x8xf16>
  return %a, %b, %c : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>
}

// -----

// Same op, different shapes: two kernels.
// CHECK-LABEL: func.func @shapes_attention0(
// CHECK-SAME: tensor<1x2x16x8xf16>
// CHECK-LABEL: func.func @shapes_attention1(
// CHECK-SAME: tensor<1x2x32x8xf16>
func.func @shapes(%q: tensor<1x2x16x8xf16>, %q2: tensor<1x2x32x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> (tensor<1x2x16x8xf16>, tensor<1x2x32x8xf16>) {
  %a = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax -> tensor<1x2x16x8xf16>
  %b = attn.attention q(%q2 : tensor<1x2x32x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax -> tensor<1x2x32x8xf16>
  return %a, %b : tensor<1x2x16x8xf16>, tensor<1x2x32x8xf16>
}

// -----

// Self-attention on one tensor as q, k and v: the kernel still takes each
// operand as a parameter of its own (the runtimes find q0, k0 and v), so
// the function is outlined and called with the tensor three times.
// CHECK-LABEL: func.func @self_attention0(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<1x2x16x8xf16>, %[[K:[^:]+]]: tensor<1x2x16x8xf16>, %[[V:[^:]+]]: tensor<1x2x16x8xf16>)
// CHECK-NEXT: attn.attention q(%[[Q]] {{.*}} k(%[[K]] {{.*}} v(%[[V]]
// CHECK-LABEL: func.func @self(
// CHECK: call @self_attention0(%arg0, %arg0, %arg0)
func.func @self(%x: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%x : tensor<1x2x16x8xf16>) k(%x : tensor<1x2x16x8xf16>) v(%x : tensor<1x2x16x8xf16>) scale [0.35] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}
