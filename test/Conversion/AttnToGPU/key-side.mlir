// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64 overlap-softmax=false decouple-warpgroups=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=128" 2>&1 | FileCheck %s --check-prefix=TURNS
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=64 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80

// The key-side product on wgmma: the kernel takes the key side as its last
// output (the launcher zeroes it); each consumer warpgroup's weights go to
// its own [64, block-n] swizzled tile (64 * 64 * 2 bytes each, after Q's
// tile: 1024 + 2 * 2 * 64 * 128 (K, V) + 128 * 128 (Q) + 2 * 8192 bytes),
// the writes fenced for the async proxy. Without ping-pong the warpgroups
// meet and split the 64-key by 64-column chunks (block-n 64 and D = 64
// make one, warpgroup 0's), each an MN-major m64n64 product (A and B transposed) over all 128 rows, eight
// k16 steps through both warpgroups' weights, its f32 result added four
// columns at a time; they meet again before the next step's weights.
// CHECK-LABEL: gpu.func @key_side
// CHECK-SAME: %{{.*}}: memref<1x2x256x64xf32, strided<[?, ?, ?, 1]>>)
// CHECK-SAME: shared_memory = 66560
// CHECK: vector.store %{{.*}} : memref<128x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <{{zero|one}}>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK: gpu.shuffle xor
// CHECK: red.global.add.v4.f32 [$0], {$1, $2, $3, $4};
// CHECK: gpu.barrier
// A producer warpgroup's plan takes no turns (ping-pong) with a key side:
// the warpgroups meet every step.
// TURNS: producer = true, loop = mbarrier, ping_pong = false
// One consumer warpgroup multiplies its own 64 rows' weights (four k16
// steps per chunk, two chunks of 64 keys), after a barrier of its 128
// threads.
// ONE-LABEL: gpu.func @key_side
// ONE: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// ONE-COUNT-4: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// ONE: red.global.add.v4.f32
// ONE-COUNT-4: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// ONE: red.global.add.v4.f32
// On sm_80 (mma.sync) the plan takes the reference kernel and says why.
// SM80: remark: tensor-core path not taken: the key-side product (key_side) is on wgmma (sm_90a) only; using the reference kernel
func.func @key_side(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>) -> (tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>) {
  %o, %ks = attn.attention q(%q : tensor<1x2x256x64xbf16>) k(%k : tensor<1x2x256x64xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) key_side 0 scale [0.125] normalizer none
      -> tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>
  return %o, %ks : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>
}
