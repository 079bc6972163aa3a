// RUN: flashlight-opt %s --split-input-file --attn-online-softmax --attn-tile="block-m=4 block-n=8" --canonicalize | FileCheck %s

// Causal, M = N = 32: query tiles of 4 rows run in parallel over (b, h, tile);
// the KV loop stops after the tile's last row (kv <= q1); a KV tile entirely
// below the diagonal of the first row (kv_last <= q0) skips the mask.
// CHECK-LABEL: func @causal_mask_bounds_the_kv_loop
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK: scf.forall (%[[B:.*]], %[[H:.*]], %[[T:.*]]) in (2, 2, 8)
// q0 = tile * 4; rows = 4 (whole tiles divide 32); kv_end = min(q0 + 4, 32)
// CHECK: %[[Q0:.*]] = arith.muli %[[T]], %[[C4]]
// CHECK: tensor.extract_slice %arg0[%[[B]], %[[H]], %[[Q0]], 0] [1, 1, 4, 8]
// CHECK: %[[END:.*]] = arith.addi %[[Q0]], %[[C4]]
// CHECK: %[[HI:.*]] = arith.minsi %[[END]], %{{.*}}
// CHECK: scf.for %[[K0:.*]] = %{{.*}} to %[[HI]] step %[[C8]]
// full = (q0 - kv_last >= 0)
// CHECK: %[[FULL:.*]] = arith.cmpi sge
// CHECK: scf.if %[[FULL]]
// CHECK: attn.online_step {{.*}} at(%[[B]], %[[H]], %[[Q0]], %[[K0]]) scale [5.000000e-01] normalizer softmax
// CHECK-NOT: mask
// CHECK: } else {
// CHECK: attn.online_step {{.*}} normalizer softmax mask {
// CHECK: attn.online_finalize {{.*}} at(%[[B]], %[[H]], %[[Q0]])
// CHECK: tensor.parallel_insert_slice
func.func @causal_mask_bounds_the_kv_loop(%q: tensor<2x2x32x8xf16>,
    %k: tensor<2x2x32x8xf16>, %v: tensor<2x2x32x8xf16>)
    -> tensor<2x2x32x8xf16> {
  %o = attn.attention q(%q : tensor<2x2x32x8xf16>) k(%k : tensor<2x2x32x8xf16>)
      v(%v : tensor<2x2x32x8xf16>) scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<2x2x32x8xf16>
  return %o : tensor<2x2x32x8xf16>
}

// -----

// The prefix-LM seen from the keys (q < 12 keeps every key, later rows keep
// kv >= q), as in the gradient's dK and dV attentions: a query tile with a
// prefix row loops over every key, the others start at their diagonal; a
// KV tile is whole where every row of the query tile is a prefix row or
// lies inside the band.
// CHECK-LABEL: func @query_prefix_bounds_the_kv_loop
// CHECK: %[[Q0:.*]] = arith.muli %{{.*}}, %c4
// CHECK: %[[Q1:.*]] = arith.addi %[[Q0]], %c3
// CHECK: %[[DIAGONAL:.*]] = arith.maxsi %[[Q0]], %c0
// CHECK: %[[IN:.*]] = arith.cmpi slt, %[[Q0]], %c12
// CHECK: %[[LO:.*]] = arith.select %[[IN]], %c0, %[[DIAGONAL]]
// CHECK: %[[ALIGNED:.*]] = arith.divui %[[LO]], %c8
// CHECK: %[[START:.*]] = arith.muli %[[ALIGNED]], %c8
// CHECK: scf.for %[[K0:.*]] = %[[START]] to %c32 step %c8
// CHECK: %[[PREFIX:.*]] = arith.cmpi slt, %[[Q1]], %c12
// CHECK: %[[WHOLE:.*]] = arith.ori %{{.*}}, %[[PREFIX]]
// CHECK: scf.if %[[WHOLE]]
func.func @query_prefix_bounds_the_kv_loop(%q: tensor<2x2x32x8xf16>,
    %k: tensor<2x2x32x8xf16>, %v: tensor<2x2x32x8xf16>)
    -> tensor<2x2x32x8xf16> {
  %o = attn.attention q(%q : tensor<2x2x32x8xf16>) k(%k : tensor<2x2x32x8xf16>)
      v(%v : tensor<2x2x32x8xf16>) scale [0.5] normalizer none
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %p = arith.constant 12 : index
        %prefix = arith.cmpi slt, %i, %p : index
        %later = arith.cmpi sge, %j, %i : index
        %keep = arith.ori %prefix, %later : i1
        attn.yield %keep : i1
      } -> tensor<2x2x32x8xf16>
  return %o : tensor<2x2x32x8xf16>
}

