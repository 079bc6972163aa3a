// RUN: flashlight-opt %s --split-input-file --verify-roundtrip | FileCheck %s

// The smallest program: no regions, one branch.
// CHECK-LABEL: func @minimal
// CHECK: attn.attention q(%{{.*}} : tensor<1x2x16x8xf16>) k(%{{.*}} : tensor<1x2x16x8xf16>) v(%{{.*}} : tensor<1x2x16x8xf16>) scale [5.000000e-01] normalizer softmax -> tensor<1x2x16x8xf16>
func.func @minimal(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>,
                   %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
                      v(%v : tensor<1x2x16x8xf16>)
         scale [0.5] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Cross-attention with M != N, Dqk != Dv, MQA (one KV head), f32 output and
// dynamic sequence lengths.
// CHECK-LABEL: func @cross_mqa_dynamic
// CHECK: attn.attention {{.*}} -> tensor<2x8x?x32xf32>
func.func @cross_mqa_dynamic(%q: tensor<2x8x?x64xbf16>,
                             %k: tensor<2x1x?x64xbf16>,
                             %v: tensor<2x1x?x32xbf16>)
    -> tensor<2x8x?x32xf32> {
  %o = attn.attention q(%q : tensor<2x8x?x64xbf16>) k(%k : tensor<2x1x?x64xbf16>)
                      v(%v : tensor<2x1x?x32xbf16>)
         scale [0.125] normalizer none -> tensor<2x8x?x32xf32>
  return %o : tensor<2x8x?x32xf32>
}

// -----

// Every optional part at once: two branches, sinks, captures, all three
// regions, and one log-sum-exp per branch. Region arguments print with their
// roles as names.
// CHECK-LABEL: func @everything
// CHECK: %{{.*}}:3 = attn.attention q({{.*}}) k({{.*}}) v({{.*}}) sinks({{.*}} : tensor<2xf32>, tensor<2xf32>) captures({{.*}} : tensor<2x16xf32>, tensor<f32>) scale [5.000000e-01, 2.500000e-01] normalizer softmax score {
// CHECK-NEXT: ^bb0(%s0: f32, %s1: f32, %b: index, %h: index, %q: index, %kv: index, %{{.*}}: tensor<2x16xf32>, %{{.*}}: tensor<f32>):
// CHECK: } mask {
// CHECK-NEXT: ^bb0(%b: index, %h: index, %q: index, %kv: index, %{{.*}}: tensor<2x16xf32>, %{{.*}}: tensor<f32>):
// CHECK: } epilogue {
// CHECK-NEXT: ^bb0(%o0: f32, %o1: f32, %b: index, %h: index, %q: index, %d: index, %{{.*}}: tensor<2x16xf32>, %{{.*}}: tensor<f32>):
// CHECK: } -> tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
func.func @everything(%q1: tensor<1x2x16x8xbf16>, %q2: tensor<1x2x16x4xbf16>,
                      %k1: tensor<1x2x16x8xbf16>, %k2: tensor<1x2x16x4xbf16>,
                      %v: tensor<1x2x16x8xbf16>, %sink1: tensor<2xf32>,
                      %sink2: tensor<2xf32>, %bias: tensor<2x16xf32>,
                      %lambda: tensor<f32>)
    -> (tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) {
  %o:3 = attn.attention q(%q1, %q2 : tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>)
                        k(%k1, %k2 : tensor<1x2x16x8xbf16>, tensor<1x2x16x4xbf16>)
                        v(%v : tensor<1x2x16x8xbf16>)
                        sinks(%sink1, %sink2 : tensor<2xf32>, tensor<2xf32>)
                        captures(%bias, %lambda : tensor<2x16xf32>, tensor<f32>)
         scale [0.5, 0.25] normalizer softmax
         score {
         ^bb0(%s1: f32, %s2: f32, %b: index, %h: index, %i: index, %j: index,
              %t: tensor<2x16xf32>, %l: tensor<f32>):
           %x = tensor.extract %t[%h, %j] : tensor<2x16xf32>
           %r1 = arith.addf %s1, %x : f32
           attn.yield %r1, %s2 : f32, f32
         }
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index,
              %t: tensor<2x16xf32>, %l: tensor<f32>):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         }
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index,
              %t: tensor<2x16xf32>, %l: tensor<f32>):
           %lam = tensor.extract %l[] : tensor<f32>
           %y = arith.mulf %lam, %o2 : f32
           %r = arith.subf %o1, %y : f32
           attn.yield %r : f32
         } -> tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
  return %o#0, %o#1, %o#2
      : tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
}

