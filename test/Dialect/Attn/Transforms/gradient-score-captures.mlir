// RUN: flashlight-opt %s --split-input-file --attn-gradient='score-captures=1 capture-terms=0' | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-gradient='score-captures=1 per-head-key-value-from=0' | FileCheck %s --check-prefix=TERMS
// RUN: flashlight-opt %s --split-input-file --attn-gradient='score-captures=1 per-head-key-value-from=0' | FileCheck %s --check-prefix=TERMS-MAPS
// RUN: flashlight-opt %s --split-input-file --attn-gradient | FileCheck %s --check-prefix=DEFAULT

// A pair bias [B, H, N, N] that the score reads at its own indices, with
// GQA (2 query heads over 1 KV head) and a causal mask: its gradient is
// dS * d score / d bias, from S = Q K^T and dP = dO V^T materialized in f32
// (K and V read at h floordiv 2), the masked elements zero.
// CHECK-DAG: #[[KMAP:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1 floordiv 2, d3, d4)>
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<1x2x16x32xbf16>, %[[K:[^:]+]]: tensor<1x1x16x32xbf16>, %[[V:[^:]+]]: tensor<1x1x16x32xbf16>, %[[BIAS:[^:]+]]: tensor<1x2x16x16xbf16>, %[[DO:[^:]+]]: tensor<1x2x16x32xbf16>)
// CHECK-SAME: -> (tensor<1x2x16x32xbf16>, tensor<1x1x16x32xbf16>, tensor<1x1x16x32xbf16>, tensor<1x2x16x16xbf16>)
// CHECK-SAME: attn.gradient_of = array<i64: 0, 1, 2, 3>
// CHECK: %[[FWD:.+]]:2 = attn.attention q(%[[Q]]
// CHECK: %[[DELTA:.+]] = linalg.generic {{.*}} ins(%[[DO]], %[[FWD]]#0
// CHECK: %[[S:.+]] = linalg.generic {{.*}}#[[KMAP]]{{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[Q]], %[[K]] : {{.*}}) outs({{.*}} : tensor<1x2x16x16xf32>)
// CHECK: %[[DP:.+]] = linalg.generic {{.*}}#[[KMAP]]{{.*}} ins(%[[DO]], %[[V]] : {{.*}}) outs({{.*}} : tensor<1x2x16x16xf32>)
// Delta again, as sum_j P dP from the same f32 products (not from the
// bf16 output).
// CHECK: %[[DELTA2:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[S]], %[[DP]], %[[FWD]]#1 : {{.*}}) outs(%{{.*}} : tensor<1x2x16xf32>)
// CHECK: %[[DB:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[S]], %[[DP]], %[[FWD]]#1, %[[DELTA2]] : {{.*}}) outs(%{{.*}} : tensor<1x2x16x16xf32>)
// CHECK: ^bb0(%[[SIJ:[^:]+]]: f32, %[[DPIJ:[^:]+]]: f32, %[[L:[^:]+]]: f32, %[[D:[^:]+]]: f32, %[[ACC:[^:]+]]: f32):
// CHECK: %[[SCALED:.+]] = arith.mulf %[[SIJ]], %{{.*}} : f32
// CHECK: %[[T:.+]] = arith.addf %[[SCALED]]
// CHECK: %[[KEEP:.+]] = arith.cmpi sle
// CHECK: %[[X:.+]] = arith.subf %[[T]], %[[L]]
// CHECK: %[[P:.+]] = math.exp %[[X]]
// CHECK: %[[DT:.+]] = arith.subf %[[DPIJ]], %[[D]]
// CHECK: %[[TERM:.+]] = arith.mulf %[[P]], %[[DT]]
// CHECK: %[[TERMD:.+]] = arith.mulf %[[TERM]]
// Masked elements' whole terms are zero (no NaN from their t or dt).
// CHECK: %[[KEPT:.+]] = arith.select %[[KEEP]], %[[TERMD]]
// CHECK: arith.addf %[[ACC]], %[[KEPT]]
// CHECK: arith.truncf {{.*}} : f32 to bf16
// CHECK: return {{.*}} : tensor<1x2x16x32xbf16>, tensor<1x1x16x32xbf16>, tensor<1x1x16x32xbf16>, tensor<1x2x16x16xbf16>
// By default, the dQ attention writes the bias's gradient per element: a
// term over (b, h, q_idx, kv_idx) its score region yields after dS and the
// dP branch's 0, dT times the score's derivative with respect to the bias
// element (here 1); no S or dP materialized, the term only rounded.
// TERMS-LABEL: func.func @gradient(
// TERMS-SAME: %[[BIAS:[^:]+]]: tensor<1x2x16x16xbf16>, %{{[^:]+}}: tensor<1x2x16x32xbf16>)
// TERMS-SAME: attn.gradient_of = array<i64: 0, 1, 2, 3>
// TERMS-NOT: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// TERMS: %[[DQ:.+]]:2 = attn.attention q(%{{.*}}, %{{.*}} : {{.*}}) {{.*}} term_dims [array<i64: 0, 1, 2, 3>] scale [2.500000e-01, 1.000000e+00] normalizer none score {
// TERMS: %[[P:.+]] = math.exp2
// TERMS: %[[DT:.+]] = arith.mulf %[[P]], %{{.*}} : f32
// TERMS: %[[DS:.+]] = arith.mulf %[[DT]], %{{.*}} : f32
// TERMS: %[[ONE:.+]] = arith.extf %cst{{.*}} : bf16 to f32
// TERMS: %[[TERM:.+]] = arith.mulf %[[DT]], %[[ONE]] : f32
// TERMS: attn.yield %[[DS]], %{{.*}}, %[[TERM]] : f32, f32, f32
// TERMS: } -> tensor<1x2x16x32xbf16>, tensor<1x2x16x16xf32>
// TERMS-NOT: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// The transposed attentions (dK, dV: rows are keys) read the bias
// transposed, so that their columns (query rows) read consecutive
// elements: the bias's last two dims swapped, its reads' indices too.
// With GQA (2 query heads, 1 KV head), a mask that reads positions and
// per-head-key-value-from=0, they take K and V repeated per query head (rows of one head, whose
// causal bound stays a bound), each head's dK and dV then summed over its
// group.
// TERMS: %[[BT:.+]] = linalg.transpose ins(%[[BIAS]] : tensor<1x2x16x16xbf16>) outs(%{{.*}} : tensor<1x2x16x16xbf16>) permutation = [0, 1, 3, 2]
// TERMS: attn.attention q(%{{.*}}, %{{.*}} : tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>) {{.*}} captures(%[[BT]],
// TERMS: ^bb0(%s0: f32, %s1: f32, %b: index, %h: index, %q: index, %kv: index,
// TERMS-NOT: arith.remui
// TERMS: tensor.extract %{{.*}}[%b, %h, %q, %kv] : tensor<1x2x16x16xbf16>
// TERMS: linalg.generic {{.*}} ins(%[[DKH:.+]], %[[DKH]] : tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>) outs(%{{.*}} : tensor<1x1x16x32xbf16>)
// TERMS: linalg.generic {{.*}} ins(%[[DQ]]#1 : tensor<1x2x16x16xf32>) outs(%{{.*}} : tensor<1x2x16x16xbf16>)
// TERMS: arith.truncf {{.*}} : f32 to bf16
// Without the option, the bias is an input only.
// DEFAULT-LABEL: func.func @gradient(
// DEFAULT-SAME: -> (tensor<1x2x16x32xbf16>, tensor<1x1x16x32xbf16>, tensor<1x1x16x32xbf16>)
// DEFAULT-SAME: attn.gradient_of = array<i64: 0, 1, 2>
func.func @pair_bias(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x1x16x32xbf16>, %v: tensor<1x1x16x32xbf16>, %bias: tensor<1x2x16x16xbf16>) -> tensor<1x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xbf16>) k(%k : tensor<1x1x16x32xbf16>) v(%v : tensor<1x1x16x32xbf16>) captures(%bias : tensor<1x2x16x16xbf16>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<1x2x16x16xbf16>):
      %x = tensor.extract %t[%b, %h, %i, %j] : tensor<1x2x16x16xbf16>
      %y = arith.extf %x : bf16 to f32
      %r = arith.addf %s, %y : f32
      attn.yield %r : f32
    } mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %t: tensor<1x2x16x16xbf16>):
      %keep = arith.cmpi sle, %j, %i : index
      attn.yield %keep : i1
    } -> tensor<1x2x16x32xbf16>
  return %o : tensor<1x2x16x32xbf16>
}

