// RUN: flashlight-opt %s --split-input-file --canonicalize | FileCheck %s

// A mask that keeps everything is dropped.
// CHECK-LABEL: func @all_true_mask_is_dropped
// CHECK: attn.attention
// CHECK-NOT: mask
// CHECK-SAME: -> tensor<1x2x16x8xf16>
func.func @all_true_mask_is_dropped(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [0.5] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %t = arith.constant true
           attn.yield %t : i1
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A score region yielding its logit and an epilogue yielding its input are
// identities and are dropped.
// CHECK-LABEL: func @identity_regions_are_dropped
// CHECK: attn.attention {{.*}} normalizer softmax -> tensor<1x2x16x8xf16>
func.func @identity_regions_are_dropped(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [0.5] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           attn.yield %s : f32
         }
         epilogue {
         ^bb0(%o1: f32, %b: index, %h: index, %i: index, %d: index):
           attn.yield %o1 : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// score(s) = tanh(s * 0.25) becomes score(s) = tanh(s) with the scale
// multiplied by 0.25 (0.5 * 0.25 = 0.125).
// CHECK-LABEL: func @constant_factor_moves_into_scale
// CHECK: scale [1.250000e-01]
// CHECK: ^bb0(%[[S:.*]]: f32,
// CHECK-NEXT: %[[T:.*]] = math.tanh %[[S]] : f32
// CHECK-NEXT: attn.yield %[[T]]
func.func @constant_factor_moves_into_scale(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [0.5] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 0.25 : f32
           %x = arith.mulf %c, %s : f32
           %t = math.tanh %x : f32
           attn.yield %t : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Exported programs spell 1 / sqrt(d) as an f64 constant truncated to f32
// (arith keeps an inexact truncation): the factor (rounded to f32) moves
// into the scale, and the score region, now the identity, goes.
// CHECK-LABEL: func @truncated_constant_factor_moves_into_scale
// CHECK: scale [8.838835e-02] normalizer softmax ->
// CHECK-NEXT: return
func.func @truncated_constant_factor_moves_into_scale(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [1.0] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 0.08838834764831845 : f64
           %t = arith.truncf %c : f64 to f32
           %x = arith.mulf %s, %t : f32
           attn.yield %x : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A divisor that arith.extf widens folds the same way (1.0 / 4.0).
// CHECK-LABEL: func @extended_constant_divisor_moves_into_scale
// CHECK: scale [2.500000e-01] normalizer softmax ->
// CHECK-NEXT: return
func.func @extended_constant_divisor_moves_into_scale(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [1.0] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 4.0 : f16
           %e = arith.extf %c : f16 to f32
           %x = arith.divf %s, %e : f32
           attn.yield %x : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Dividing the logit by a constant also folds: 1.0 / 8.0 = 0.125. When the
// logit has another use the factor must stay (see the second op).
// CHECK-LABEL: func @division_folds_but_not_with_other_uses
// CHECK: scale [1.250000e-01]
// CHECK: scale [1.000000e+00]
// CHECK: arith.divf
func.func @division_folds_but_not_with_other_uses(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> (tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [1.0] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 8.0 : f32
           %x = arith.divf %s, %c : f32
           %t = math.tanh %x : f32
           attn.yield %t : f32
         } -> tensor<1x2x16x8xf16>
  %o2 = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                       v(%v : tensor<1x2x16x8xf16>)
         scale [1.0] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 8.0 : f32
           %x = arith.divf %s, %c : f32
           %y = arith.addf %x, %s : f32
           attn.yield %y : f32
         } -> tensor<1x2x16x8xf16>
  return %o, %o2 : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>
}

// -----

// Captures that no region reads are removed, and a capture passed twice is
// read through its first occurrence.
// CHECK-LABEL: func @unused_and_repeated_captures_are_dropped
// CHECK-SAME: (%{{.*}}, %{{.*}}, %{{.*}}, %[[BIAS:.*]]: tensor<16xf32>, %{{.*}}: tensor<4xf32>)
// CHECK: captures(%[[BIAS]] : tensor<16xf32>)
// CHECK: ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %[[T:.*]]: tensor<16xf32>):
// CHECK: tensor.extract %[[T]][%kv]
// CHECK: tensor.extract %[[T]][%q]
func.func @unused_and_repeated_captures_are_dropped(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>,
    %bias: tensor<16xf32>, %unused: tensor<4xf32>) -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
                      captures(%bias, %unused, %bias
                               : tensor<16xf32>, tensor<4xf32>, tensor<16xf32>)
         scale [0.5] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %t1: tensor<16xf32>, %u: tensor<4xf32>, %t2: tensor<16xf32>):
           %x = tensor.extract %t1[%j] : tensor<16xf32>
           %y = tensor.extract %t2[%i] : tensor<16xf32>
           %r = arith.addf %s, %x : f32
           %r2 = arith.addf %r, %y : f32
           attn.yield %r2 : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Two branches keep their epilogue even when it yields the first branch.
// CHECK-LABEL: func @negative_multi_branch_epilogue_stays
// CHECK: epilogue
func.func @negative_multi_branch_epilogue_stays(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q, %q : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
                      k(%k, %k : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [0.5, 0.5] normalizer softmax
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
           attn.yield %o1 : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}
