// RUN: flashlight-opt %s --split-input-file --verify-diagnostics --attn-gradient="per-head-key-value-from=16" | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --verify-diagnostics --attn-gradient="fuse-key-value-from=16" | FileCheck %s --check-prefix=FUSED
// RUN: flashlight-opt %s --split-input-file --verify-diagnostics --attn-gradient | FileCheck %s --check-prefix=GROUPED

// Soft-capped causal GQA (4 query heads over 2 KV heads): the forward again
// with its LSE, Delta = rowsum(dO * O), then dQ, dK and dV as attentions.
// (The sums of dK and dV over a KV head's query heads read heads 2 h and
// 2 h + 1: below.)
// CHECK-DAG: #[[H0:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1 * 2, d2, d3)>
// CHECK-DAG: #[[H1:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1 * 2 + 1, d2, d3)>
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<1x4x16x32xbf16>, %[[K:[^:]+]]: tensor<1x2x16x32xbf16>, %[[V:[^:]+]]: tensor<1x2x16x32xbf16>, %[[DO:[^:]+]]: tensor<1x4x16x32xbf16>)
// CHECK-SAME: -> (tensor<1x4x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>)
// CHECK: %[[FWD:.+]]:2 = attn.attention q(%[[Q]] {{.*}} normalizer softmax
// CHECK: -> tensor<1x4x16x32xbf16>, tensor<1x4x16xf32>
// CHECK: %[[DELTA:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[DO]], %[[FWD]]#0
// dQ: branches S (Q, K) and dP (dO, V), K the value.
// CHECK: %[[DQ:.+]] = attn.attention q(%[[Q]], %[[DO]] {{.*}} k(%[[K]], %[[V]] {{.*}} v(%[[K]] {{.*}} captures(%[[FWD]]#1, %[[DELTA]] {{.*}} scale [3.500000e-01, 1.000000e+00] normalizer none score {
// CHECK: ^bb0(%[[S:.+]]: f32, %[[DP:.+]]: f32, %[[B:.+]]: index, %[[H:.+]]: index, %[[I:.+]]: index, %[[J:.+]]: index, %[[L:.+]]: tensor<1x4x16xf32>, %[[D:.+]]: tensor<1x4x16xf32>):
// d(30 tanh(s / 30))/ds = (1 / 30) (1 - tanh^2) 30.
// CHECK: %[[X:.+]] = arith.divf %[[S]]
// CHECK: %[[T:.+]] = math.tanh %[[X]]
// CHECK: %[[T2:.+]] = arith.mulf %[[T]], %[[T]]
// CHECK: arith.subf %{{.*}}, %[[T2]]
// CHECK: %[[LROW:.+]] = tensor.extract %[[L]][%[[B]], %[[H]], %[[I]]]
// P = exp(t - L) as 2^(t log2 e - L log2 e).
// CHECK: %[[P:.+]] = math.exp2
// CHECK: %[[DROW:.+]] = tensor.extract %[[D]][%[[B]], %[[H]], %[[I]]]
// CHECK: %[[DT:.+]] = arith.subf %[[DP]], %[[DROW]]
// CHECK: %[[PDT:.+]] = arith.mulf %[[P]], %[[DT]]
// CHECK: %[[DS:.+]] = arith.mulf %[[PDT]]
// CHECK: attn.yield %[[DS]], %{{.*}} : f32, f32
// CHECK: } mask {
// CHECK: arith.cmpi sge
// CHECK: } epilogue {
// CHECK: arith.mulf %{{.*}}, %{{.*}} : f32
// dK and dV attend from the keys to the query rows. The mask reads
// positions and the lengths reach per-head-key-value-from: K and V
// repeated per query head, so that each attention's rows are one head's
// (the causal bound stays a bound, not row mod 16)...
// Below it (the default's 4096), grouped rows.
// GROUPED-LABEL: func.func @gradient(
// GROUPED: tensor.collapse_shape {{.*}} : tensor<1x2x2x16x32xbf16> into tensor<1x2x32x32xbf16>
// GROUPED-NOT: iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]
// GROUPED: return
// CHECK: %[[KR:.+]] = linalg.generic {{.*}} ins(%[[K]] : tensor<1x2x16x32xbf16>) outs(%{{.*}} : tensor<1x4x16x32xbf16>)
// CHECK: %[[VR:.+]] = linalg.generic {{.*}} ins(%[[V]] : tensor<1x2x16x32xbf16>) outs(%{{.*}} : tensor<1x4x16x32xbf16>)
// CHECK: %[[DKH:.+]] = attn.attention q(%[[KR]], %[[VR]] {{.*}} k(%[[Q]], %[[DO]] {{.*}} v(%[[Q]] {{.*}} normalizer none score {
// CHECK-NOT: arith.remui
// CHECK: } mask {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.cmpi sge, %kv, %q
// CHECK: %[[DVH:.+]] = attn.attention q(%[[KR]] : {{.*}} k(%[[Q]] : {{.*}} v(%[[DO]] : {{.*}} scale [3.500000e-01] normalizer none score {
// ... then each KV head's gradients the sums (f32, rounded) of its 2 query
// heads', heads 2 h and 2 h + 1, in one elementwise pass.
// CHECK: %[[DK:.+]] = linalg.generic {indexing_maps = [#[[H0]], #[[H1]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[DKH]], %[[DKH]] : tensor<1x4x16x32xbf16>, tensor<1x4x16x32xbf16>) outs(%{{.*}} : tensor<1x2x16x32xbf16>)
// CHECK: %[[A:.+]] = arith.extf
// CHECK: %[[B:.+]] = arith.extf
// CHECK: %[[S:.+]] = arith.addf %[[A]], %[[B]] : f32
// CHECK: arith.truncf %[[S]] : f32 to bf16
// CHECK: %[[DV:.+]] = linalg.generic {{.*}} ins(%[[DVH]], %[[DVH]] :
// CHECK: return %[[DQ]], %[[DK]], %[[DV]]
// CHECK-NOT: func.func @softcap
func.func @softcap(%q: tensor<1x4x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>) -> tensor<1x4x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x4x16x32xbf16>) k(%k : tensor<1x2x16x32xbf16>) v(%v : tensor<1x2x16x32xbf16>) scale [0.35] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 30.0 : f32
      %x = arith.divf %s, %c : f32
      %t = math.tanh %x : f32
      %y = arith.mulf %t, %c : f32
      attn.yield %y : f32
    }
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %keep = arith.cmpi sge, %i, %j : index
      attn.yield %keep : i1
    } -> tensor<1x4x16x32xbf16>
  return %o : tensor<1x4x16x32xbf16>
}