// -----

// A learned per-head slope (ALiBi), read at h alone: its gradient sums
// dS * (kv - q) over kv per row, then the rows over b and q.
// As terms (the default): three row sums of the dQ attention, [B, H, M]
// each (P dP g, P g, P dP with g = kv - q), combined per row as the first
// minus the third times the second (Delta from the kernel's f32 P and dP),
// summed over b and q; no [B, H, M, N] tensor.
// TERMS-LABEL: func.func @gradient(
// TERMS: %[[DQ:.+]]:4 = attn.attention {{.*}} term_dims [array<i64: 0, 1, 2>, array<i64: 0, 1, 2>, array<i64: 0, 1, 2>]
// TERMS: %[[P:.+]] = math.exp2
// TERMS: %[[G:.+]] = arith.mulf %cst{{.*}}, %{{.*}} : f32
// TERMS: %[[PDP:.+]] = arith.mulf %[[P]], %s1 : f32
// TERMS: %[[A:.+]] = arith.mulf %[[PDP]], %[[G]] : f32
// TERMS: %[[C:.+]] = arith.mulf %[[P]], %[[G]] : f32
// TERMS: attn.yield %{{.*}}, %{{.*}}, %[[A]], %[[C]], %[[PDP]] : f32, f32, f32, f32, f32
// TERMS: } -> tensor<1x2x16x32xbf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
// TERMS-NOT: tensor<1x2x16x16xf32>
// TERMS: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]} ins(%[[DQ]]#1, %[[DQ]]#2, %[[DQ]]#3 : {{.*}}) outs(%{{.*}} : tensor<2xf32>)
// TERMS-NEXT: ^bb0(%[[TA:.+]]: f32, %[[TC:.+]]: f32, %[[TD:.+]]: f32, %{{.*}}: f32):
// TERMS-NEXT: %[[DC:.+]] = arith.mulf %[[TD]], %[[TC]] : f32
// TERMS-NEXT: arith.subf %[[TA]], %[[DC]] : f32
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: -> (tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<2xf32>)
// CHECK-SAME: attn.gradient_of = array<i64: 0, 1, 2, 3>
// CHECK: %[[DELTA2:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>, tensor<1x2x16xf32>) outs(%{{.*}} : tensor<1x2x16xf32>)
// CHECK: %[[ROWS:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins({{.*}}, %[[DELTA2]] : {{.*}}) outs(%{{.*}} : tensor<1x2x16xf32>)
// CHECK: arith.sitofp
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]} ins(%[[ROWS]] : tensor<1x2x16xf32>) outs(%{{.*}} : tensor<2xf32>)
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @slopes(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>, %slope: tensor<2xf32>) -> tensor<1x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xbf16>) k(%k : tensor<1x2x16x32xbf16>) v(%v : tensor<1x2x16x32xbf16>) captures(%slope : tensor<2xf32>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
      %x = tensor.extract %m[%h] : tensor<2xf32>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %y = arith.mulf %x, %df : f32
      %r = arith.addf %s, %y : f32
      attn.yield %r : f32
    } -> tensor<1x2x16x32xbf16>
  return %o : tensor<1x2x16x32xbf16>
}

