// RUN: flashlight-opt %s --split-input-file --attn-online-softmax --attn-tile="block-m=64 block-n=64" --canonicalize --cse --attn-to-gpu="tensor-cores=true wgmma=true branch-warpgroups=true" --canonicalize --cse | FileCheck %s

// Two logit branches on 64-row tiles: warpgroup g runs branch g's online
// softmax over all 64 rows (one branch's registers, the pipelined loop), and
// warpgroup 1 hands its normalized output to warpgroup 0, which applies the
// epilogue and stores.
// CHECK-LABEL: gpu.func @differential
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// The exchange room: one [64, 64] f32 output.
// CHECK: memref.view {{.*}} to memref<4096xf32, #gpu.address_space<workgroup>>
// The warpgroup (its branch) and the warp within it.
// CHECK: %[[WARP:.+]] = arith.divui %{{.*}}, %c32
// CHECK: %[[GROUP:.+]] = arith.divui %[[WARP]], %c4
// Each warpgroup's S = Q K^T reads its own branch's Q and K tiles.
// CHECK: %[[SECOND:.+]] = arith.cmpi eq, %[[GROUP]], %c1
// CHECK: arith.select %[[SECOND]]
// CHECK: nvvm.wgmma.mma_async
// Finalize: warpgroup 1 stores its output, a barrier, warpgroup 0 loads it.
// CHECK: memref.store %{{.*}}, %[[EX:.+]][%{{.*}}] : memref<4096xf32
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK: memref.load %[[EX]]
func.func @differential(%q1: tensor<1x2x256x64xbf16>, %q2: tensor<1x2x256x64xbf16>,
                        %k1: tensor<1x2x256x64xbf16>, %k2: tensor<1x2x256x64xbf16>,
                        %v: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q1, %q2 : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
                      k(%k1, %k2 : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
                      v(%v : tensor<1x2x256x64xbf16>)
         scale [0.125, 0.125] normalizer softmax
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
           %half = arith.constant 0.5 : f32
           %scaled = arith.mulf %half, %o2 : f32
           %r = arith.subf %o1, %scaled : f32
           attn.yield %r : f32
         } -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}

// -----

// A score region whose logit 0 reads both branches' scores: the branches
// cannot run apart, so one warpgroup holds both.
// CHECK-LABEL: gpu.func @mixed
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-NOT: xf32, #gpu.address_space<workgroup>>
func.func @mixed(%q1: tensor<1x2x256x64xbf16>, %q2: tensor<1x2x256x64xbf16>,
                 %k1: tensor<1x2x256x64xbf16>, %k2: tensor<1x2x256x64xbf16>,
                 %v: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q1, %q2 : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
                      k(%k1, %k2 : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
                      v(%v : tensor<1x2x256x64xbf16>)
         scale [0.125, 0.125] normalizer softmax
         score {
         ^bb0(%s1: f32, %s2: f32, %b: index, %h: index, %i: index, %j: index):
           %x = arith.addf %s1, %s2 : f32
           attn.yield %x, %s2 : f32, f32
         }
         epilogue {
         ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index):
           %r = arith.subf %o1, %o2 : f32
           attn.yield %r : f32
         } -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}