// -----

// GQA without a mask: dK and dV attend from the keys to the query rows of
// their group, side by side along the rows (no repeated K and V, no sums).
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<1x4x16x32xbf16>, %[[K:[^:]+]]: tensor<1x2x16x32xbf16>, %[[V:[^:]+]]: tensor<1x2x16x32xbf16>, %[[DO:[^:]+]]: tensor<1x4x16x32xbf16>)
// CHECK: %[[QR:.+]] = tensor.collapse_shape {{.*}} : tensor<1x2x2x16x32xbf16> into tensor<1x2x32x32xbf16>
// CHECK: %[[DOR:.+]] = tensor.collapse_shape {{.*}} : tensor<1x2x2x16x32xbf16> into tensor<1x2x32x32xbf16>
// CHECK: %[[DK:.+]] = attn.attention q(%[[K]], %[[V]] {{.*}} k(%[[QR]], %[[DOR]] {{.*}} v(%[[QR]] {{.*}} normalizer none score {
// Row i' of the 2 x 16 is query head h * 2 + i' / 16, row i' mod 16.
// CHECK: arith.divui %{{.*}}, %c16
// CHECK: arith.remui %{{.*}}, %c16
// CHECK: %[[DV:.+]] = attn.attention q(%[[K]] : {{.*}} k(%[[QR]] : {{.*}} v(%[[DOR]] : {{.*}} normalizer none score {
// CHECK-NOT: iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]
// CHECK: return %{{.*}}, %[[DK]], %[[DV]]
func.func @gqa(%q: tensor<1x4x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>) -> tensor<1x4x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x4x16x32xbf16>) k(%k : tensor<1x2x16x32xbf16>) v(%v : tensor<1x2x16x32xbf16>) scale [0.35] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %c = arith.constant 30.0 : f32
      %x = arith.divf %s, %c : f32
      %t = math.tanh %x : f32
      %y = arith.mulf %t, %c : f32
      attn.yield %y : f32
    } -> tensor<1x4x16x32xbf16>
  return %o : tensor<1x4x16x32xbf16>
}