// -----

// The online form of a causal softmax attention for one 4-row query block and
// one 8-key block: running max / sum / accumulator in, new state out, then
// normalized once at the end with an LSE.
// CHECK-LABEL: func @online_softmax
// CHECK: %[[S:.*]]:3 = attn.online_step q(%{{.*}} : tensor<1x1x4x8xf16>) k(%{{.*}} : tensor<1x1x8x8xf16>) v(%{{.*}} : tensor<1x1x8x8xf16>) max(%{{.*}} : tensor<1x1x4xf32>) sum(%{{.*}} : tensor<1x1x4xf32>) acc(%{{.*}} : tensor<1x1x4x8xf32>) at(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) scale [5.000000e-01] normalizer softmax mask {
// CHECK: attn.online_finalize max(%[[S]]#0 : tensor<1x1x4xf32>) sum(%[[S]]#1 : tensor<1x1x4xf32>) acc(%[[S]]#2 : tensor<1x1x4x8xf32>) at({{.*}}) normalizer softmax -> tensor<1x1x4x8xf16>, tensor<1x1x4xf32>
func.func @online_softmax(%q: tensor<1x1x4x8xf16>, %k: tensor<1x1x8x8xf16>,
                          %v: tensor<1x1x8x8xf16>, %m: tensor<1x1x4xf32>,
                          %l: tensor<1x1x4xf32>, %acc: tensor<1x1x4x8xf32>,
                          %b: index, %h: index, %q0: index, %k0: index)
    -> (tensor<1x1x4x8xf16>, tensor<1x1x4xf32>) {
  %m1, %l1, %acc1 = attn.online_step q(%q : tensor<1x1x4x8xf16>)
      k(%k : tensor<1x1x8x8xf16>) v(%v : tensor<1x1x8x8xf16>)
      max(%m : tensor<1x1x4xf32>) sum(%l : tensor<1x1x4xf32>)
      acc(%acc : tensor<1x1x4x8xf32>) at(%b, %h, %q0, %k0)
      scale [0.5] normalizer softmax
      mask {
      ^bb0(%bb: index, %hh: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      }
  %o, %lse = attn.online_finalize max(%m1 : tensor<1x1x4xf32>)
      sum(%l1 : tensor<1x1x4xf32>) acc(%acc1 : tensor<1x1x4x8xf32>)
      at(%b, %h, %q0) normalizer softmax
      -> tensor<1x1x4x8xf16>, tensor<1x1x4xf32>
  return %o, %lse : tensor<1x1x4x8xf16>, tensor<1x1x4xf32>
}

// -----

// Sigmoid carries only accumulators: no running max or sum. Two branches,
// GQA (2 query heads per KV head), combined in the finalize epilogue.
// CHECK-LABEL: func @online_sigmoid_two_branches
// CHECK: %[[A:.*]]:2 = attn.online_step q({{.*}}) k({{.*}}) v({{.*}}) acc(%{{.*}}, %{{.*}} : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) at({{.*}}) scale [1.000000e+00, 1.000000e+00] normalizer sigmoid
// CHECK: attn.online_finalize acc(%[[A]]#0, %[[A]]#1 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) at({{.*}}) normalizer sigmoid epilogue {
func.func @online_sigmoid_two_branches(
    %q: tensor<1x2x4x8xbf16>, %k: tensor<1x1x8x8xbf16>,
    %v: tensor<1x1x8x8xbf16>, %acc1: tensor<1x2x4x8xf32>,
    %acc2: tensor<1x2x4x8xf32>, %i0: index) -> tensor<1x2x4x8xbf16> {
  %a:2 = attn.online_step q(%q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
      k(%k, %k : tensor<1x1x8x8xbf16>, tensor<1x1x8x8xbf16>)
      v(%v : tensor<1x1x8x8xbf16>)
      acc(%acc1, %acc2 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
      at(%i0, %i0, %i0, %i0) scale [1.0, 1.0] normalizer sigmoid
  %o = attn.online_finalize
      acc(%a#0, %a#1 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
      at(%i0, %i0, %i0) normalizer sigmoid
      epilogue {
      ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
        %r = arith.subf %o1, %o2 : f32
        attn.yield %r : f32
      } -> tensor<1x2x4x8xbf16>
  return %o : tensor<1x2x4x8xbf16>
}

// -----

// value_columns: each branch weighs its own block of V's columns and writes
// the same block of the output (no epilogue); in the online form the
// accumulators are the blocks' widths.
// CHECK-LABEL: func.func @value_columns
// CHECK: attn.attention {{.*}} value_columns [32, 16] scale [1.250000e-01, 1.000000e+00] normalizer none
// CHECK: attn.online_step {{.*}} acc(%{{.*}}, %{{.*}} : tensor<1x2x4x32xf32>, tensor<1x2x4x16xf32>)
// CHECK: attn.online_finalize acc({{.*}} : tensor<1x2x4x32xf32>, tensor<1x2x4x16xf32>) at({{.*}}) normalizer none -> tensor<1x2x4x48xbf16>
func.func @value_columns(
    %q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x8x8xbf16>,
    %v: tensor<1x2x8x48xbf16>, %acc1: tensor<1x2x4x32xf32>,
    %acc2: tensor<1x2x4x16xf32>, %i0: index)
    -> (tensor<1x2x4x48xbf16>, tensor<1x2x4x48xbf16>) {
  %o = attn.attention q(%q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
      k(%k, %k : tensor<1x2x8x8xbf16>, tensor<1x2x8x8xbf16>)
      v(%v : tensor<1x2x8x48xbf16>) value_columns [32, 16]
      scale [0.125, 1.0] normalizer none -> tensor<1x2x4x48xbf16>
  %a:2 = attn.online_step q(%q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
      k(%k, %k : tensor<1x2x8x8xbf16>, tensor<1x2x8x8xbf16>)
      v(%v : tensor<1x2x8x48xbf16>)
      acc(%acc1, %acc2 : tensor<1x2x4x32xf32>, tensor<1x2x4x16xf32>)
      at(%i0, %i0, %i0, %i0) scale [0.125, 1.0] normalizer none
  %f = attn.online_finalize
      acc(%a#0, %a#1 : tensor<1x2x4x32xf32>, tensor<1x2x4x16xf32>)
      at(%i0, %i0, %i0) normalizer none -> tensor<1x2x4x48xbf16>
  return %o, %f : tensor<1x2x4x48xbf16>, tensor<1x2x4x48xbf16>
}

// -----

// The key-side product of branch 0 (normalizer none): one more result,
// [B, Hkv, N, Dqk] f32, after the output; and the tiled form's parts, the
// step's key_side operand and the loop's parallel_accumulate.
// CHECK-LABEL: func @key_side
// CHECK: attn.attention {{.*}} key_side 0 scale [5.000000e-01] normalizer none -> tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>
// CHECK: attn.online_step {{.*}} acc(%{{.*}} : tensor<1x1x16x16xf32>) key_side 0(%{{.*}} : tensor<1x1x48x16xf32>) at(
// CHECK: attn.parallel_accumulate %{{.*}} into %{{.*}} at(%{{.*}}, %{{.*}}) : tensor<1x1x48x16xf32> into tensor<1x2x48x16xf32>
func.func @key_side(%q: tensor<1x4x32x16xbf16>, %k: tensor<1x2x48x16xbf16>,
    %v: tensor<1x2x48x16xbf16>, %qt: tensor<1x1x16x16xbf16>,
    %kt: tensor<1x1x16x16xbf16>, %vt: tensor<1x1x16x16xbf16>,
    %acc: tensor<1x1x16x16xf32>, %part: tensor<1x1x48x16xf32>,
    %i: index) -> (tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>) {
  %o, %ks = attn.attention q(%q : tensor<1x4x32x16xbf16>) k(%k : tensor<1x2x48x16xbf16>)
      v(%v : tensor<1x2x48x16xbf16>) key_side 0 scale [0.5] normalizer none
      -> tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>
  %s:2 = attn.online_step q(%qt : tensor<1x1x16x16xbf16>) k(%kt : tensor<1x1x16x16xbf16>)
      v(%vt : tensor<1x1x16x16xbf16>) acc(%acc : tensor<1x1x16x16xf32>)
      key_side 0(%part : tensor<1x1x48x16xf32>) at(%i, %i, %i, %i)
      scale [0.5] normalizer none
  %r = scf.forall (%h) in (2) shared_outs(%dest = %ks) -> (tensor<1x2x48x16xf32>) {
    %c0 = arith.constant 0 : index
    scf.forall.in_parallel {
      attn.parallel_accumulate %s#1 into %dest at(%c0, %h)
          : tensor<1x1x48x16xf32> into tensor<1x2x48x16xf32>
    }
  }
  return %o, %r : tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>
}

// -----

// Terms: the score region yields them after its logit; the attention
// returns one tensor per term_dims entry (after the output), the step
// takes and returns whole term tensors, and parallel_accumulate adds them
// without offsets.
// CHECK-LABEL: func @terms
// CHECK: attn.attention {{.*}} term_dims [array<i64: 0, 1, 2, 3>, array<i64: 1>] scale [5.000000e-01] normalizer none score {
// CHECK: attn.yield %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32
// CHECK: } -> tensor<1x2x16x16xbf16>, tensor<1x2x16x32xf32>, tensor<2xf32>
// CHECK: attn.online_step {{.*}} terms [array<i64: 0, 1, 2, 3>, array<i64: 1>](%{{.*}}, %{{.*}} : tensor<1x2x16x32xf32>, tensor<2xf32>) at(
// CHECK: attn.parallel_accumulate %{{.*}} into %{{.*}} at() : tensor<2xf32> into tensor<2xf32>
func.func @terms(%q: tensor<1x2x16x16xbf16>, %k: tensor<1x2x32x16xbf16>,
    %v: tensor<1x2x32x16xbf16>, %acc: tensor<1x2x16x16xf32>,
    %t0: tensor<1x2x16x32xf32>, %t1: tensor<2xf32>, %i: index)
    -> (tensor<1x2x16x16xbf16>, tensor<1x2x16x32xf32>, tensor<2xf32>) {
  %o, %a, %b = attn.attention q(%q : tensor<1x2x16x16xbf16>) k(%k : tensor<1x2x32x16xbf16>)
      v(%v : tensor<1x2x32x16xbf16>) term_dims [array<i64: 0, 1, 2, 3>, array<i64: 1>]
      scale [0.5] normalizer none score {
    ^bb0(%s: f32, %bb: index, %h: index, %qi: index, %kv: index):
      attn.yield %s, %s, %s : f32, f32, f32
    } -> tensor<1x2x16x16xbf16>, tensor<1x2x16x32xf32>, tensor<2xf32>
  %s:3 = attn.online_step q(%q : tensor<1x2x16x16xbf16>) k(%k : tensor<1x2x32x16xbf16>)
      v(%v : tensor<1x2x32x16xbf16>) acc(%acc : tensor<1x2x16x16xf32>)
      terms [array<i64: 0, 1, 2, 3>, array<i64: 1>](%t0, %t1 : tensor<1x2x16x32xf32>, tensor<2xf32>)
      at(%i, %i, %i, %i) scale [0.5] normalizer none score {
    ^bb0(%s: f32, %bb: index, %h: index, %qi: index, %kv: index):
      attn.yield %s, %s, %s : f32, f32, f32
    }
  %r = scf.forall (%h) in (2) shared_outs(%dest = %b) -> (tensor<2xf32>) {
    scf.forall.in_parallel {
      attn.parallel_accumulate %s#2 into %dest at() : tensor<2xf32> into tensor<2xf32>
    }
  }
  return %o, %a, %r : tensor<1x2x16x16xbf16>, tensor<1x2x16x32xf32>, tensor<2xf32>
}
