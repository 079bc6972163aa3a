// RUN: flashlight-opt %s --split-input-file --attn-explain --verify-diagnostics

// One remark per attn op, located at the op; the IR is unchanged.
func.func @attention_with_everything(%q: tensor<1x4x16x8xf16>,
    %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %sink: tensor<4xf32>)
    -> (tensor<1x4x16x8xf16>, tensor<1x4x16xf32>) {
  // expected-remark @+1 {{attn.attention: 1 branch, softmax, heads 4/2, sinks, lse, mask=sliding_window(lo=-2, hi=2) score=[identity]}}
  %o, %lse = attn.attention q(%q : tensor<1x4x16x8xf16>)
      k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
      sinks(%sink : tensor<4xf32>) scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %w = arith.constant 2 : index
        %lo = arith.subi %i, %w : index
        %hi = arith.addi %i, %w : index
        %a = arith.cmpi sge, %j, %lo : index
        %c = arith.cmpi sle, %j, %hi : index
        %keep = arith.andi %a, %c : i1
        attn.yield %keep : i1
      } -> tensor<1x4x16x8xf16>, tensor<1x4x16xf32>
  return %o, %lse : tensor<1x4x16x8xf16>, tensor<1x4x16xf32>
}

// -----

// The online form is explained too: the step carries the mask, the finalize
// the epilogue and its captures.
func.func @online(%q: tensor<1x1x4x8xf16>, %k: tensor<1x1x8x8xf16>,
                  %v: tensor<1x1x8x8xf16>, %acc: tensor<1x1x4x8xf32>,
                  %g: tensor<1x1x4x8xf32>, %i0: index) -> tensor<1x1x4x8xf16> {
  // expected-remark @+1 {{attn.online_step: 1 state(s), none, heads 1/1, mask=causal(offset=0) score=[general]}}
  %a = attn.online_step q(%q : tensor<1x1x4x8xf16>) k(%k : tensor<1x1x8x8xf16>)
      v(%v : tensor<1x1x8x8xf16>) acc(%acc : tensor<1x1x4x8xf32>)
      at(%i0, %i0, %i0, %i0) scale [1.0] normalizer none
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %r = math.tanh %s : f32
        attn.yield %r : f32
      }
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi uge, %i, %j : index
        attn.yield %keep : i1
      }
  // expected-remark @+1 {{attn.online_finalize: 1 state(s), none, mask=none score=[identity] epilogue:capture0[b, h, q, d]}}
  %o = attn.online_finalize acc(%a : tensor<1x1x4x8xf32>) at(%i0, %i0, %i0)
      captures(%g : tensor<1x1x4x8xf32>) normalizer none
      epilogue {
      ^bb0(%x: f32, %b: index, %h: index, %i: index, %d: index,
           %gate: tensor<1x1x4x8xf32>):
        %y = tensor.extract %gate[%b, %h, %i, %d] : tensor<1x1x4x8xf32>
        %r = arith.mulf %x, %y : f32
        attn.yield %r : f32
      } -> tensor<1x1x4x8xf16>
  return %o : tensor<1x1x4x8xf16>
}

// -----

// Index arithmetic truncated to i32 (torch-mlir's TOSA output) is exact:
// indices are below 2^31, so the band is still seen.
func.func @causal_in_i32(%q: tensor<1x1x16x8xf16>, %k: tensor<1x1x16x8xf16>,
                         %v: tensor<1x1x16x8xf16>) -> tensor<1x1x16x8xf16> {
  // expected-remark @+1 {{mask=causal(offset=0)}}
  %o = attn.attention q(%q : tensor<1x1x16x8xf16>) k(%k : tensor<1x1x16x8xf16>)
      v(%v : tensor<1x1x16x8xf16>) scale [1.0] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %zero = arith.constant 0 : i64
        %j64 = arith.index_cast %j : index to i64
        %j32 = arith.trunci %j64 : i64 to i32
        %i64 = arith.index_cast %i : index to i64
        %i32 = arith.trunci %i64 : i64 to i32
        %d = arith.subi %j32, %i32 : i32
        %d64 = arith.extsi %d : i32 to i64
        %keep = arith.cmpi sle, %d64, %zero : i64
        attn.yield %keep : i1
      } -> tensor<1x1x16x8xf16>
  return %o : tensor<1x1x16x8xf16>
}

// -----

// Truncated to i8, an index can wrap: the mask is not a band.
func.func @truncated_to_i8(%q: tensor<1x1x16x8xf16>, %k: tensor<1x1x16x8xf16>,
                           %v: tensor<1x1x16x8xf16>) -> tensor<1x1x16x8xf16> {
  // expected-remark @+1 {{mask=custom}}
  %o = attn.attention q(%q : tensor<1x1x16x8xf16>) k(%k : tensor<1x1x16x8xf16>)
      v(%v : tensor<1x1x16x8xf16>) scale [1.0] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %j64 = arith.index_cast %j : index to i64
        %j8 = arith.trunci %j64 : i64 to i8
        %i64 = arith.index_cast %i : index to i64
        %i8 = arith.trunci %i64 : i64 to i8
        %keep = arith.cmpi sle, %j8, %i8 : i8
        attn.yield %keep : i1
      } -> tensor<1x1x16x8xf16>
  return %o : tensor<1x1x16x8xf16>
}

// -----

// A causal mask seen from the keys (kv_idx >= q_idx), as in the gradient's
// dK and dV attentions: a band the KV loop starts at, not a vote per tile.
func.func @reverse_causal(%q: tensor<1x1x64x32xf16>, %k: tensor<1x1x64x32xf16>, %v: tensor<1x1x64x32xf16>) -> tensor<1x1x64x32xf16> {
  // expected-remark @+1 {{mask=reverse_causal(offset=0)}}
  %o = attn.attention q(%q : tensor<1x1x64x32xf16>) k(%k : tensor<1x1x64x32xf16>) v(%v : tensor<1x1x64x32xf16>) scale [0.125] normalizer none
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %keep = arith.cmpi sge, %j, %i : index
      attn.yield %keep : i1
    } -> tensor<1x1x64x32xf16>
  return %o : tensor<1x1x64x32xf16>
}