// -----

// Sigmoid: no forward again, no row statistics; dS = dP P (1 - P).
// CHECK-LABEL: func.func @gradient(
// CHECK-NOT: normalizer sigmoid
// CHECK-NOT: linalg.generic
// CHECK: attn.attention q(%arg0, %arg3 {{.*}} normalizer none score {
// CHECK: ^bb0(%[[S:.+]]: f32, %[[DP:.+]]: f32,
// CHECK: %[[E:.+]] = math.exp
// CHECK: %[[P:.+]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK: %[[Q:.+]] = arith.subf %{{.*}}, %[[P]]
// CHECK: %[[PQ:.+]] = arith.mulf %[[P]], %[[Q]]
// CHECK: arith.mulf %[[DP]], %[[PQ]]
func.func @sigmoid(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xf16>) k(%k : tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25] normalizer sigmoid -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}

// -----

// A score op without a derivative rule is refused where it stands.
func.func @no_rule(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xf16>) k(%k : tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25] normalizer softmax
    score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      // expected-error @+1 {{attn-gradient: cannot differentiate 'math.sin' in the score region}}
      %y = math.sin %s : f32
      attn.yield %y : f32
    } -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}

// -----

// Two branches (differential attention): each branch's forward again, dO
// through the epilogue's derivative to each branch, a gradient per branch;
// the shared V's gradients add up. Every clone of the mask region has its
// own arguments.
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: -> (tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>)
// CHECK: %[[F0:.+]]:2 = attn.attention q(%arg0 : {{.*}} k(%arg2 : {{.*}} scale [2.500000e-01] normalizer softmax
// CHECK: %[[F1:.+]]:2 = attn.attention q(%arg1 : {{.*}} k(%arg3 : {{.*}} scale [1.250000e-01] normalizer softmax
// CHECK: %[[DO0:.+]] = linalg.generic {{.*}} ins(%[[F0]]#0, %[[F1]]#0, %arg5
// CHECK: %[[DQ0:.+]] = attn.attention q(%arg0, %[[DO0]]
// CHECK: %[[DK0:.+]] = attn.attention q(%arg2, %arg4
// CHECK: %[[DV0:.+]] = attn.attention q(%arg2 :
// CHECK: %[[DO1:.+]] = linalg.generic {{.*}} ins(%[[F0]]#0, %[[F1]]#0, %arg5
// CHECK: arith.mulf %{{.*}}, %cst
// CHECK: %[[DQ1:.+]] = attn.attention q(%arg1, %[[DO1]]
// CHECK: %[[DK1:.+]] = attn.attention q(%arg3, %arg4
// CHECK: %[[DV1:.+]] = attn.attention q(%arg3 :
// CHECK: %[[DV:.+]] = linalg.generic {{.*}} ins(%[[DV0]], %[[DV1]]
// CHECK: return %[[DQ0]], %[[DQ1]], %[[DK0]], %[[DK1]], %[[DV]]
func.func @two_branches(%q1: tensor<1x2x16x32xf16>, %q2: tensor<1x2x16x32xf16>, %k1: tensor<1x2x16x32xf16>, %k2: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  %o = attn.attention q(%q1, %q2 : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) k(%k1, %k2 : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25, 0.125] normalizer softmax
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %ji = arith.index_cast %j : index to i64
      %ii = arith.index_cast %i : index to i64
      %keep = arith.cmpi sle, %ji, %ii : i64
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

// -----

func.func @crossed_logits(%q: tensor<1x2x16x32xf16>, %k: tensor<1x2x16x32xf16>, %v: tensor<1x2x16x32xf16>) -> tensor<1x2x16x32xf16> {
  // expected-error @+1 {{attn-gradient: the score of branch 0 reads another branch's logit; its gradient is not derived yet}}
  %o = attn.attention q(%q, %k : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) k(%k, %q : tensor<1x2x16x32xf16>, tensor<1x2x16x32xf16>) v(%v : tensor<1x2x16x32xf16>) scale [0.25, 0.25] normalizer softmax
    score {
    ^bb0(%s0: f32, %s1: f32, %b: index, %h: index, %i: index, %j: index):
      %y = arith.addf %s0, %s1 : f32
      attn.yield %y, %s1 : f32, f32
    }
    epilogue {
    ^bb0(%o0: f32, %o1: f32, %b: index, %h: index, %i: index, %d: index):
      %r = arith.subf %o0, %o1 : f32
      attn.yield %r : f32
    } -> tensor<1x2x16x32xf16>
  return %o : tensor<1x2x16x32xf16>
}

// -----

// A sink joins the forward again (its L) and gets a gradient of its own;
// a gate in the epilogue scales dO by its derivative first, and gets a
// gradient too: dO times the derivative at the element read.
// CHECK-LABEL: func.func @gradient(
// CHECK-SAME: -> (tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<1x2x16x32xbf16>, tensor<2xf32>, tensor<1x2x16x32xf32>)
// CHECK-SAME: attn.gradient_of = array<i64: 0, 1, 2, 3, 4>
// CHECK: %[[FWD:.+]]:2 = attn.attention {{.*}} sinks(%arg3 : tensor<2xf32>) captures(%arg4
// CHECK-NOT: epilogue
// CHECK: -> tensor<1x2x16x32xbf16>, tensor<1x2x16xf32>
// CHECK: %[[DO:.+]] = linalg.generic {{.*}} ins(%[[FWD]]#0, %arg5
// CHECK: %[[G:.+]] = tensor.extract %arg4
// CHECK: arith.mulf
// CHECK: %[[DELTA:.+]] = linalg.generic {{.*}} ins(%[[DO]], %[[FWD]]#0
// CHECK: attn.attention q(%arg0, %[[DO]]
// CHECK: %[[DSINK:.+]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]} ins(%arg3, %[[FWD]]#1, %[[DELTA]]
// CHECK: math.exp
// CHECK: %[[DGATE:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[FWD]]#0, %arg5 {{.*}} outs(
// CHECK: return {{.*}}, %[[DSINK]], %[[DGATE]] :
func.func @sink_gate(%q: tensor<1x2x16x32xbf16>, %k: tensor<1x2x16x32xbf16>, %v: tensor<1x2x16x32xbf16>, %sink: tensor<2xf32>, %gate: tensor<1x2x16x32xf32>) -> tensor<1x2x16x32xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x32xbf16>) k(%k : tensor<1x2x16x32xbf16>) v(%v : tensor<1x2x16x32xbf16>) sinks(%sink : tensor<2xf32>) captures(%gate : tensor<1x2x16x32xf32>) scale [0.25] normalizer softmax
    epilogue {
    ^bb0(%x: f32, %b: index, %h: index, %i: index, %d: index, %g: tensor<1x2x16x32xf32>):
      %gv = tensor.extract %g[%b, %h, %i, %d] : tensor<1x2x16x32xf32>
      %y = arith.mulf %x, %gv : f32
      attn.yield %y : f32
    } -> tensor<1x2x16x32xbf16>
  return %o : tensor<1x2x16x32xbf16>
}

