// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=192 block-n=128 tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=192 block-n=128 persistent=false tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=ONETILE

// A persistent kernel (no mask, three consumer warpgroups): thread 0 sets
// up the mbarriers once, the fork follows, and each side loops over the
// block's work tiles (block x, x + grid, ..; 2 heads x 3 query tiles),
// counting the KV tiles and work tiles it visited so far (the mbarriers'
// phases go on). Three consumer warpgroups copy their own Q (no
// query_ahead: it measured slower there, docs/decisions/025).
// CHECK-LABEL: gpu.func @vanilla
// CHECK-SAME: persistent = true
// CHECK: nvvm.mbarrier.init
// CHECK: gpu.barrier
// CHECK: %[[PRODUCER:.+]] = arith.cmpi uge, %thread_id_x, %c384
// CHECK: scf.if %[[PRODUCER]] {
// CHECK-NEXT: nvvm.setmaxregister decrease 32
// CHECK-NEXT: %[[X:.+]] = gpu.block_id x
// CHECK-NEXT: %[[GRID:.+]] = gpu.grid_dim x
// CHECK-NEXT: scf.for %{{.*}} = %[[X]] to %c6 step %[[GRID]] iter_args(%[[BASE:.+]] = %c0, %{{.*}} = %c0) -> (index, index) {
// The producer copies the work tile's K/V tiles: tile t of the block goes
// to buffer (base + t) % 2.
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c128 iter_args(%[[T:.+]] = %c0) -> (index) {
// CHECK: %[[G:.+]] = arith.addi %[[T]], %[[BASE]] : index
// CHECK: arith.remui %[[G]], %c2 : index
// CHECK: nvvm.exit
// The consumers: Q per work tile, after every consumer is done with the
// last tile's output (staged in Q's tile).
// CHECK: nvvm.setmaxregister increase 160
// CHECK: scf.for %{{.*}} = %{{.*}} to %c6 step %{{.*}} iter_args(%{{.*}} = %c0, %{{.*}} = %c0) -> (index, index) {
// CHECK: nvvm.barrier id = %c5_i32 number_of_threads = %c384_i32
// CHECK: nvgpu.device_async_copy %arg0
// The output goes out in pairs, not staged in Q's tile, which the next
// work tile's Q copies refill right after.
// CHECK: vector.store %{{.*}}, %arg3[{{.*}}] {alignment = 4 : i64} : {{.*}}, vector<2xbf16>
// CHECK: scf.yield
// CHECK: gpu.return
// ONETILE-LABEL: gpu.func @vanilla
// ONETILE-NOT: gpu.grid_dim
// ONETILE: gpu.return
func.func @vanilla(%q: tensor<1x2x512x64xbf16>, %k: tensor<1x2x512x64xbf16>,
                   %v: tensor<1x2x512x64xbf16>) -> tensor<1x2x512x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x64xbf16>) k(%k : tensor<1x2x512x64xbf16>)
      v(%v : tensor<1x2x512x64xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x512x64xbf16>
  return %o : tensor<1x2x512x64xbf16>
}
