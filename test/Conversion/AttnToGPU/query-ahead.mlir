// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 persistent=false tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=ONETILE

// A persistent kernel with two consumer warpgroups at D = 64 (the plan's
// query_ahead): the producer copies each work tile's Q into buffer
// work % 2 once the consumers released that buffer's last Q (work tile
// work - 2), and arrives on Q's full mbarrier (8 + buffer) once Q landed,
// after the first K tile's copies were issued (or after the KV loop when it
// copies none). The consumers copy no Q: they wait on that mbarrier and
// release the buffer (10 + buffer) after their KV loop.
// CHECK-LABEL: gpu.func @vanilla
// CHECK-SAME: persistent = true, query_ahead = true
// Twelve mbarriers: K, V and Q full (the producer's 128 threads arrive) and
// empty (the consumers' 256).
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-NOT: nvvm.mbarrier.init
// CHECK: nvvm.setmaxregister decrease 56
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8 step %{{.*}} iter_args(%[[BASE:.+]] = %c0, %[[WORK:.+]] = %c0) -> (index, index) {
// CHECK: %[[QBUF:.+]] = arith.remui %[[WORK]], %c2 : index
// CHECK: %[[REUSE:.+]] = arith.cmpi uge, %[[WORK]], %c2 : index
// CHECK: scf.if %[[REUSE]] {
// CHECK: arith.subi %[[WORK]], %c2 : index
// CHECK: %{{.*}} = arith.addi %{{.*}}, %c80_i64 : i64
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: }
// CHECK: %[[Q:.+]] = nvgpu.device_async_create_group
// CHECK: scf.for %{{.*}} = %c0 to %c512 step %c128 iter_args(%[[T:.+]] = %c0) -> (index) {
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: %[[FIRST:.+]] = arith.cmpi eq, %[[T]], %c0 : index
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: nvgpu.device_async_wait %[[Q]] {numGroups = 1 : i32}
// CHECK-NEXT: nvvm.fence.proxy
// CHECK-NEXT: arith.muli %[[QBUF]], %c8 : index
// CHECK: arith.addi %{{.*}}, %c64_i64 : i64
// CHECK: nvvm.mbarrier.arrive
// CHECK: } else {
// CHECK: nvgpu.device_async_wait %[[Q]] {numGroups = 0 : i32}
// CHECK: arith.muli %[[QBUF]], %c8 : index
// CHECK: arith.addi %{{.*}}, %c64_i64 : i64
// CHECK: nvvm.mbarrier.arrive
// CHECK: scf.yield %{{.*}}, %{{.*}} : index, index
// CHECK: nvvm.exit
// CHECK: nvvm.setmaxregister increase 224
// CHECK: scf.for %{{.*}} = %{{.*}} to %c8 step %{{.*}} iter_args(%{{.*}} = %c0, %[[CWORK:.+]] = %c0) -> (index, index) {
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: %[[CBUF:.+]] = arith.remui %[[CWORK]], %c2 : index
// CHECK: %[[COFF:.+]] = arith.muli %[[CBUF]], %c8 : index
// CHECK: %[[CI:.+]] = arith.index_castui %[[COFF]] : index to i64
// CHECK: arith.addi %[[CI]], %c64_i64 : i64
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: arith.addi %[[CI]], %c80_i64 : i64
// CHECK-NEXT: arith.addi
// CHECK-NEXT: llvm.inttoptr
// CHECK-NEXT: nvvm.mbarrier.arrive
// CHECK: gpu.return
// Without a persistent grid: one Q buffer, copied by the consumers.
// ONETILE-LABEL: gpu.func @vanilla
// ONETILE-NOT: query_ahead
// ONETILE-NOT: gpu.grid_dim
// ONETILE: nvgpu.device_async_copy %arg0
// ONETILE: gpu.return
func.func @vanilla(%q: tensor<1x2x512x64xbf16>, %k: tensor<1x2x512x64xbf16>,
                   %v: tensor<1x2x512x64xbf16>) -> tensor<1x2x512x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x64xbf16>) k(%k : tensor<1x2x512x64xbf16>)
      v(%v : tensor<1x2x512x64xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x512x64xbf16>
  return %o : tensor<1x2x512x64xbf16>
}