// -----

// Head dims of whole 64-column atoms, lengths from fuse-key-value-from: dK
// and dV in one attention from K and V to the queries, its value [Q | dO]
// and value_columns: scale dS weighs Q's columns (dK), P dO's (dV); the two
// gradients are its column blocks. The scale comes with dP's logit (its
// branch scale) and Delta, so that no multiply per element is left for it.
// Shorter (the default: 2048): two.
// CHECK-LABEL: func.func @gradient(
// CHECK-NOT: value_columns
// CHECK: return
// FUSED: %[[QDO:.+]] = tensor.concat dim(3) %arg0, %arg3 : (tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>) -> tensor<1x2x16x128xbf16>
// FUSED: %[[KV:.+]] = attn.attention q(%arg1, %arg2 {{.*}} k(%arg0, %arg3 {{.*}} v(%[[QDO]] : tensor<1x2x16x128xbf16>) captures({{.*}}) value_columns [64, 64] scale [1.250000e-01, 1.250000e-01] normalizer none score {
// FUSED: ^bb0(%[[S:.+]]: f32, %[[DP:.+]]: f32,
// FUSED: %[[P:.+]] = math.exp2
// FUSED: %[[DELTA:.+]] = tensor.extract
// FUSED: %[[SCALE:.+]] = arith.constant 1.250000e-01 : f32
// FUSED-NEXT: %[[SDELTA:.+]] = arith.mulf %[[DELTA]], %[[SCALE]]
// FUSED-NEXT: %[[DIFF:.+]] = arith.subf %[[DP]], %[[SDELTA]]
// FUSED-NEXT: %[[SDS:.+]] = arith.mulf %[[P]], %[[DIFF]]
// FUSED-NOT: arith.constant 1.250000e-01
// FUSED: attn.yield %{{.+}}, %[[P]] : f32, f32
// FUSED: } mask {
// FUSED-NOT: epilogue
// FUSED: } -> tensor<1x2x16x128xbf16>
// FUSED: %[[DK:.+]] = tensor.extract_slice %[[KV]][0, 0, 0, 0] [1, 2, 16, 64] [1, 1, 1, 1]
// FUSED: %[[DV:.+]] = tensor.extract_slice %[[KV]][0, 0, 0, 64] [1, 2, 16, 64] [1, 1, 1, 1]
// FUSED: return %{{.*}}, %[[DK]], %[[DV]] : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>
func.func @causal_d64(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<1x2x16x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>) v(%v : tensor<1x2x16x64xbf16>) scale [0.125] normalizer softmax
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %keep = arith.cmpi sge, %i, %j : index
      attn.yield %keep : i1
    } -> tensor<1x2x16x64xbf16>
  return %o : tensor<1x2x16x64xbf16>
}

