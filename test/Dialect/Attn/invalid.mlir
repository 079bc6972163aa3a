// RUN: flashlight-opt %s --split-input-file --verify-diagnostics

//===----------------------------------------------------------------------===//
// attn.attention: ODS type constraints
//===----------------------------------------------------------------------===//

// Query/key/value elements must be f16, bf16 or f32.
func.func @query_i32(%q: tensor<1x2x16x8xi32>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{operand #0 must be variadic of ranked tensor of 16-bit float or bfloat16 type or 32-bit float values}}
  %o = attn.attention q(%q : tensor<1x2x16x8xi32>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Log-sum-exp results are f32.
func.func @lse_f16(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{result #1 must be variadic of ranked tensor of 32-bit float values}}
  %o, %lse = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
               scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>, tensor<1x2x16xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Each region holds at most one block.
func.func @mask_two_blocks(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{region #1 ('mask') failed to verify constraint: region with at most 1 blocks}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           cf.br ^bb1
         ^bb1:
           %t = arith.constant true
           attn.yield %t : i1
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// attn.yield only terminates the regions of the attn ops.
func.func @yield_outside_attn() {
  // expected-error @+1 {{expects parent op to be one of 'attn.attention, attn.online_step, attn.online_finalize'}}
  attn.yield
}

// -----

// The normalizer is one of softmax, sigmoid, none.
func.func @unknown_normalizer(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+3 {{expected ::flashlight::attn::Normalizer to be one of: softmax, sigmoid, none}}
  // expected-error @+2 {{failed to parse Attn_NormalizerAttr parameter 'value'}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer relu -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// attn.attention: query, key and value
//===----------------------------------------------------------------------===//

// At least one branch (only expressible in generic form).
func.func @no_query(%v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{expects at least one query tensor}}
  %o = "attn.attention"(%v) <{normalizer = #attn<normalizer softmax>, operandSegmentSizes = array<i32: 0, 0, 1, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0>, scale = array<f64>}> ({}, {}, {}) : (tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// One key per query.
func.func @key_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{expects one key tensor per query tensor, got 1 queries and 2 keys}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k, %k : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// The value is [B, Hkv, N, Dv].
func.func @value_rank(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{value must have rank 4 [B, Hkv, N, Dv], got rank 3}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A query is [B, Hq, M, Dqk].
func.func @query_rank(%q: tensor<2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{query #0 must have rank 4 [B, Hq, M, Dqk], got rank 3}}
  %o = attn.attention q(%q : tensor<2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A key is [B, Hkv, N, Dqk].
func.func @key_rank(%q: tensor<1x2x16x8xf16>, %k: tensor<1x1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{key #0 must have rank 4 [B, Hkv, N, Dqk], got rank 5}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Query, key and value share one element type.
func.func @mixed_element_types(%q: tensor<1x2x16x8xbf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{query, key and value must share one element type, got 'bf16', 'f16' and 'f16' (branch 0)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xbf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Queries have the batch size of the value.
func.func @query_batch(%q: tensor<2x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{batch size of query #0 is 2, expected 1 (from the value)}}
  %o = attn.attention q(%q : tensor<2x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Every branch has the head count of branch 0.
func.func @query_heads(%q0: tensor<1x2x16x8xf16>, %q1: tensor<1x4x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{query head count of query #1 is 4, expected 2 (from query #0)}}
  %o = attn.attention q(%q0, %q1 : tensor<1x2x16x8xf16>, tensor<1x4x16x8xf16>) k(%k, %k : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125, 0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Every branch has the query length of branch 0.
func.func @query_length(%q0: tensor<1x2x16x8xf16>, %q1: tensor<1x2x32x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{query length of query #1 is 32, expected 16 (from query #0)}}
  %o = attn.attention q(%q0, %q1 : tensor<1x2x16x8xf16>, tensor<1x2x32x8xf16>) k(%k, %k : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125, 0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Keys have the batch size of the value.
func.func @key_batch(%q: tensor<1x2x16x8xf16>, %k: tensor<2x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{batch size of key #0 is 2, expected 1 (from the value)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<2x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Keys have the head count of the value.
func.func @key_heads(%q: tensor<1x2x16x8xf16>, %k: tensor<1x1x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{key/value head count of key #0 is 1, expected 2 (from the value)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x1x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Keys have the length of the value.
func.func @key_length(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x32x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{key length of key #0 is 32, expected 16 (from the value)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x32x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A key has the head dim of its query.
func.func @key_head_dim(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x4xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{head dim of key #0 (Dqk) is 4, expected 8 (from query #0)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x4xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// GQA: the query heads split evenly over the key/value heads.
func.func @gqa_not_divisible(%q: tensor<1x3x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x3x16x8xf16> {
  // expected-error @+1 {{query heads (3) must be a multiple of key/value heads (2)}}
  %o = attn.attention q(%q : tensor<1x3x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax -> tensor<1x3x16x8xf16>
  return %o : tensor<1x3x16x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// attn.attention: scale, output, sinks, log-sum-exp
//===----------------------------------------------------------------------===//

// One scale per branch.
func.func @scale_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{expects one scale per branch (1), got 2}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125, 0.5] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// The output has the head dim of the value (Dv), not of the query.
func.func @output_dim(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x4xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{output dim 3 is 8, expected 4 [B, Hq, M, Dv]}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x4xf16>)
         scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// One sink tensor per branch.
func.func @sink_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %s: tensor<2xf32>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{expects one sink tensor per branch (1), got 2}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         sinks(%s, %s : tensor<2xf32>, tensor<2xf32>) scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// One sink logit per query head.
func.func @sink_shape(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %s: tensor<4xf32>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{sink #0 must be [Hq] = [2], got 'tensor<4xf32>'}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         sinks(%s : tensor<4xf32>) scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// At most one log-sum-exp result per branch.
func.func @lse_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{expects one log-sum-exp result per branch (1), got 2}}
  %o, %l0, %l1 = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
                   scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A log-sum-exp result is [B, Hq, M].
func.func @lse_rank(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{log-sum-exp #0 must have rank 3 [B, Hq, M], got 'tensor<1x2x16x1xf32>'}}
  %o, %lse = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
               scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>, tensor<1x2x16x1xf32>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A log-sum-exp result matches the query length M.
func.func @lse_dim(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{log-sum-exp #0 dim 2 is 8, expected 16 [B, Hq, M]}}
  %o, %lse = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
               scale [0.125] normalizer softmax -> tensor<1x2x16x8xf16>, tensor<1x2x8xf32>
  return %o : tensor<1x2x16x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// attn.attention: regions
//===----------------------------------------------------------------------===//

// score takes (s: f32, b, h, q, kv: index).
func.func @score_arg_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{score region must have 5 arguments (1 logit, 4 indices, 0 captures), got 4}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 0.0 : f32
           attn.yield %c : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Logits are f32 whatever the input element type.
func.func @score_arg_type(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{score region argument #0 must be 'f32', got 'f16'}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f16, %b: index, %h: index, %i: index, %j: index):
           %x = arith.extf %s : f16 to f32
           attn.yield %x : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// score yields one f32 per branch.
func.func @score_yield(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{score region must yield 'f32' (1 value), got 'f32', 'f32' (2 values)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           attn.yield %s, %s : f32, f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// mask takes one argument per capture after the four indices.
func.func @mask_arg_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %doc: tensor<16xi32>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{mask region must have 5 arguments (4 indices, 1 capture), got 4}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         captures(%doc : tensor<16xi32>) scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A capture argument has the type of its capture.
func.func @mask_capture_type(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %doc: tensor<16xi32>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{mask region argument #4 must be 'tensor<16xi32>', got 'tensor<16xi64>'}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         captures(%doc : tensor<16xi32>) scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<16xi64>):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// mask yields one i1.
func.func @mask_yield(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{mask region must yield 'i1' (1 value), got 'f32' (1 value)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 1.0 : f32
           attn.yield %c : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A region ends with attn.yield, not another terminator.
func.func @mask_not_yield(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{mask region must end with attn.yield}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           llvm.unreachable
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// epilogue takes (o: f32, b, h, q, d: index).
func.func @epilogue_arg_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{epilogue region must have 5 arguments (1 branch output, 4 indices, 0 captures), got 1}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         epilogue {
         ^bb0(%x: f32):
           attn.yield %x : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// The four indices are index-typed.
func.func @epilogue_index_type(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{epilogue region argument #4 must be 'index', got 'i32'}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         epilogue {
         ^bb0(%x: f32, %b: index, %h: index, %i: index, %d: i32):
           attn.yield %x : f32
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// The epilogue yields the f32 output element, not the output element type.
func.func @epilogue_yield(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{epilogue region must yield 'f32' (1 value), got 'f16' (1 value)}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125] normalizer softmax
         epilogue {
         ^bb0(%x: f32, %b: index, %h: index, %i: index, %d: index):
           %y = arith.truncf %x : f32 to f16
           attn.yield %y : f16
         } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// Several branches need an epilogue to combine them.
func.func @branches_without_epilogue(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{has 2 logit branches and needs an epilogue region to combine them}}
  %o = attn.attention q(%q, %q : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) k(%k, %k : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
         scale [0.125, 0.125] normalizer softmax -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

//===----------------------------------------------------------------------===//
// attn.online_step
//===----------------------------------------------------------------------===//

// The running state is f32.
func.func @step_acc_f16(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %a: tensor<1x2x16x8xf16>, %i: index) {
  // expected-error @+1 {{operand #3 must be variadic of ranked tensor of 32-bit float values}}
  %a2 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
          acc(%a : tensor<1x2x16x8xf16>) at(%i, %i, %i, %i) scale [0.125] normalizer none
  return
}

// -----

// softmax carries a running max and sum per branch.
func.func @step_softmax_without_stats(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %a: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{the softmax normalizer with 1 branch(es) carries 1 running max and sum tensors, got 0 and 0}}
  %a2 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
          acc(%a : tensor<1x2x16x8xf32>) at(%i, %i, %i, %i) scale [0.125] normalizer softmax
  return
}

// -----

// sigmoid carries the accumulator only.
func.func @step_sigmoid_with_stats(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %m: tensor<1x2x16xf32>, %a: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{the sigmoid normalizer with 1 branch(es) carries 0 running max and sum tensors, got 1 and 1}}
  %m2, %l2, %a2 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
                    max(%m : tensor<1x2x16xf32>) sum(%m : tensor<1x2x16xf32>) acc(%a : tensor<1x2x16x8xf32>)
                    at(%i, %i, %i, %i) scale [0.125] normalizer sigmoid
  return
}

// -----

// One accumulator per branch.
func.func @step_acc_count(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %a: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{expects one accumulator per branch (1), got 2}}
  %a2, %a3 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
               acc(%a, %a : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) at(%i, %i, %i, %i) scale [0.125] normalizer none
  return
}

// -----

// The running max is [B, Hq, BM].
func.func @step_max_rank(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %m: tensor<1x2x16x1xf32>, %l: tensor<1x2x16xf32>, %a: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{running max #0 must have rank 3 [B, Hq, BM], got 'tensor<1x2x16x1xf32>'}}
  %m2, %l2, %a2 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
                    max(%m : tensor<1x2x16x1xf32>) sum(%l : tensor<1x2x16xf32>) acc(%a : tensor<1x2x16x8xf32>)
                    at(%i, %i, %i, %i) scale [0.125] normalizer softmax
  return
}

// -----

// The running sum has the query head count.
func.func @step_sum_dim(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %m: tensor<1x2x16xf32>, %l: tensor<1x4x16xf32>, %a: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{running sum #0 dim 1 is 4, expected 2 [B, Hq, BM]}}
  %m2, %l2, %a2 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
                    max(%m : tensor<1x2x16xf32>) sum(%l : tensor<1x4x16xf32>) acc(%a : tensor<1x2x16x8xf32>)
                    at(%i, %i, %i, %i) scale [0.125] normalizer softmax
  return
}

// -----

// The accumulator has the head dim of the value (Dv).
func.func @step_acc_dim(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x4xf16>, %a: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{accumulator #0 dim 3 is 8, expected 4 [B, Hq, BM, Dv]}}
  %a2 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x4xf16>)
          acc(%a : tensor<1x2x16x8xf32>) at(%i, %i, %i, %i) scale [0.125] normalizer none
  return
}

// -----

// The accumulator is [B, Hq, BM, Dv].
func.func @step_acc_rank(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %a: tensor<2x16x8xf32>, %i: index) {
  // expected-error @+1 {{accumulator #0 must have rank 4 [B, Hq, BM, Dv], got 'tensor<2x16x8xf32>'}}
  %a2 = attn.online_step q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
          acc(%a : tensor<2x16x8xf32>) at(%i, %i, %i, %i) scale [0.125] normalizer none
  return
}

// -----

// Two branches: score takes and yields two logits.
func.func @step_score_yield(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>, %a: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{score region must yield 'f32', 'f32' (2 values), got 'f32' (1 value)}}
  %a0, %a1 = attn.online_step q(%q, %q : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) k(%k, %k : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>)
               acc(%a, %a : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) at(%i, %i, %i, %i) scale [0.125, 0.125] normalizer none
               score {
               ^bb0(%s0: f32, %s1: f32, %b: index, %h: index, %qi: index, %kv: index):
                 %d = arith.subf %s0, %s1 : f32
                 attn.yield %d : f32
               }
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.online_finalize
//===----------------------------------------------------------------------===//

// At least one accumulator (only expressible in generic form).
func.func @finalize_no_acc(%i: index) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{expects at least one accumulator}}
  %o = "attn.online_finalize"(%i, %i, %i) <{normalizer = #attn<normalizer none>, operandSegmentSizes = array<i32: 0, 0, 0, 0, 1, 1, 1, 0>}> ({}) : (index, index, index) -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// The first accumulator gives the block shape.
func.func @finalize_acc_rank(%a: tensor<2x16x8xf32>, %i: index) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{accumulator #0 must have rank 4 [B, Hq, BM, Dv], got 'tensor<2x16x8xf32>'}}
  %o = attn.online_finalize acc(%a : tensor<2x16x8xf32>) at(%i, %i, %i) normalizer none -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// The other accumulators match the first.
func.func @finalize_acc_mismatch(%a0: tensor<1x2x16x8xf32>, %a1: tensor<1x2x16x4xf32>, %i: index) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{accumulator #1 dim 3 is 4, expected 8 [B, Hq, BM, Dv]}}
  %o = attn.online_finalize acc(%a0, %a1 : tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) at(%i, %i, %i) normalizer none
         epilogue {
         ^bb0(%o0: f32, %o1: f32, %b: index, %h: index, %qi: index, %d: index):
           %x = arith.subf %o0, %o1 : f32
           attn.yield %x : f32
         } -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// The running max and sum match the accumulator's [B, Hq, BM].
func.func @finalize_max_dim(%m: tensor<1x2x32xf32>, %l: tensor<1x2x16xf32>, %a: tensor<1x2x16x8xf32>, %i: index) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{running max #0 dim 2 is 32, expected 16 [B, Hq, BM]}}
  %o = attn.online_finalize max(%m : tensor<1x2x32xf32>) sum(%l : tensor<1x2x16xf32>) acc(%a : tensor<1x2x16x8xf32>)
         at(%i, %i, %i) normalizer softmax -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// The output is [B, Hq, BM, Dv].
func.func @finalize_output_rank(%a: tensor<1x2x16x8xf32>, %i: index) -> tensor<2x16x8xf32> {
  // expected-error @+1 {{output must have rank 4 [B, Hq, M, Dv], got 'tensor<2x16x8xf32>'}}
  %o = attn.online_finalize acc(%a : tensor<1x2x16x8xf32>) at(%i, %i, %i) normalizer none -> tensor<2x16x8xf32>
  return %o : tensor<2x16x8xf32>
}

// -----

// Sinks only make sense for softmax.
func.func @finalize_sinks_need_softmax(%a: tensor<1x2x16x8xf32>, %s: tensor<2xf32>, %i: index) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{sinks need the softmax normalizer, got sigmoid}}
  %o = attn.online_finalize acc(%a : tensor<1x2x16x8xf32>) sinks(%s : tensor<2xf32>) at(%i, %i, %i) normalizer sigmoid -> tensor<1x2x16x8xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

// Log-sum-exp results only make sense for softmax.
func.func @finalize_lse_needs_softmax(%a: tensor<1x2x16x8xf32>, %i: index) -> tensor<1x2x16x8xf32> {
  // expected-error @+1 {{log-sum-exp results need the softmax normalizer, got none}}
  %o, %lse = attn.online_finalize acc(%a : tensor<1x2x16x8xf32>) at(%i, %i, %i) normalizer none -> tensor<1x2x16x8xf32>, tensor<1x2x16xf32>
  return %o : tensor<1x2x16x8xf32>
}

// -----

func.func @mean_empty_rows_sigmoid(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  // expected-error @+1 {{'mean_empty_rows' needs a softmax without sinks}}
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>) v(%v : tensor<1x2x16x8xf16>) scale [0.35] normalizer sigmoid {mean_empty_rows} -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}

// -----

// A head dim of 0 is a located error (it was an out-of-bounds offset).
func.func @empty_head_dim(%q: tensor<1x2x16x0xbf16>, %k: tensor<1x2x16x0xbf16>, %v: tensor<1x2x16x0xbf16>) -> tensor<1x2x16x0xbf16> {
  // expected-error @+1 {{value [B, Hkv, N, Dv] has size 0 in dim 3: every dimension must be at least 1}}
  %o = attn.attention q(%q : tensor<1x2x16x0xbf16>) k(%k : tensor<1x2x16x0xbf16>)
      v(%v : tensor<1x2x16x0xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x16x0xbf16>
  return %o : tensor<1x2x16x0xbf16>
}

// -----

func.func @empty_query_length(%q: tensor<1x2x0x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<1x2x0x64xbf16> {
  // expected-error @+1 {{query #0 [B, Hq, M, Dqk] has size 0 in dim 2}}
  %o = attn.attention q(%q : tensor<1x2x0x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x0x64xbf16>
  return %o : tensor<1x2x0x64xbf16>
}

// -----

func.func @value_columns_sum(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x128xbf16>) -> tensor<1x2x16x128xbf16> {
  // expected-error @+1 {{value_columns must split V's 128 columns, got widths summing to 96}}
  %o = attn.attention q(%q, %q : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>) k(%k, %k : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x128xbf16>) value_columns [64, 32] scale [0.125, 1.0] normalizer none
      -> tensor<1x2x16x128xbf16>
  return %o : tensor<1x2x16x128xbf16>
}

// -----

func.func @value_columns_one_branch(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<1x2x16x64xbf16> {
  // expected-error @+1 {{value_columns needs one width per branch and two branches or more, got 1 for 1}}
  %o = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) value_columns [64] scale [0.125] normalizer none
      -> tensor<1x2x16x64xbf16>
  return %o : tensor<1x2x16x64xbf16>
}

// -----

func.func @value_columns_epilogue(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x128xbf16>) -> tensor<1x2x16x128xbf16> {
  // expected-error @+1 {{writes each branch's block of columns (value_columns) and takes no epilogue}}
  %o = attn.attention q(%q, %q : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>) k(%k, %k : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x128xbf16>) value_columns [64, 64] scale [0.125, 1.0] normalizer none
      epilogue {
      ^bb0(%o0: f32, %o1: f32, %b: index, %h: index, %i: index, %d: index):
        attn.yield %o0 : f32
      } -> tensor<1x2x16x128xbf16>
  return %o : tensor<1x2x16x128xbf16>
}

// -----

func.func @narrow_accumulators(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>, %acc: tensor<1x2x16x16xf32>) -> tensor<1x2x16x16xf32> {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{accumulators narrower than Dv (64) must split it into one block per branch, got widths summing to 32}}
  %r:2 = attn.online_step q(%q, %q : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>) k(%k, %k : tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>) v(%v : tensor<1x2x16x64xbf16>)
      acc(%acc, %acc : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32>) at(%c0, %c0, %c0, %c0) scale [0.125, 1.0] normalizer none
  return %r#0 : tensor<1x2x16x16xf32>
}

// -----

func.func @key_side_softmax(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<1x2x16x64xf32> {
  // expected-error @+1 {{key_side needs weights that are final per element (normalizer none or sigmoid), not softmax}}
  %o, %ks = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) key_side 0 scale [0.125] normalizer softmax
      -> tensor<1x2x16x64xbf16>, tensor<1x2x16x64xf32>
  return %ks : tensor<1x2x16x64xf32>
}

// -----

func.func @key_side_branch(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<1x2x16x64xf32> {
  // expected-error @+1 {{key_side branch 1 is not one of its 1 branches}}
  %o, %ks = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) key_side 1 scale [0.125] normalizer none
      -> tensor<1x2x16x64xbf16>, tensor<1x2x16x64xf32>
  return %ks : tensor<1x2x16x64xf32>
}

// -----

func.func @key_side_shape(%q: tensor<1x4x16x64xbf16>, %k: tensor<1x2x24x64xbf16>, %v: tensor<1x2x24x64xbf16>) -> tensor<1x4x24x64xf32> {
  // expected-error @+1 {{key_side dim 1 is 4, expected 2 [B, Hkv, N, Dqk]}}
  %o, %ks = attn.attention q(%q : tensor<1x4x16x64xbf16>) k(%k : tensor<1x2x24x64xbf16>)
      v(%v : tensor<1x2x24x64xbf16>) key_side 0 scale [0.125] normalizer none
      -> tensor<1x4x16x64xbf16>, tensor<1x4x24x64xf32>
  return %ks : tensor<1x4x24x64xf32>
}

// -----

func.func @parallel_accumulate_outside(%a: tensor<1x1x16x64xf32>, %d: tensor<1x2x16x64xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{must be in the in_parallel terminator of a parallel loop}}
  attn.parallel_accumulate %a into %d at(%c0, %c0) : tensor<1x1x16x64xf32> into tensor<1x2x16x64xf32>
  return
}

// -----

func.func @terms_without_yield(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<2xf32> {
  // expected-error @+1 {{score region must yield 'f32', 'f32' (2 values), got 'f32' (1 value)}}
  %o, %t = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) term_dims [array<i64: 1>] scale [0.125] normalizer none score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s : f32
    } -> tensor<1x2x16x64xbf16>, tensor<2xf32>
  return %t : tensor<2xf32>
}

// -----

func.func @terms_dims(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<16x2xf32> {
  // expected-error @+1 {{term_dims #0 must list increasing dims among 0 (b), 1 (h), 2 (q_idx) and 3 (kv_idx)}}
  %o, %t = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) term_dims [array<i64: 2, 1>] scale [0.125] normalizer none score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s, %s : f32, f32
    } -> tensor<1x2x16x64xbf16>, tensor<16x2xf32>
  return %t : tensor<16x2xf32>
}

// -----

func.func @terms_shape(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<3xf32> {
  // expected-error @+1 {{term #0 dim 0 is 3, expected 2 its term_dims' extents}}
  %o, %t = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) term_dims [array<i64: 1>] scale [0.125] normalizer none score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s, %s : f32, f32
    } -> tensor<1x2x16x64xbf16>, tensor<3xf32>
  return %t : tensor<3xf32>
}

// -----

func.func @terms_mean_empty_rows(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x16x64xbf16>, %v: tensor<1x2x16x64xbf16>) -> tensor<2xf32> {
  // expected-error @+1 {{'mean_empty_rows' does not take terms}}
  %o, %t = attn.attention q(%q : tensor<1x2x16x64xbf16>) k(%k : tensor<1x2x16x64xbf16>)
      v(%v : tensor<1x2x16x64xbf16>) term_dims [array<i64: 1>] scale [0.125] normalizer softmax score {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      attn.yield %s, %s : f32, f32
    } {mean_empty_rows} -> tensor<1x2x16x64xbf16>, tensor<2xf32>
  return %t : tensor<2xf32>
}
