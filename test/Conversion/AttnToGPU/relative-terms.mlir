// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// Score terms that read the query and key indices only through their
// difference get a table per warp and tile on the tensor-core generator.

// A T5-style bias: a bucket of |i - j| (log) indexes a table. Each warp has
// 64 + 16 - 1 relative positions per tile, in two buffers: 4 x 2 x 79 f32.
// CHECK-LABEL: gpu.func @bucketed_bias
// CHECK: %[[TABLE:.*]] = memref.view {{.*}} to memref<632xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for
// The lanes evaluate the bucket and gather once per position, then sync.
// CHECK: math.log1p
// CHECK: memref.load %arg3
// CHECK: memref.store {{.*}}, %[[TABLE]]
// CHECK: nvvm.bar.warp.sync
// Each element reads the table after S; no gather per element.
// CHECK-NOT: memref.load %arg3
// CHECK: nvvm.mma.sync
// CHECK-NOT: memref.load %arg3
// CHECK: memref.load %[[TABLE]]
// CHECK-NOT: memref.load %arg3
// CHECK: scf.yield
func.func @bucketed_bias(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                         %v: tensor<1x2x128x64xbf16>, %table: tensor<32x2xf32>)
    -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) captures(%table : tensor<32x2xf32>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<32x2xf32>):
        %c31 = arith.constant 31 : i32
        %qi = arith.index_cast %i : index to i32
        %kj = arith.index_cast %j : index to i32
        %d = arith.subi %qi, %kj : i32
        %a = math.absi %d : i32
        %f = arith.sitofp %a : i32 to f32
        %l = math.log1p %f : f32
        %n = arith.fptosi %l : f32 to i32
        %m = arith.minsi %n, %c31 : i32
        %x = arith.index_cast %m : i32 to index
        %bias = tensor.extract %t[%x, %h] : tensor<32x2xf32>
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}

// -----

// ALiBi's slope[h] * (j - i) costs less per element than a shared load: no
// table.
// CHECK-LABEL: gpu.func @alibi
// CHECK-NOT: nvvm.bar.warp.sync
// CHECK: gpu.return
func.func @alibi(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                 %v: tensor<1x2x128x64xbf16>, %slopes: tensor<2xf32>)
    -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) captures(%slopes : tensor<2xf32>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<2xf32>):
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i32
        %f = arith.sitofp %di : i32 to f32
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %bias = arith.mulf %slope, %f : f32
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}

// -----

// A bias read at (i, j) depends on more than j - i: gathered per element.
// CHECK-LABEL: gpu.func @pair_bias
// CHECK-NOT: nvvm.bar.warp.sync
// CHECK: memref.load %arg3
// CHECK: gpu.return
func.func @pair_bias(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                     %v: tensor<1x2x128x64xbf16>, %pair: tensor<128x128xf32>)
    -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) captures(%pair : tensor<128x128xf32>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %p: tensor<128x128xf32>):
        %c = math.exp %s : f32
        %x = tensor.extract %p[%i, %j] : tensor<128x128xf32>
        %y = math.log %x : f32
        %r = arith.addf %c, %y : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}