// -----

// A table read at a computed index (a relative-position bucket): a loop
// over the table's entries joins the four, each element adding to the
// entry its computed bucket equals.
// CHECK-DAG: #[[TABLE:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d4, d1)>
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: -> (tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<31x2xf32>)
// CHECK-SAME: attn.gradient_of = array<i64: 0, 1, 2, 3>
// CHECK: linalg.generic {indexing_maps = [{{.*}}, #[[TABLE]]], iterator_types = ["reduction", "parallel", "reduction", "reduction", "parallel"]}
// CHECK: %[[BUCKET:.+]] = arith.addi
// CHECK: %[[ENTRY:.+]] = linalg.index 4 : index
// CHECK: arith.cmpi eq, %[[BUCKET]], %[[ENTRY]] : index
func.func @buckets(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>, %table: tensor<31x2xf32>) -> tensor<1x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xbf16>) k(%k : tensor<1x2x16x32xbf16>) v(%v : tensor<1x2x16x32xbf16>) captures(%table : tensor<31x2xf32>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<31x2xf32>):
      %c15 = arith.constant 15 : index
      %d = arith.subi %j, %i : index
      %e = arith.addi %d, %c15 : index
      %x = tensor.extract %t[%e, %h] : tensor<31x2xf32>
      %r = arith.addf %s, %x : f32
      attn.yield %r : f32
    } -> tensor<1x2x16x32xbf16>
  return %o : tensor<1x2x16x32xbf16>
}

