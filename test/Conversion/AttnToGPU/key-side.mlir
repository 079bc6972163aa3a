// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64 overlap-softmax=false decouple-warpgroups=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80

// The key-side product on wgmma: the kernel takes the key side as its last
// output (the launcher zeroes it); each consumer warpgroup's weights go to
// its own [64, block-n] swizzled tile (64 * 64 * 2 bytes each, after Q's
// tile: 1024 + 2 * 2 * 64 * 128 (K, V) + 128 * 128 (Q) + 2 * 8192 bytes),
// the writes fenced for the async proxy and the warpgroup synchronized,
// then one MN-major m64n64 product (A and B transposed) per 64 keys and
// 64 columns, K = the warpgroup's 64 rows in four k16 steps, and its f32
// result added four columns at a time.
// CHECK-LABEL: gpu.func @key_side
// CHECK-SAME: %{{.*}}: memref<1x2x256x64xf32, strided<[?, ?, ?, 1]>>)
// CHECK-SAME: shared_memory = 66560
// CHECK: vector.store %{{.*}} : memref<128x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <{{zero|one}}>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK: gpu.shuffle xor
// CHECK: red.global.add.v4.f32 [$0], {$1, $2, $3, $4};
// On sm_80 (mma.sync) the plan takes the reference kernel and says why.
// SM80: remark: tensor-core path not taken: the key-side product (key_side) is on wgmma (sm_90a) only; using the reference kernel
func.func @key_side(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>) -> (tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>) {
  %o, %ks = attn.attention q(%q : tensor<1x2x256x64xbf16>) k(%k : tensor<1x2x256x64xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) key_side 0 scale [0.125] normalizer none
      -> tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>
  return %o, %ks : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>
}