// -----

// Sliding window (q - kv in [0, 7]): the loop also starts late, at the
// block-aligned max(0, q0 - 7). Its tiles are still whole (8 divides 32):
// 8 keys each, a constant, nothing to test against the length.
// CHECK-LABEL: func @window_bounds_both_ends
// CHECK: %[[LO:.*]] = arith.maxsi %{{.*}}, %c0
// CHECK: %[[ALIGNED:.*]] = arith.divui %[[LO]], %c8
// CHECK: %[[START:.*]] = arith.muli %[[ALIGNED]], %c8
// CHECK: scf.for %[[K0:.*]] = %[[START]] to
// CHECK-NOT: arith.minsi
// CHECK: tensor.extract_slice %arg1[%{{.*}}, %{{.*}}, %[[K0]], 0] [1, 1, 8, 8]
func.func @window_bounds_both_ends(%q: tensor<2x2x32x8xf16>,
    %k: tensor<2x2x32x8xf16>, %v: tensor<2x2x32x8xf16>)
    -> tensor<2x2x32x8xf16> {
  %o = attn.attention q(%q : tensor<2x2x32x8xf16>) k(%k : tensor<2x2x32x8xf16>)
      v(%v : tensor<2x2x32x8xf16>) scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %w = arith.constant 8 : index
        %d = arith.subi %i, %j : index
        %near = arith.cmpi slt, %d, %w : index
        %causal = arith.cmpi sge, %i, %j : index
        %keep = arith.andi %near, %causal : i1
        attn.yield %keep : i1
      } -> tensor<2x2x32x8xf16>
  return %o : tensor<2x2x32x8xf16>
}

// -----

// A length that whole tiles do not divide (20 keys, tiles of 8): a tile's
// keys are min(8, 20 - k0), the last tile partial.
// CHECK-LABEL: func @partial_last_key_tile
// CHECK: scf.for %[[K0:[a-z0-9_]+]] =
// CHECK: %[[LEFT:.*]] = arith.subi %c20, %[[K0]]
// CHECK: %[[KN:.*]] = arith.minsi %[[LEFT]], %c8
// CHECK: tensor.extract_slice %arg1[%{{.*}}, %{{.*}}, %[[K0]], 0] [1, 1, %[[KN]], 8]
func.func @partial_last_key_tile(%q: tensor<2x2x32x8xf16>,
    %k: tensor<2x2x20x8xf16>, %v: tensor<2x2x20x8xf16>)
    -> tensor<2x2x32x8xf16> {
  %o = attn.attention q(%q : tensor<2x2x32x8xf16>) k(%k : tensor<2x2x20x8xf16>)
      v(%v : tensor<2x2x20x8xf16>) scale [0.5] normalizer softmax
      -> tensor<2x2x32x8xf16>
  return %o : tensor<2x2x32x8xf16>
}

// -----

