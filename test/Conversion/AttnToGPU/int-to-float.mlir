// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --cse | FileCheck %s

// ALiBi converts (j - i) to f32. With static shapes (positions below
// 2^24, which f32 holds exactly) it is f32(j) - f32(i), from i32: each
// column's and each row's conversion is shared (CSE) by the elements of
// that column or row, a subtraction per element (a conversion per element
// would take the quarter-rate pipe exp2 runs on).
// CHECK-LABEL: gpu.func @alibi
// slope[h] depends on the head only: loaded once, before the KV loop, not
// per element and step
// CHECK: memref.load %arg3[%block_id_y]
// the grid's size bounds the block ids
// CHECK: gpu.block_id  x upper_bound 2
// CHECK: scf.for
// CHECK-NOT: memref.load %arg3
// CHECK-NOT: arith.sitofp %{{.*}} : i64 to f32
// CHECK: %[[J:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NEXT: %[[JF:.*]] = arith.sitofp %[[J]] : i32 to f32
// CHECK-NEXT: %[[I:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NEXT: %[[IF:.*]] = arith.sitofp %[[I]] : i32 to f32
// CHECK-NEXT: %[[REL:.*]] = arith.subf %[[JF]], %[[IF]] fastmath<reassoc,contract,afn> : f32
// The region's float ops may contract (as nvcc's default -fmad=true): the
// bias and the score become one FMA (and approximate: afn, decision 027).
// CHECK-NEXT: %[[BIAS:.*]] = arith.mulf %{{.*}}, %[[REL]] fastmath<reassoc,contract,afn> : f32
// CHECK-NEXT: arith.addf %{{.*}}, %[[BIAS]] fastmath<reassoc,contract,afn> : f32
// The row's next element converts its column alone.
// CHECK: %[[J2:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NEXT: %[[J2F:.*]] = arith.sitofp %[[J2]] : i32 to f32
// CHECK-NEXT: arith.subf %[[J2F]], %[[IF]] fastmath<reassoc,contract,afn> : f32
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
// stays 64-bit, of the difference, per element.
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