// -----

// Sigmoid, dK and dV in one attention: the dP logit's branch scale makes
// the weight scale dP sigma (1 - sigma), with no multiply by the scale
// (the only 0.125 is the branch scale; dt = 1 multiplies, canonicalized
// away later).
// FUSED: func.func @gradient(
// FUSED: value_columns [64, 64] scale [1.250000e-01, 1.250000e-01] normalizer none score {
// FUSED: ^bb0(%[[S:.+]]: f32, %[[DP:.+]]: f32,
// FUSED-NOT: 1.250000e-01
// FUSED: %[[SIG:.+]] = arith.divf
// FUSED: %[[ONEMINUS:.+]] = arith.subf %{{.+}}, %[[SIG]]
// FUSED: %[[DSIG:.+]] = arith.mulf %[[SIG]], %[[ONEMINUS]]
// FUSED: %[[DS:.+]] = arith.mulf %[[DP]], %[[DSIG]]
// FUSED-NOT: 1.250000e-01
// FUSED: attn.yield %{{.+}}, %[[SIG]] : f32, f32
func.func @sigmoid_d64(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<1x2x16x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>) v(%v : tensor<1x2x16x64xbf16>) scale [0.125] normalizer sigmoid -> tensor<1x2x16x64xbf16>
  return %o : tensor<1x2x16x64xbf16>
}
