// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64 block-mask=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// A data-dependent mask (document ids): no bound says which KV tiles are
// empty, so each tile's mask is evaluated first and the block votes.
// CHECK-LABEL: gpu.func @document_mask
// The vote needs registers for the mask next to the state: 2 blocks per SM.
// CHECK-SAME: nvvm.minctasm = 2
// CHECK: scf.for
// every thread reads the ids of its rows and keys for the whole tile
// CHECK: memref.load %arg3
// once K has landed, the barrier ORs "some element kept" over the block
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: %[[VOTE:.*]] = nvvm.barrier #nvvm.reduction<or> %{{.*}} -> i32
// CHECK: %[[ANY:.*]] = arith.cmpi ne
// a kept tile computes as usual
// CHECK: scf.if %[[ANY]] -> (f32
// CHECK: nvvm.mma.sync
// an empty tile skips both products and the softmax, but still prefetches
// the next K and lets V land, so the copy groups stay in step
// CHECK: } else {
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.barrier
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: nvgpu.device_async_wait %{{.*}} {numGroups = 1 : i32}
// CHECK: scf.yield
func.func @document_mask(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                         %v: tensor<2x4x128x64xbf16>,
                         %doc: tensor<2x128xi32>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>) k(%k : tensor<2x4x128x64xbf16>)
      v(%v : tensor<2x4x128x64xbf16>) captures(%doc : tensor<2x128xi32>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<2x128xi32>):
        %di = tensor.extract %ids[%b, %i] : tensor<2x128xi32>
        %dj = tensor.extract %ids[%b, %j] : tensor<2x128xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        %causal = arith.cmpi sge, %i, %j : index
        %keep = arith.andi %same, %causal : i1
        attn.yield %keep : i1
      } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}

// -----

// A banded mask (causal): the tile bounds already skip empty tiles; no vote.
// CHECK-LABEL: gpu.func @causal
// CHECK-NOT: nvvm.barrier
// CHECK: gpu.return
func.func @causal(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                  %v: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}
