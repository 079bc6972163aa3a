// AlphaFold Evoformer row attention with pair bias and gating: the logits get
// a pair bias [1, H, N, N] (broadcast over the MSA rows) and a mask bias
// [B, 1, 1, N] (broadcast over heads and queries); the output is gated by
// sigmoid(g), g [B, H, N, Dv].
// RUN: flashlight-opt %s --verify-roundtrip --attn-explain 2>&1 | FileCheck %s
// CHECK: remark: attn.attention: 1 branch, softmax, heads 4/4, epilogue, mask=none score=[additive] score:capture0[0, h, q, kv] score:capture1[b, 0, 0, kv] epilogue:capture2[b, h, q, d]

func.func @evoformer(%q: tensor<2x4x64x32xbf16>, %k: tensor<2x4x64x32xbf16>,
                     %v: tensor<2x4x64x32xbf16>,
                     %pair: tensor<1x4x64x64xf32>,
                     %mask_bias: tensor<2x1x1x64xf32>,
                     %gate: tensor<2x4x64x32xbf16>)
    -> tensor<2x4x64x32xbf16> {
  %o = attn.attention q(%q : tensor<2x4x64x32xbf16>)
                      k(%k : tensor<2x4x64x32xbf16>)
                      v(%v : tensor<2x4x64x32xbf16>)
                      captures(%pair, %mask_bias, %gate
                               : tensor<1x4x64x64xf32>, tensor<2x1x1x64xf32>,
                                 tensor<2x4x64x32xbf16>)
         scale [0.17677669] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
              %pb: tensor<1x4x64x64xf32>, %mb: tensor<2x1x1x64xf32>,
              %g: tensor<2x4x64x32xbf16>):
           %c0 = arith.constant 0 : index
           %pair_bias = tensor.extract %pb[%c0, %h, %i, %j] : tensor<1x4x64x64xf32>
           %row_bias = tensor.extract %mb[%b, %c0, %c0, %j] : tensor<2x1x1x64xf32>
           %s1 = arith.addf %s, %pair_bias : f32
           %s2 = arith.addf %s1, %row_bias : f32
           attn.yield %s2 : f32
         }
         epilogue {
         ^bb0(%out: f32, %b: index, %h: index, %i: index, %d: index,
              %pb: tensor<1x4x64x64xf32>, %mb: tensor<2x1x1x64xf32>,
              %g: tensor<2x4x64x32xbf16>):
           %one = arith.constant 1.0 : f32
           %gv = tensor.extract %g[%b, %h, %i, %d] : tensor<2x4x64x32xbf16>
           %gf = arith.extf %gv : bf16 to f32
           // sigmoid(g) = 1 / (1 + exp(-g))
           %neg = arith.negf %gf : f32
           %e = math.exp %neg : f32
           %den = arith.addf %one, %e : f32
           %sig = arith.divf %one, %den : f32
           %r = arith.mulf %out, %sig : f32
           attn.yield %r : f32
         } -> tensor<2x4x64x32xbf16>
  return %o : tensor<2x4x64x32xbf16>
}
