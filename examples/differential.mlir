// Differential attention: (softmax(Q1 K1^T) - lambda * softmax(Q2 K2^T)) V,
// two logit branches sharing one KV loop, combined in the epilogue. lambda is
// a runtime scalar (captured rank-0 tensor).
// RUN: flashlight-opt %s --verify-roundtrip --attn-explain 2>&1 | FileCheck %s
// CHECK: remark: attn.attention: 2 branches, softmax, heads 4/4, epilogue, mask=causal(offset=0) score=[identity, identity] epilogue:capture0[]

func.func @differential(%q1: tensor<2x4x128x32xbf16>,
                        %q2: tensor<2x4x128x32xbf16>,
                        %k1: tensor<2x4x128x32xbf16>,
                        %k2: tensor<2x4x128x32xbf16>,
                        %v: tensor<2x4x128x64xbf16>, %lambda: tensor<f32>)
    -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q1, %q2 : tensor<2x4x128x32xbf16>, tensor<2x4x128x32xbf16>)
                      k(%k1, %k2 : tensor<2x4x128x32xbf16>, tensor<2x4x128x32xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
                      captures(%lambda : tensor<f32>)
         scale [0.17677669, 0.17677669] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index, %l: tensor<f32>):
           %keep = arith.cmpi sge, %i, %j : index
           attn.yield %keep : i1
         }
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index,
              %l: tensor<f32>):
           %lam = tensor.extract %l[] : tensor<f32>
           %scaled = arith.mulf %lam, %o2 : f32
           %r = arith.subf %o1, %scaled : f32
           attn.yield %r : f32
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
