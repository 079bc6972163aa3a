// T5 relative position bias: a learned [H, 32] table indexed by a log-spaced
// bucket of (kv_idx - q_idx), bidirectional, max distance 128.
// RUN: flashlight-opt %s --verify-roundtrip --attn-explain 2>&1 | FileCheck %s
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, mask=none score=[additive] score:capture0[h, computed]

func.func @t5_relative_bias(%q: tensor<2x4x128x64xbf16>,
                            %k: tensor<2x4x128x64xbf16>,
                            %v: tensor<2x4x128x64xbf16>,
                            %table: tensor<4x32xf32>)
    -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
                      captures(%table : tensor<4x32xf32>)
         scale [1.0] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %t: tensor<4x32xf32>):
           %c0 = arith.constant 0 : i64
           %half = arith.constant 16 : i64
           %exact = arith.constant 8 : i64
           %last = arith.constant 15 : i64
           %exact_f = arith.constant 8.0 : f32
           %one_f = arith.constant 1.0 : f32
           // 8 / log(128 / 8): buckets per unit of log-distance.
           %per_log = arith.constant 2.8853900 : f32
           %rel_idx = arith.subi %j, %i : index
           %rel = arith.index_cast %rel_idx : index to i64
           // Keys after the query use the upper half of the buckets.
           %after = arith.cmpi sgt, %rel, %c0 : i64
           %base = arith.select %after, %half, %c0 : i64
           %dist = math.absi %rel : i64
           %small = arith.cmpi slt, %dist, %exact : i64
           %dist_f = arith.sitofp %dist : i64 to f32
           %ratio = arith.divf %dist_f, %exact_f : f32
           %ratio1 = arith.maximumf %ratio, %one_f : f32
           %log = math.log %ratio1 : f32
           %steps_f = arith.mulf %log, %per_log : f32
           %steps = arith.fptosi %steps_f : f32 to i64
           %far = arith.addi %exact, %steps : i64
           %far_clamped = arith.minsi %far, %last : i64
           %offset = arith.select %small, %dist, %far_clamped : i64
           %bucket = arith.addi %base, %offset : i64
           %bucket_idx = arith.index_cast %bucket : i64 to index
           %bias = tensor.extract %t[%h, %bucket_idx] : tensor<4x32xf32>
           %r = arith.addf %s, %bias : f32
           attn.yield %r : f32
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
