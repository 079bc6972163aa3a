// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 persistent=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// A one-row staged read (a key bias at (b, 0, 0, kv_idx), as a gradient's
// row statistics at (b, h, kv_idx)) keeps the TMA producer: its tile comes
// as one unswizzled box of block-n elements per K tile (tensor map box
// [128, 1], swizzle 0), with K's bytes on K's full barrier: 128 x 64 bf16
// (16384) + 128 f32 (512) = 16896. The box lands in the current buffer's
// row of the staged tile (512 bytes a buffer), which starts at a 128-byte
// boundary.
// CHECK-LABEL: gpu.func @key_bias(
// CHECK-SAME: tma = true
// CHECK-SAME: flashlight.tensor_maps = [{box = [64, 128], param = 1 : i64}, {box = [128, 1], param = 3 : i64, swizzle = 0 : i64}, {box = [64, 128], param = 2 : i64}]
// CHECK: %[[STAGED:.+]] = memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2x128xf32, #gpu.address_space<workgroup>>
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16896_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg5, %{{.*}}, box[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: %[[BASE:.+]] = memref.extract_aligned_pointer_as_index %[[STAGED]]
// CHECK: %[[ROW:.+]] = arith.muli %{{.*}}, %c512 : index
// CHECK: arith.addi %[[BASE]], %[[ROW]] : index
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg6, %{{.*}}, box[%{{.*}}, %c0_i32, %c0_i32, %{{.*}}]
// CHECK-NOT: nvvm.cp.async.shared.global
func.func @key_bias(%q: tensor<2x2x256x64xbf16>, %k: tensor<2x2x256x64xbf16>,
                    %v: tensor<2x2x256x64xbf16>, %bias: tensor<2x1x1x256xf32>)
    -> tensor<2x2x256x64xbf16> {
  %o = attn.attention q(%q : tensor<2x2x256x64xbf16>) k(%k : tensor<2x2x256x64xbf16>)
      v(%v : tensor<2x2x256x64xbf16>) captures(%bias : tensor<2x1x1x256xf32>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2x1x1x256xf32>):
        %c0 = arith.constant 0 : index
        %x = tensor.extract %t[%b, %c0, %c0, %j] : tensor<2x1x1x256xf32>
        %r = arith.addf %s, %x : f32
        attn.yield %r : f32
      } -> tensor<2x2x256x64xbf16>
  return %o : tensor<2x2x256x64xbf16>
}
