// RUN: flashlight-opt %s --split-input-file --attn-online-softmax --cse | FileCheck %s

// Softmax: each branch starts from m = -inf, l = 0, acc = 0; one step over all
// keys at offset 0 updates the state, and finalize normalizes it (with the
// sink in the denominator) and produces the LSE.
// CHECK-LABEL: func @softmax_with_sink_and_lse
// CHECK-DAG: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[M0:.*]] = linalg.fill ins(%[[NEG_INF]] : f32) outs(%{{.*}} : tensor<1x4x16xf32>)
// CHECK-DAG: %[[L0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<1x4x16xf32>)
// CHECK-DAG: %[[A0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<1x4x16x8xf32>)
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// (m, l, acc) = step(q, k, v, m0, l0, acc0) with the mask carried over
// CHECK: %[[S:.*]]:3 = attn.online_step {{.*}} max(%[[M0]] : {{.*}}) sum(%[[L0]] : {{.*}}) acc(%[[A0]] : {{.*}}) at(%[[C0]], %[[C0]], %[[C0]], %[[C0]]) scale [5.000000e-01] normalizer softmax mask {
// CHECK: arith.cmpi sge
// out = acc / (l + exp(sink - m)); lse = m + log(l + exp(sink - m))
// CHECK: attn.online_finalize max(%[[S]]#0 : {{.*}}) sum(%[[S]]#1 : {{.*}}) acc(%[[S]]#2 : {{.*}}) sinks(%{{.*}} : tensor<4xf32>) at(%[[C0]], %[[C0]], %[[C0]]) normalizer softmax -> tensor<1x4x16x8xbf16>, tensor<1x4x16xf32>
// CHECK-NOT: attn.attention
func.func @softmax_with_sink_and_lse(%q: tensor<1x4x16x8xbf16>,
    %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>, %sink: tensor<4xf32>)
    -> (tensor<1x4x16x8xbf16>, tensor<1x4x16xf32>) {
  %o, %lse = attn.attention q(%q : tensor<1x4x16x8xbf16>)
      k(%k : tensor<1x2x16x8xbf16>) v(%v : tensor<1x2x16x8xbf16>)
      sinks(%sink : tensor<4xf32>) scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<1x4x16x8xbf16>, tensor<1x4x16xf32>
  return %o, %lse : tensor<1x4x16x8xbf16>, tensor<1x4x16xf32>
}

// -----

// Sigmoid keeps no running max or sum; two branches keep two accumulators and
// the epilogue moves to finalize.
// CHECK-LABEL: func @sigmoid_two_branches
// CHECK-NOT: 0xFF800000
// CHECK: %[[S:.*]]:2 = attn.online_step {{.*}} acc(%{{.*}}, %{{.*}} : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) {{.*}} normalizer sigmoid
// CHECK: attn.online_finalize acc(%[[S]]#0, %[[S]]#1 : {{.*}}) {{.*}} normalizer sigmoid epilogue {
// CHECK: arith.subf
func.func @sigmoid_two_branches(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q, %q : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
      k(%k, %k : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
      v(%v : tensor<1x2x16x8xf16>) scale [1.0, 0.5] normalizer sigmoid
      epilogue {
      ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
        %r = arith.subf %o1, %o2 : f32
        attn.yield %r : f32
      } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}
