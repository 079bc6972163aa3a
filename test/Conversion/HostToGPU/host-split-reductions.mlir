// RUN: flashlight-opt %s --split-input-file --flashlight-host-split-reductions="min-points=128 min-iterations=256" | FileCheck %s

// A table's gradient: 4 x 8 results, each a sum over (b, i, j) of 2 * 16 *
// 16 terms selected by the bucket. The partial reduction keeps the body and
// runs b and i in parallel (4 * 8 * 2 = 64 results at b alone are under
// min-points: b, then i) with j its loop, into a zero-filled
// [b, h, i, t] partial; the final one sums it over b and i into the
// original initial value.
// CHECK-LABEL: func.func @table_gradient
// CHECK: %[[E:.+]] = tensor.empty() : tensor<2x4x16x8xf32>
// CHECK: %[[Z:.+]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<2x4x16x8xf32>)
// CHECK: %[[P:.+]] = linalg.generic {indexing_maps = [#{{.*}}, #[[PMAP:.+]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]} ins(%arg0 : tensor<2x4x16x16xf32>) outs(%[[Z]] : tensor<2x4x16x8xf32>)
// CHECK: arith.cmpi eq
// CHECK: arith.select
// CHECK: arith.addf
// CHECK: %[[F:.+]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["reduction", "parallel", "reduction", "parallel"]} ins(%[[P]] : tensor<2x4x16x8xf32>) outs(%arg1 : tensor<4x8xf32>)
// CHECK: arith.addf
// CHECK: return %[[F]]
#in = affine_map<(b, h, i, j, t) -> (b, h, i, j)>
#out = affine_map<(b, h, i, j, t) -> (h, t)>
func.func @table_gradient(%ds: tensor<2x4x16x16xf32>, %init: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel", "reduction", "reduction", "parallel"]} ins(%ds : tensor<2x4x16x16xf32>) outs(%init : tensor<4x8xf32>) {
  ^bb0(%d: f32, %acc: f32):
    %i = linalg.index 2 : index
    %j = linalg.index 3 : index
    %t = linalg.index 4 : index
    %rel = arith.subi %j, %i : index
    %c8 = arith.constant 8 : index
    %bucket = arith.remui %rel, %c8 : index
    %hit = arith.cmpi eq, %bucket, %t : index
    %term = arith.select %hit, %d, %zero : f32
    %sum = arith.addf %acc, %term : f32
    linalg.yield %sum : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A max over one long loop is split too, with -inf as the partials' initial
// value and a max as the final combine.
// CHECK-LABEL: func.func @row_max
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
#x = affine_map<(r, a, c) -> (r, a, c)>
#row = affine_map<(r, a, c) -> (r)>
func.func @row_max(%x: tensor<2x64x64xf32>, %init: tensor<2xf32>) -> tensor<2xf32> {
  %m = linalg.generic {indexing_maps = [#x, #row], iterator_types = ["parallel", "reduction", "reduction"]} ins(%x : tensor<2x64x64xf32>) outs(%init : tensor<2xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.maximumf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  return %m : tensor<2xf32>
}

// -----

// Not split: enough results already, a single reduction loop (a warp per
// row takes it), or an accumulator the term reads (not order-free).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: linalg.generic
// CHECK-NOT: linalg.generic
#a = affine_map<(r, c) -> (r, c)>
#r1 = affine_map<(r, c) -> (r)>
#b3 = affine_map<(r, a, c) -> (r, a, c)>
#r3 = affine_map<(r, a, c) -> (r)>
func.func @kept(%x: tensor<128x4096xf32>, %y: tensor<2x64x64xf32>, %i1: tensor<128xf32>, %i2: tensor<2xf32>) -> (tensor<128xf32>, tensor<128xf32>, tensor<2xf32>) {
  %s = linalg.generic {indexing_maps = [#a, #r1], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<128x4096xf32>) outs(%i1 : tensor<128xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<128xf32>
  %t = linalg.generic {indexing_maps = [#a, #r1], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<128x4096xf32>) outs(%i1 : tensor<128xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %r = arith.addf %acc, %v : f32
    linalg.yield %r : f32
  } -> tensor<128xf32>
  %u = linalg.generic {indexing_maps = [#b3, #r3], iterator_types = ["parallel", "reduction", "reduction"]} ins(%y : tensor<2x64x64xf32>) outs(%i2 : tensor<2xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %p = arith.mulf %acc, %v : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<2xf32>
  return %s, %t, %u : tensor<128xf32>, tensor<128xf32>, tensor<2xf32>
}
