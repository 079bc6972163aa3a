// RUN: flashlight-opt %s --attn-online-softmax --attn-tile="block-m=128 block-n=128" --canonicalize --cse --attn-to-gpu="tensor-cores=true wgmma=true" --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-online-softmax --attn-tile="block-m=64 block-n=64" --canonicalize --cse --attn-to-gpu="tensor-cores=true" --canonicalize --cse | FileCheck %s --check-prefix=MMA

// The softmax step after a score region (a pair bias): the row max is
// taken over the region's logits and log2 e folds into the exponent; the
// running max moves only when a tile raises it by more than 8 (log2
// units), and O's rescale is skipped when none of the thread's rows moved.
// CHECK-LABEL: gpu.func @pair_bias
// CHECK-DAG: %[[TAU:.*]] = arith.constant 8.000000e+00 : f32
// CHECK-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// The row max (over the quad), then scaled by log2 e.
// CHECK: gpu.shuffle xor
// CHECK: %[[SHUFFLED:.*]], %{{.*}} = gpu.shuffle xor
// CHECK-NEXT: %[[RAW:.*]] = arith.maximumf %{{.*}}, %[[SHUFFLED]] : f32
// CHECK-NEXT: %[[SCALED:.*]] = arith.mulf %[[RAW]], %[[LOG2E]]
// CHECK-NEXT: %[[CAND:.*]] = arith.maximumf %[[OLD:.*]], %[[SCALED]]
// The max moves past the threshold only.
// CHECK-NEXT: %[[BOUND:.*]] = arith.addf %[[OLD]], %[[TAU]]
// CHECK-NEXT: %[[MOVES:.*]] = arith.cmpf ogt, %[[CAND]], %[[BOUND]]
// CHECK-NEXT: %[[NEW:.*]] = arith.select %[[MOVES]], %[[CAND]], %[[OLD]]
// CHECK-NEXT: %[[DIFF:.*]] = arith.subf %[[OLD]], %[[NEW]]
// CHECK-NEXT: %[[EXP:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[DIFF]])
// CHECK: %[[ALPHA:.*]] = arith.select %{{.*}}, %{{.*}}, %[[EXP]]
// (The thread's other row likewise.) A weight: exp2(logit * log2 e -
// max), one fma.
// CHECK: arith.cmpf ogt
// CHECK: %[[X:.*]] = arith.mulf %{{.*}}, %[[LOG2E]] fastmath<contract>
// CHECK-NEXT: %[[E:.*]] = arith.subf %[[X]], %{{.*}} fastmath<contract>
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[E]])
// O is rescaled only where a row's max moved.
// CHECK: %[[ROW0:.*]] = arith.cmpf une, %[[ALPHA]], %{{.*}}
// CHECK: %[[ANY:.*]] = arith.ori %[[ROW0]], %{{.*}}
// CHECK: scf.if %[[ANY]] -> (f32
// CHECK: arith.mulf %{{.*}}, %[[ALPHA]]
// CHECK: } else {
// CHECK: wgmma.mma_async

// mma.sync: the same threshold, and the rescale under the same guard
// before the P V products.
// MMA-LABEL: gpu.func @pair_bias
// MMA: arith.cmpf ogt
// MMA: arith.cmpf une
// MMA: scf.if %{{.*}} -> (f32
// MMA: } else {
// MMA: nvvm.mma.sync
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
