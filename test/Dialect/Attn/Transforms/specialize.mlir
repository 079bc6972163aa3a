// RUN: flashlight-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(attn-specialize{batch=1 q-heads=8 kv-heads=2 q-len=100 kv-len=300 head-dim=128 dtype=f16}))" --verify-diagnostics | FileCheck %s

// Q/K/V take the new sizes and element type; each captured dimension takes
// the size of the role that indexes it (0 -> kept, h -> Hq, kv -> N, b -> B,
// q -> M, d -> Dv); results follow.
// CHECK-LABEL: func @captures_follow_their_roles
// CHECK-SAME: tensor<1x8x100x128xf16>, %{{.*}}: tensor<1x2x300x128xf16>, %{{.*}}: tensor<1x2x300x128xf16>
// pair bias [0, h, q, kv] and row bias [b, 0, 0, kv]; the gate keeps bf16
// CHECK-SAME: tensor<1x8x100x300xf32>, %{{.*}}: tensor<1x1x1x300xf32>, %{{.*}}: tensor<1x8x100x128xbf16>
// CHECK-SAME: -> tensor<1x8x100x128xf16>
// CHECK: ^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index, %{{.*}}: tensor<1x8x100x300xf32>
func.func @captures_follow_their_roles(%q: tensor<2x4x16x8xbf16>,
    %k: tensor<2x4x16x8xbf16>, %v: tensor<2x4x16x8xbf16>,
    %pair: tensor<1x4x16x16xf32>, %row: tensor<2x1x1x16xf32>,
    %gate: tensor<2x4x16x8xbf16>) -> tensor<2x4x16x8xbf16> {
  %o = attn.attention q(%q : tensor<2x4x16x8xbf16>) k(%k : tensor<2x4x16x8xbf16>)
      v(%v : tensor<2x4x16x8xbf16>)
      captures(%pair, %row, %gate : tensor<1x4x16x16xf32>, tensor<2x1x1x16xf32>,
               tensor<2x4x16x8xbf16>)
      scale [0.5] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
           %p: tensor<1x4x16x16xf32>, %r: tensor<2x1x1x16xf32>,
           %g: tensor<2x4x16x8xbf16>):
        %c0 = arith.constant 0 : index
        %x = tensor.extract %p[%c0, %h, %i, %j] : tensor<1x4x16x16xf32>
        %y = tensor.extract %r[%b, %c0, %c0, %j] : tensor<2x1x1x16xf32>
        %s1 = arith.addf %s, %x : f32
        %s2 = arith.addf %s1, %y : f32
        attn.yield %s2 : f32
      }
      epilogue {
      ^bb0(%o1: f32, %b: index, %h: index, %i: index, %d: index,
           %p: tensor<1x4x16x16xf32>, %r: tensor<2x1x1x16xf32>,
           %g: tensor<2x4x16x8xbf16>):
        %gv = tensor.extract %g[%b, %h, %i, %d] : tensor<2x4x16x8xbf16>
        %gf = arith.extf %gv : bf16 to f32
        %r1 = arith.mulf %o1, %gf : f32
        attn.yield %r1 : f32
      } -> tensor<2x4x16x8xbf16>
  return %o : tensor<2x4x16x8xbf16>
}

// -----

// Document ids are read at both q and kv: with M != N there is no single new
// size for that dimension.
func.func @negative_ids_read_at_q_and_kv(%q: tensor<1x2x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %doc: tensor<16xi32>)
    -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{dimension 0 of capture #0 is indexed by roles of different new sizes (100 and 300)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
      v(%v : tensor<1x2x16x8xf16>) captures(%doc : tensor<16xi32>)
      scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<16xi32>):
        %di = tensor.extract %ids[%i] : tensor<16xi32>
        %dj = tensor.extract %ids[%j] : tensor<16xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}
