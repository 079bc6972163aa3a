// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu | FileCheck %s

// ALiBi converts (j - i) to f32 per element. With static shapes the block
// ids are bounded by the grid and the indices by the tensors, so integer
// range analysis proves j - i fits in 32 bits: the conversion is from i32
// (a 64-bit one runs at a quarter of the rate on the GPU).
// CHECK-LABEL: gpu.func @alibi
// slope[h] depends on the head only: loaded once, before the KV loop, not
// per element and step
// CHECK: memref.load %arg3[%block_id_y]
// the grid's size bounds the block ids
// CHECK: gpu.block_id  x upper_bound 2
// CHECK: scf.for
// CHECK-NOT: memref.load %arg3
// CHECK-NOT: arith.sitofp %{{.*}} : i64 to f32
// CHECK: %[[REL:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NEXT: %[[RELF:.*]] = arith.sitofp %[[REL]] : i32 to f32
// The region's float ops may contract (as nvcc's default -fmad=true): the
// bias and the score become one FMA (and approximate: afn, decision 027).
// CHECK-NEXT: %[[BIAS:.*]] = arith.mulf %{{.*}}, %[[RELF]] fastmath<reassoc,contract,afn> : f32
// CHECK-NEXT: arith.addf %{{.*}}, %[[BIAS]] fastmath<reassoc,contract,afn> : f32
// CHECK-NOT: arith.sitofp %{{.*}} : i64 to f32
// CHECK-NOT: memref.load %arg3
// CHECK: gpu.return
func.func @alibi(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                 %v: tensor<1x2x128x64xbf16>, %slopes: tensor<2xf32>)
    -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) captures(%slopes : tensor<2xf32>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
        %slope = tensor.extract %m[%h] : tensor<2xf32>
        %rel = arith.subi %j, %i : index
        %rel_i = arith.index_cast %rel : index to i64
        %rel_f = arith.sitofp %rel_i : i64 to f32
        %bias = arith.mulf %slope, %rel_f : f32
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}

// -----

// Dynamic sequence lengths: nothing bounds the indices, the conversion
// stays 64-bit.
// CHECK-LABEL: gpu.func @alibi_dynamic
// CHECK: arith.sitofp %{{.*}} : i64 to f32
// CHECK-NOT: arith.sitofp %{{.*}} : i32 to f32
// CHECK: gpu.return
func.func @alibi_dynamic(%q: tensor<1x2x?x64xbf16>, %k: tensor<1x2x?x64xbf16>,
                         %v: tensor<1x2x?x64xbf16>, %slopes: tensor<2xf32>)
    -> tensor<1x2x?x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x?x64xbf16>) k(%k : tensor<1x2x?x64xbf16>)
      v(%v : tensor<1x2x?x64xbf16>) captures(%slopes : tensor<2xf32>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
        %slope = tensor.extract %m[%h] : tensor<2xf32>
        %rel = arith.subi %j, %i : index
        %rel_i = arith.index_cast %rel : index to i64
        %rel_f = arith.sitofp %rel_i : i64 to f32
        %bias = arith.mulf %slope, %rel_f : f32
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      } -> tensor<1x2x?x64xbf16>
  return %o : tensor<1x2x?x64xbf16>
}