// -----

// A bias broadcast over the batch ([1, H, N, N] read at (0, h, q, kv)):
// summed over b, its leading unit dim added back with the head's.
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: attn.gradient_of = array<i64: 0, 1, 2, 3>
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel", "parallel"]} {{.*}} outs(%{{.*}} : tensor<2x16x16xf32>)
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] {{.*}} : tensor<2x16x16xf32> into tensor<1x2x16x16xf32>
// CHECK: arith.truncf {{.*}} : f32 to bf16
// As a term: [B, H, M, N] from the kernel, summed over b (read once per
// batch index: constants in the maps) and narrowed to bf16 in one
// elementwise generic, no zero-filled f32 accumulator.
// TERMS-MAPS: affine_map<(d0, d1, d2) -> (0, d0, d1, d2)>
// TERMS-MAPS-NEXT: affine_map<(d0, d1, d2) -> (1, d0, d1, d2)>
// TERMS-LABEL: func.func @gradient(%arg0: tensor<2x2x16x32xbf16>
// TERMS: %[[DQ:.+]]:2 = attn.attention {{.*}} term_dims [array<i64: 0, 1, 2, 3>]
// TERMS: } -> tensor<2x2x16x32xbf16>, tensor<2x2x16x16xf32>
// TERMS: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "parallel"]} ins(%[[DQ]]#1, %[[DQ]]#1 : tensor<2x2x16x16xf32>, tensor<2x2x16x16xf32>) outs(%{{.*}} : tensor<2x16x16xbf16>)
// TERMS: arith.addf
// TERMS: arith.truncf {{.*}} : f32 to bf16
// TERMS: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] {{.*}} : tensor<2x16x16xbf16> into tensor<1x2x16x16xbf16>
func.func @batch_broadcast(%q: tensor<2x2x16x32xbf16>, %k: tensor<2x2x16x32xbf16>, %v: tensor<2x2x16x32xbf16>, %bias: tensor<1x2x16x16xbf16>) -> tensor<2x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<2x2x16x32xbf16>) k(%k : tensor<2x2x16x32xbf16>) v(%v : tensor<2x2x16x32xbf16>) captures(%bias : tensor<1x2x16x16xbf16>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<1x2x16x16xbf16>):
      %c0 = arith.constant 0 : index
      %x = tensor.extract %t[%c0, %h, %i, %j] : tensor<1x2x16x16xbf16>
      %y = arith.extf %x : bf16 to f32
      %r = arith.addf %s, %y : f32
      attn.yield %r : f32
    } -> tensor<2x2x16x32xbf16>
  return %o : tensor<2x2x16x32xbf16>
}

