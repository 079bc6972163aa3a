// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// A sliding window (a mask that is exactly a two-sided diagonal band:
// 0 <= i - j <= 255) is tested per element in 32 bits: i - j is this
// thread's per-tile base plus a constant, and the key's column 2 * quad
// plus a constant, so each test is a compare with an immediate. 500 keys:
// the last tile is partial, so each column is tested against its keys too.
// CHECK-LABEL: gpu.func @window
// The base: the thread's first row minus its first key column, and the
// columns left in the tile past 2 * quad.
// CHECK: %[[BASE:.+]] = arith.index_cast %{{.*}} : index to i32
// CHECK: %[[LEFT:.+]] = arith.index_cast %{{.*}} : index to i32
// Element 0 (column 0, i - j = base): in the tile, and in the band at both
// ends; element 1 (column 1: base - 1).
// CHECK: %[[IN0:.+]] = arith.cmpi sgt, %[[LEFT]], %c0_i32 : i32
// CHECK-NEXT: %[[LO0:.+]] = arith.cmpi sge, %[[BASE]], %c0_i32 : i32
// CHECK-NEXT: %[[K0:.+]] = arith.andi %[[IN0]], %[[LO0]] : i1
// CHECK-NEXT: %[[HI0:.+]] = arith.cmpi sle, %[[BASE]], %c255_i32 : i32
// CHECK-NEXT: %[[KEEP0:.+]] = arith.andi %[[K0]], %[[HI0]] : i1
// CHECK-NEXT: arith.select %[[KEEP0]]
// CHECK-NEXT: %[[IN1:.+]] = arith.cmpi sgt, %[[LEFT]], %c1_i32 : i32
// CHECK-NEXT: %[[D1:.+]] = arith.addi %[[BASE]], %c-1_i32 overflow<nsw> : i32
// CHECK-NEXT: arith.cmpi sge, %[[D1]], %c0_i32 : i32
// CHECK: nvvm.wgmma.mma_async
func.func @window(%q: tensor<2x4x500x64xf16>, %k: tensor<2x4x500x64xf16>,
                  %v: tensor<2x4x500x64xf16>) -> tensor<2x4x500x64xf16> {
  %o = attn.attention q(%q : tensor<2x4x500x64xf16>)
                      k(%k : tensor<2x4x500x64xf16>)
                      v(%v : tensor<2x4x500x64xf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %c256 = arith.constant 256 : index
           %ok = arith.cmpi sge, %i, %j : index
           %lo = arith.subi %i, %j : index
           %near = arith.cmpi slt, %lo, %c256 : index
           %keep = arith.andi %ok, %near : i1
           attn.yield %keep : i1
         } -> tensor<2x4x500x64xf16>
  return %o : tensor<2x4x500x64xf16>
}

// -----

// A causal mask is the one-sided band (i - j >= 0): the same 32-bit tests,
// with no upper bound. Whole tiles (64 divides 128) test no column.
// CHECK-LABEL: gpu.func @causal
// CHECK: %[[BASE:.+]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NOT: arith.cmpi sgt
// CHECK: %[[LO0:.+]] = arith.cmpi sge, %[[BASE]], %c0_i32 : i32
// CHECK-NEXT: arith.select %[[LO0]]
// CHECK-NOT: arith.cmpi sle
// CHECK: gpu.return
func.func @causal(%q: tensor<2x4x128x64xf16>, %k: tensor<2x4x128x64xf16>,
                  %v: tensor<2x4x128x64xf16>) -> tensor<2x4x128x64xf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xf16>)
                      k(%k : tensor<2x4x128x64xf16>)
                      v(%v : tensor<2x4x128x64xf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %j, %i : index
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xf16>
  return %o : tensor<2x4x128x64xf16>
}


// -----

// Reverse causal (i - j <= 0), the mask of a causal program's transposed
// gradient attention (dK and dV: rows are keys, columns queries): the same
// 32-bit tests with only the upper bound.
// CHECK-LABEL: gpu.func @reverse_causal
// CHECK: %[[BASE:.+]] = arith.index_cast %{{.*}} : index to i32
// CHECK-NOT: arith.cmpi sge
// CHECK: %[[HI0:.+]] = arith.cmpi sle, %[[BASE]], %c0_i32 : i32
// CHECK-NEXT: arith.select %[[HI0]]
// CHECK: gpu.return
func.func @reverse_causal(%q: tensor<2x4x128x64xf16>, %k: tensor<2x4x128x64xf16>,
                          %v: tensor<2x4x128x64xf16>) -> tensor<2x4x128x64xf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xf16>)
                      k(%k : tensor<2x4x128x64xf16>)
                      v(%v : tensor<2x4x128x64xf16>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index):
           %keep = arith.cmpi sle, %i, %j : index
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xf16>
  return %o : tensor<2x4x128x64xf16>
}