// A data-dependent mask is evaluated on every tile: no scf.if. GQA: query head
// h reads KV head h / 2.
// CHECK-LABEL: func @negative_data_dependent_mask_is_always_evaluated
// CHECK: scf.forall (%{{.*}}, %[[H:.*]], %{{.*}}) in (2, 4, 8)
// CHECK: %[[HKV:.*]] = arith.divui %[[H]], %c2
// CHECK: scf.for
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, %[[HKV]], %{{.*}}, 0]
// CHECK-NOT: scf.if
// CHECK: attn.online_step {{.*}} mask {
func.func @negative_data_dependent_mask_is_always_evaluated(
    %q: tensor<2x4x32x8xf16>, %k: tensor<2x2x32x8xf16>,
    %v: tensor<2x2x32x8xf16>, %doc: tensor<32xi32>) -> tensor<2x4x32x8xf16> {
  %o = attn.attention q(%q : tensor<2x4x32x8xf16>) k(%k : tensor<2x2x32x8xf16>)
      v(%v : tensor<2x2x32x8xf16>) captures(%doc : tensor<32xi32>)
      scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<32xi32>):
        %di = tensor.extract %ids[%i] : tensor<32xi32>
        %dj = tensor.extract %ids[%j] : tensor<32xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      } -> tensor<2x4x32x8xf16>
  return %o : tensor<2x4x32x8xf16>
}

// -----

// A runtime key length: a KV tile that the mask keeps and that is whole
// (k0 + 8 <= N) takes a step marked whole_keys, without the mask; the
// others (the diagonal, the last partial tile) the masked step.
// CHECK-LABEL: func.func @runtime_lengths
// CHECK: %[[N:.*]] = tensor.dim %arg1, %c2
// CHECK: scf.for %[[K0:[a-z0-9_]+]] =
// CHECK: %[[END:.*]] = arith.addi %[[K0]], %c8
// CHECK: %[[WHOLE:.*]] = arith.cmpi sle, %[[END]], %[[N]]
// CHECK: %[[BOTH:.*]] = arith.andi %{{.*}}, %[[WHOLE]]
// CHECK: scf.if %[[BOTH]]
// CHECK: attn.online_step {{.*}} normalizer softmax whole_keys{{$}}
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK: attn.online_step {{.*}} normalizer softmax mask
func.func @runtime_lengths(%q: tensor<?x2x?x16xf16>, %k: tensor<?x2x?x16xf16>,
                           %v: tensor<?x2x?x16xf16>) -> tensor<?x2x?x16xf16> {
  %o = attn.attention q(%q : tensor<?x2x?x16xf16>) k(%k : tensor<?x2x?x16xf16>)
                      v(%v : tensor<?x2x?x16xf16>)
         scale [0.25] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<?x2x?x16xf16>
  return %o : tensor<?x2x?x16xf16>
}

// -----

// A static key length that block-n does not divide (36 keys, 8-key tiles):
// the whole tiles take the whole_keys step too, only the last, partial one
// (k0 = 32) the step that tests its keys against the length (a min() per
// iteration, which LLVM does not fold).
// CHECK-LABEL: func.func @static_partial_keys
// CHECK: scf.for %[[K0:[a-z0-9_]+]] = %c0 to %c36 step %c8
// CHECK: %[[END:.*]] = arith.addi %[[K0]], %c8
// CHECK: %[[WHOLE:.*]] = arith.cmpi sle, %[[END]], %c36
// CHECK: scf.if %[[WHOLE]]
// CHECK: attn.online_step {{.*}} normalizer softmax whole_keys{{$}}
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK: attn.online_step {{.*}} normalizer softmax{{$}}
func.func @static_partial_keys(%q: tensor<1x2x16x16xf16>, %k: tensor<1x2x36x16xf16>,
                               %v: tensor<1x2x36x16xf16>) -> tensor<1x2x16x16xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x16xf16>) k(%k : tensor<1x2x36x16xf16>)
                      v(%v : tensor<1x2x36x16xf16>)
         scale [0.25] normalizer softmax -> tensor<1x2x16x16xf16>
  return %o : tensor<1x2x16x16xf16>
}

