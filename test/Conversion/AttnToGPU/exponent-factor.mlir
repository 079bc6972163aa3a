// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=MMA

// The softmax step after a score region (a pair bias): the row max is
// taken over the region's logits, before log2 e, which then folds into each
// weight's exponent (one fma; before, an FMUL per logit ahead of the max).
// CHECK-LABEL: gpu.func @pair_bias
// CHECK-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// The row max (over the quad), then scaled by log2 e.
// CHECK: gpu.shuffle xor
// CHECK: %[[SHUFFLED:.*]], %{{.*}} = gpu.shuffle xor
// CHECK-NEXT: %[[RAW:.*]] = arith.maximumf %{{.*}}, %[[SHUFFLED]] : f32
// CHECK-NEXT: %[[SCALED:.*]] = arith.mulf %[[RAW]], %[[LOG2E]]
// CHECK-NEXT: arith.maximumf %{{.*}}, %[[SCALED]]
// (The thread's other row likewise.) A weight: exp2(logit * log2 e -
// max), one fma.
// CHECK: gpu.shuffle xor
// CHECK: gpu.shuffle xor
// CHECK: arith.mulf %{{.*}}, %[[LOG2E]]
// CHECK: %[[X:.*]] = arith.mulf %{{.*}}, %[[LOG2E]] fastmath<contract>
// CHECK-NEXT: %[[E:.*]] = arith.subf %[[X]], %{{.*}} fastmath<contract>
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[E]])

// mma.sync: the same.
// MMA-LABEL: gpu.func @pair_bias
// MMA-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// MMA-COUNT-2: gpu.shuffle xor
// MMA: arith.mulf %{{.*}}, %[[LOG2E]]
// MMA-COUNT-2: gpu.shuffle xor
// MMA: arith.mulf %{{.*}}, %[[LOG2E]]
// MMA: %[[X:.*]] = arith.mulf %{{.*}}, %[[LOG2E]] fastmath<contract>
// MMA-NEXT: %[[E:.*]] = arith.subf %[[X]], %{{.*}} fastmath<contract>
// MMA-NEXT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[E]])
func.func @pair_bias(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>,
                     %v: tensor<1x2x256x128xbf16>, %bias: tensor<1x2x256x256xbf16>)
    -> tensor<1x2x256x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x128xbf16>) k(%k : tensor<1x2x256x128xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) captures(%bias : tensor<1x2x256x256xbf16>)
      scale [0.088] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
           %t: tensor<1x2x256x256xbf16>):
        %x = tensor.extract %t[%b, %h, %i, %j] : tensor<1x2x256x256xbf16>
        %xf = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %xf : f32
        attn.yield %r : f32
      } -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}