// -----

// A batch of 40 (more terms than one elementwise pass adds, 32): the
// term is summed by a reduction over b into f32, then narrowed.
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: tensor<40x2x16x32xbf16>
// TERMS-LABEL: func.func @gradient(%arg0: tensor<40x2x16x32xbf16>
// TERMS: %[[DQ:.+]]:2 = attn.attention {{.*}} term_dims [array<i64: 0, 1, 2, 3>]
// TERMS: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "parallel", "parallel"]} ins(%[[DQ]]#1 : tensor<40x2x16x16xf32>) outs(%{{.*}} : tensor<2x16x16xf32>)
// TERMS: tensor.expand_shape %{{.*}} : tensor<2x16x16xf32> into tensor<1x2x16x16xf32>
// TERMS: arith.truncf {{.*}} : f32 to bf16
func.func @large_batch_broadcast(%q: tensor<40x2x16x32xbf16>, %k: tensor<40x2x16x32xbf16>, %v: tensor<40x2x16x32xbf16>, %bias: tensor<1x2x16x16xbf16>) -> tensor<40x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<40x2x16x32xbf16>) k(%k : tensor<40x2x16x32xbf16>) v(%v : tensor<40x2x16x32xbf16>) captures(%bias : tensor<1x2x16x16xbf16>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<1x2x16x16xbf16>):
      %c0 = arith.constant 0 : index
      %x = tensor.extract %t[%c0, %h, %i, %j] : tensor<1x2x16x16xbf16>
      %y = arith.extf %x : bf16 to f32
      %r = arith.addf %s, %y : f32
      attn.yield %r : f32
    } -> tensor<40x2x16x32xbf16>
  return %o : tensor<40x2x16x32xbf16>
}

// -----

// An f64 slope: its gradient is widened from f32 to f64. A capture whose
// way to the score has no derivative rule (powf) gets none and fails
// nothing: the learned bias beside it still gets its own.
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: -> (tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<2xf64>, tensor<1x2x16x16xbf16>)
// CHECK-SAME: attn.gradient_of = array<i64: 0, 1, 2, 3, 5>
// CHECK: arith.extf {{.*}} : f32 to f64
func.func @mixed(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>, %slope: tensor<2xf64>, %decay: tensor<2xf32>, %bias: tensor<1x2x16x16xbf16>) -> tensor<1x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xbf16>) k(%k : tensor<1x2x16x32xbf16>) v(%v : tensor<1x2x16x32xbf16>) captures(%slope, %decay, %bias : tensor<2xf64>, tensor<2xf32>, tensor<1x2x16x16xbf16>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<2xf64>, %dk: tensor<2xf32>, %t: tensor<1x2x16x16xbf16>):
      %x = tensor.extract %m[%h] : tensor<2xf64>
      %xf = arith.truncf %x : f64 to f32
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %y = arith.mulf %xf, %df : f32
      %r = arith.addf %s, %y : f32
      %e = tensor.extract %dk[%h] : tensor<2xf32>
      %p = math.powf %e, %df : f32
      %r2 = arith.addf %r, %p : f32
      %bb = tensor.extract %t[%b, %h, %i, %j] : tensor<1x2x16x16xbf16>
      %bf = arith.extf %bb : bf16 to f32
      %r3 = arith.addf %r2, %bf : f32
      attn.yield %r3 : f32
    } -> tensor<1x2x16x32xbf16>
  return %o : tensor<1x2x16x32xbf16>
}