// -----

// A key-side product (normalizer none): the forall's last output starts at
// 0; each query tile carries its own [1, 1, N, D] contribution, zero at
// first, through the KV loop (every step adds its key block's rows) and adds
// it to its KV head's rows (h / 2 with GQA) in the terminator.
// CHECK-LABEL: func @key_side_is_accumulated_per_tile
// CHECK: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<1x2x48x16xf32>
// CHECK: scf.forall (%{{.*}}, %[[H:.*]], %{{.*}}) in (1, 4, 8) shared_outs(%{{.*}}, %[[KS:.*]] = %[[ZERO]])
// CHECK: %[[HKV:.*]] = arith.divui %[[H]], %c2
// CHECK: %[[PART:.*]] = linalg.fill {{.*}} -> tensor<1x1x48x16xf32>
// CHECK: %[[LOOP:.*]]:2 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[CARRIED:.*]] = %[[PART]])
// CHECK: attn.online_step {{.*}} key_side 0(%[[CARRIED]] : tensor<1x1x48x16xf32>)
// CHECK: %[[ACC:.*]] = tensor.cast %[[LOOP]]#0
// CHECK: attn.online_finalize acc(%[[ACC]]
// CHECK: scf.forall.in_parallel
// CHECK: attn.parallel_accumulate %[[LOOP]]#1 into %[[KS]] at(%{{.*}}, %[[HKV]])
func.func @key_side_is_accumulated_per_tile(%q: tensor<1x4x32x16xbf16>,
    %k: tensor<1x2x48x16xbf16>, %v: tensor<1x2x48x16xbf16>)
    -> (tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>) {
  %o, %ks = attn.attention q(%q : tensor<1x4x32x16xbf16>) k(%k : tensor<1x2x48x16xbf16>)
      v(%v : tensor<1x2x48x16xbf16>) key_side 0 scale [0.5] normalizer none
      -> tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>
  return %o, %ks : tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>
}

// -----

// Terms with a key-side product: the forall's outputs after the finalize's
// are the key side, then the term, both zeros at first; each query tile
// carries the whole term's zeros through the KV loop (its steps add their
// elements) and adds it whole, without offsets, in the terminator.
// CHECK-LABEL: func @terms_are_accumulated_whole
// CHECK: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<4xf32>
// CHECK: scf.forall {{.*}} shared_outs(%{{.*}}, %[[KS:.*]] = %{{.*}}, %[[T:.*]] = %[[ZERO]])
// CHECK: %[[LOOP:.*]]:3 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[CARRIED:.*]] = %[[ZERO]])
// CHECK: attn.online_step {{.*}} key_side 0(%{{.*}} : tensor<1x1x48x16xf32>) terms [array<i64: 1>](%[[CARRIED]] : tensor<4xf32>)
// CHECK: scf.forall.in_parallel
// CHECK: attn.parallel_accumulate %[[LOOP]]#1 into %[[KS]] at(
// CHECK: attn.parallel_accumulate %[[LOOP]]#2 into %[[T]] at() : tensor<4xf32> into tensor<4xf32>
func.func @terms_are_accumulated_whole(%q: tensor<1x4x32x16xbf16>,
    %k: tensor<1x2x48x16xbf16>, %v: tensor<1x2x48x16xbf16>)
    -> (tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>, tensor<4xf32>) {
  %o, %ks, %t = attn.attention q(%q : tensor<1x4x32x16xbf16>) k(%k : tensor<1x2x48x16xbf16>)
      v(%v : tensor<1x2x48x16xbf16>) key_side 0 term_dims [array<i64: 1>] scale [0.5] normalizer none score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s, %s : f32, f32
    } -> tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>, tensor<4xf32>
  return %o, %ks, %t : tensor<1x4x32x16xbf16>, tensor<1x2x48x16xf32>, tensor<4xf32>
}
