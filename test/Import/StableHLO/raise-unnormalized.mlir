// RUN: %raise %s --split-input-file 2>&1 >/dev/null | FileCheck %s
// RUN: %raise %s --split-input-file 2>/dev/null | FileCheck %s --check-prefix=IR

// O * exp(LSE) of a softmax (attention-gym's undo_softmax) is sum_j exp(S) V:
// normalizer none over exp of the score; the log-sum-exp, which would need
// the logits outside the kernel, is not computed.
// CHECK: remark: attn.attention: 1 branch, none, heads 4/4, mask=none score=[general]
// IR-LABEL: func.func @undo
// IR-NOT: linalg.generic
// IR: attn.attention {{.*}} normalizer none score {
// IR-NEXT: ^bb0(%[[S:.+]]: f32,
// IR-NEXT: %[[E:.+]] = math.exp %[[S]] : f32
// IR-NEXT: attn.yield %[[E]] : f32
// IR-NOT: linalg.generic
// IR-LABEL: func.func @not_lse
func.func @undo(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x32xf32>, %v: tensor<2x4x16x32xf32>) -> tensor<2x4x16x32xf32> {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %s, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x16x16xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x32xf32>
  %log = stablehlo.log %den : tensor<2x4x16xf32>
  %lse = stablehlo.add %log, %m : tensor<2x4x16xf32>
  %w = stablehlo.exponential %lse : tensor<2x4x16xf32>
  %wb = stablehlo.broadcast_in_dim %w, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x32xf32>
  %r = stablehlo.multiply %o, %wb : tensor<2x4x16x32xf32>
  return %r : tensor<2x4x16x32xf32>
}

// -----

// Times exp of something other than its log-sum-exp (a per-row input), the
// softmax stays a softmax and the factor an epilogue capture.
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, epilogue, mask=none score=[identity] epilogue:capture0[b, h, q]
func.func @not_lse(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x32xf32>, %v: tensor<2x4x16x32xf32>, %t: tensor<2x4x16xf32>) -> tensor<2x4x16x32xf32> {
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %s, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x16x16xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x32xf32>
  %w = stablehlo.exponential %t : tensor<2x4x16xf32>
  %wb = stablehlo.broadcast_in_dim %w, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x32xf32>
  %r = stablehlo.multiply %o, %wb : tensor<2x4x16x32xf32>
  return %r : tensor<2x4x16x32xf32>
}

// -----

// With f16 V the kernel would round exp(S) to f16 for P.V, which overflows
// past S = 11 where the program's f32 does not: the softmax stays, and
// O * exp(LSE) is an epilogue.
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, epilogue,
// IR-LABEL: func.func @undo_f16
// IR: normalizer softmax
func.func @undo_f16(%q: tensor<2x4x16x32xf32>, %k: tensor<2x4x16x32xf32>, %v16: tensor<2x4x16x32xf16>) -> tensor<2x4x16x32xf32> {
  %v = stablehlo.convert %v16 : (tensor<2x4x16x32xf16>) -> tensor<2x4x16x32xf32>
  %s = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x4x16x32xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x16xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %d = stablehlo.subtract %s, %mb : tensor<2x4x16x16xf32>
  %e = stablehlo.exponential %d : tensor<2x4x16x16xf32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %den = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [3] : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %denb = stablehlo.broadcast_in_dim %den, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x16xf32>
  %p = stablehlo.divide %e, %denb : tensor<2x4x16x16xf32>
  %o = stablehlo.dot_general %p, %v, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x16x16xf32>, tensor<2x4x16x32xf32>) -> tensor<2x4x16x32xf32>
  %log = stablehlo.log %den : tensor<2x4x16xf32>
  %lse = stablehlo.add %log, %m : tensor<2x4x16xf32>
  %w = stablehlo.exponential %lse : tensor<2x4x16xf32>
  %wb = stablehlo.broadcast_in_dim %w, dims = [0, 1, 2] : (tensor<2x4x16xf32>) -> tensor<2x4x16x32xf32>
  %r = stablehlo.multiply %o, %wb : tensor<2x4x16x32xf32>
  return %r : tensor<2x4x16x32xf32>
}