// -----

// The prefix-LM seen from the keys (the gradient's dK and dV attentions):
// the first 16 rows keep every key, the others kv_idx >= q_idx.
func.func @query_prefix(%q: tensor<1x1x64x32xf16>, %k: tensor<1x1x64x32xf16>, %v: tensor<1x1x64x32xf16>) -> tensor<1x1x64x32xf16> {
  // expected-remark @+1 {{mask=prefix(length=16 of queries, band=[inf, 0])}}
  %o = attn.attention q(%q : tensor<1x1x64x32xf16>) k(%k : tensor<1x1x64x32xf16>) v(%v : tensor<1x1x64x32xf16>) scale [0.125] normalizer none
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c16 = arith.constant 16 : index
      %prefix = arith.cmpi slt, %i, %c16 : index
      %later = arith.cmpi sge, %j, %i : index
      %keep = arith.ori %prefix, %later : i1
      attn.yield %keep : i1
    } -> tensor<1x1x64x32xf16>
  return %o : tensor<1x1x64x32xf16>
}

// -----

// A mask written as the negation of what it drops (`masked_fill` of
// `(j > i) & (j >= 100)`): De Morgan's laws give the prefix-LM.
func.func @negated_prefix(%q: tensor<1x1x256x32xf16>, %k: tensor<1x1x256x32xf16>, %v: tensor<1x1x256x32xf16>) -> tensor<1x1x256x32xf16> {
  // expected-remark @+1 {{mask=prefix(length=100, band=[0, inf])}}
  %o = attn.attention q(%q : tensor<1x1x256x32xf16>) k(%k : tensor<1x1x256x32xf16>) v(%v : tensor<1x1x256x32xf16>) scale [0.125] normalizer softmax
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c100 = arith.constant 100 : index
      %true = arith.constant true
      %after = arith.cmpi sgt, %j, %i : index
      %late = arith.cmpi sge, %j, %c100 : index
      %drop = arith.andi %after, %late : i1
      %keep = arith.xori %drop, %true : i1
      attn.yield %keep : i1
    } -> tensor<1x1x256x32xf16>
  return %o : tensor<1x1x256x32xf16>
}

// -----

// A formula shared 40 levels deep (x & x, then its negation) is walked once
// per node: causal.
func.func @shared_formula(%q: tensor<1x1x64x32xf16>, %k: tensor<1x1x64x32xf16>, %v: tensor<1x1x64x32xf16>) -> tensor<1x1x64x32xf16> {
  // expected-remark @+1 {{mask=causal(offset=0)}}
  %o = attn.attention q(%q : tensor<1x1x64x32xf16>) k(%k : tensor<1x1x64x32xf16>) v(%v : tensor<1x1x64x32xf16>) scale [0.125] normalizer softmax
    mask {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %true = arith.constant true
      %a0 = arith.cmpi sgt, %j, %i : index
      %a1 = arith.ori %a0, %a0 : i1
      %a2 = arith.ori %a1, %a1 : i1
      %a3 = arith.ori %a2, %a2 : i1
      %a4 = arith.ori %a3, %a3 : i1
      %a5 = arith.ori %a4, %a4 : i1
      %a6 = arith.ori %a5, %a5 : i1
      %a7 = arith.ori %a6, %a6 : i1
      %a8 = arith.ori %a7, %a7 : i1
      %a9 = arith.ori %a8, %a8 : i1
      %a10 = arith.ori %a9, %a9 : i1
      %a11 = arith.ori %a10, %a10 : i1
      %a12 = arith.ori %a11, %a11 : i1
      %a13 = arith.ori %a12, %a12 : i1
      %a14 = arith.ori %a13, %a13 : i1
      %a15 = arith.ori %a14, %a14 : i1
      %a16 = arith.ori %a15, %a15 : i1
      %a17 = arith.ori %a16, %a16 : i1
      %a18 = arith.ori %a17, %a17 : i1
      %a19 = arith.ori %a18, %a18 : i1
      %a20 = arith.ori %a19, %a19 : i1
      %a21 = arith.ori %a20, %a20 : i1
      %a22 = arith.ori %a21, %a21 : i1
      %a23 = arith.ori %a22, %a22 : i1
      %a24 = arith.ori %a23, %a23 : i1
      %a25 = arith.ori %a24, %a24 : i1
      %a26 = arith.ori %a25, %a25 : i1
      %a27 = arith.ori %a26, %a26 : i1
      %a28 = arith.ori %a27, %a27 : i1
      %a29 = arith.ori %a28, %a28 : i1
      %a30 = arith.ori %a29, %a29 : i1
      %a31 = arith.ori %a30, %a30 : i1
      %a32 = arith.ori %a31, %a31 : i1
      %a33 = arith.ori %a32, %a32 : i1
      %a34 = arith.ori %a33, %a33 : i1
      %a35 = arith.ori %a34, %a34 : i1
      %a36 = arith.ori %a35, %a35 : i1
      %a37 = arith.ori %a36, %a36 : i1
      %a38 = arith.ori %a37, %a37 : i1
      %a39 = arith.ori %a38, %a38 : i1
      %a40 = arith.ori %a39, %a39 : i1
      %keep = arith.xori %a40, %true : i1
      attn.yield %keep : i1
    } -> tensor<1x1x64x32xf16>
  return %o : tensor<1x1x64x32xf16>
}
