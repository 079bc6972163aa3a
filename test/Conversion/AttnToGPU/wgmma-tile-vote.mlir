// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=64 block-n=64 block-mask=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// A data-dependent mask (document ids) on 64-row tiles: one warpgroup, 3
// blocks per SM are too many next to the mask's registers, so 2. Each KV
// tile's mask is voted on once K_t and V_t have landed; an empty tile
// skips both products but still prefetches tile t+1 into the other buffers,
// with no wait (the next step waits for it).
// CHECK-LABEL: gpu.func @document
// CHECK-SAME: generator = wgmma
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: nvvm.minctasm = 2
// CHECK: scf.for
// CHECK: nvgpu.device_async_wait {{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: nvvm.fence.proxy
// CHECK: nvvm.barrier #nvvm.reduction<or>
// CHECK: scf.if
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: } else {
// CHECK-COUNT-8: nvgpu.device_async_copy
// CHECK-NOT: nvgpu.device_async_wait
// CHECK: scf.yield
func.func @document(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                    %v: tensor<2x4x128x64xbf16>,
                    %doc: tensor<2x128xi32>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>) k(%k : tensor<2x4x128x64xbf16>)
      v(%v : tensor<2x4x128x64xbf16>) captures(%doc : tensor<2x128xi32>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<2x128xi32>):
        %di = tensor.extract %ids[%b, %i] : tensor<2x128xi32>
        %dj = tensor.extract %ids[%b, %j] : tensor<2x128xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
