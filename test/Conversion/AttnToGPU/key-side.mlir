// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64 overlap-softmax=false decouple-warpgroups=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=128" 2>&1 | FileCheck %s --check-prefix=TURNS
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=64 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=64 block-n=128 bulk-key-side=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s --check-prefix=ATOMIC
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
// CHECK-NOT: tensor_maps
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
// the warpgroups meet every step. Its two 64-key chunks split evenly over
// the two consumer warpgroups: bulk adds.
// TURNS: producer = true, loop = mbarrier, ping_pong = false
// TURNS-SAME: bulk_key_side = true
// The first form's one chunk does not split over two warpgroups: atomic
// adds (above), no tensor map.
// One consumer warpgroup multiplies its own 64 rows' weights (four k16
// steps per chunk, two chunks of 64 keys), after a barrier of its 128
// threads. Bulk adds: the key side gets a tensor map of 64-row by
// 32-column f32 boxes; the buffer is free once the last step's reductions
// read it; both chunks' products are issued, then waited for once; each
// is stored in f32 (16-byte stores), fenced for the async proxy, and its
// two boxes are added by one thread's bulk reductions, the second chunk
// after the first's were read. The kernel ends after they completed.
// ONE-LABEL: gpu.func @key_side
// ONE-SAME: flashlight.tensor_maps = [{box = [32, 64], param = 4 : i64}]
// ONE: nvvm.cp.async.bulk.wait_group 0 {read}
// ONE: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// ONE-COUNT-4: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// ONE-NOT: nvvm.wgmma.commit.group
// ONE-COUNT-4: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// ONE-NEXT: nvvm.wgmma.commit.group
// ONE: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// ONE-COUNT-8: llvm.store %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<3>
// ONE-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// ONE-NEXT: nvvm.barrier
// ONE: nvvm.cp.async.bulk.tensor.reduce %arg5, %{{.*}}, box[%c0_i32, {{.*}}] {redKind = #nvvm.tma_redux_kind<add>}
// ONE: nvvm.cp.async.bulk.tensor.reduce %arg5, %{{.*}}, box[%c32_i32, {{.*}}] {redKind = #nvvm.tma_redux_kind<add>}
// ONE-NEXT: nvvm.cp.async.bulk.commit.group
// ONE: nvvm.cp.async.bulk.wait_group 0 {read}
// ONE-COUNT-8: llvm.store %{{.*}} : vector<4xf32>, !llvm.ptr<3>
// ONE: nvvm.cp.async.bulk.tensor.reduce
// ONE: nvvm.cp.async.bulk.commit.group
// ONE: nvvm.cp.async.bulk.wait_group 0{{$}}
// ONE-NOT: red.global
// With bulk-key-side=false, four columns per atomic add after each chunk.
// ATOMIC-LABEL: gpu.func @key_side
// ATOMIC-NOT: tensor_maps
// ATOMIC: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// ATOMIC-COUNT-4: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// ATOMIC: red.global.add.v4.f32
// ATOMIC-COUNT-4: nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// ATOMIC: red.global.add.v4.f32
// ATOMIC-NOT: cp.async.bulk
// On sm_80 (mma.sync) the plan takes the reference kernel and says why.
// SM80: remark: tensor-core path not taken: the key-side product (key_side) is on wgmma (sm_90a) only; using the reference kernel
func.func @key_side(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>) -> (tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>) {
  %o, %ks = attn.attention q(%q : tensor<1x2x256x64xbf16>) k(%k : tensor<1x2x256x64xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) key_side 0 scale [0.125] normalizer none
      -> tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>
  return %o, %ks : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xf32>
}
