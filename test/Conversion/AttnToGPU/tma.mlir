// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 persistent=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=ONETILE
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 tma=false" | FileCheck %s --check-prefix=OFF

// The plan's tma: one producer thread copies each tile with TMA. The kernel
// takes a tensor map per copied tensor after its other parameters (listed
// in flashlight.tensor_maps: the memref parameter and the box, one 64-column
// swizzle atom by the tile's rows). A full barrier expects one arrival (the
// issuing thread's arrive.expect_tx, with the tile's bytes) and completes
// when the bytes landed; the consumers' empty barriers are unchanged.
// CHECK-LABEL: gpu.func @vanilla(
// CHECK-SAME: %[[K:arg1]]: memref<2x4x512x64xbf16
// CHECK-SAME: %[[QMAP:arg4]]: !llvm.ptr, %[[KMAP:arg5]]: !llvm.ptr, %[[VMAP:arg6]]: !llvm.ptr)
// CHECK-SAME: persistent = true, query_ahead = true, tma = true
// CHECK-SAME: flashlight.tensor_maps = [{box = [64, 128], param = 0 : i64}, {box = [64, 128], param = 1 : i64}, {box = [64, 128], param = 2 : i64}]
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK: nvvm.setmaxregister decrease 56
// Thread 256 (the producer warpgroup's first) issues every copy.
// CHECK-NEXT: %[[ISSUER:.+]] = arith.cmpi eq, %thread_id_x, %c256 : index
// CHECK-NEXT: scf.if %[[ISSUER]] {
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %c0, %[[WORK:.+]] = %c0) -> (index, index) {
// Q: once the consumers released the buffer (Q empty, mbarrier 10 + b),
// 128 x 64 bf16 = 16384 bytes on Q full (8 + b).
// CHECK: arith.cmpi uge, %[[WORK]], %c2 : index
// CHECK: arith.addi %{{.*}}, %c80_i64 : i64
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: arith.addi %{{.*}}, %c64_i64 : i64
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[QFULL:.+]], %c16384_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[QMAP]], %[[QFULL]], box[%c0_i32, %{{.*}}, %{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// K_t after K_{t-2} was released (K empty, 2 + b), on K full (b); V_t
// after V_{t-2} (V empty, 6 + b), on V full (4 + b).
// CHECK: scf.for %[[K0:.+]] = %c0 to %c512 step %c128
// CHECK: arith.addi %{{.*}}, %c16_i64 : i64
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[KFULL:.+]], %c16384_i32
// CHECK: %[[ROW:.+]] = arith.index_castui %[[K0]] : index to i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[KMAP]], %[[KFULL]], box[%c0_i32, %[[ROW]], %[[H:.+]], %[[B:.+]]]
// CHECK: arith.addi %{{.*}}, %c48_i64 : i64
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: arith.addi %{{.*}}, %c32_i64 : i64
// CHECK: nvvm.mbarrier.arrive.expect_tx %[[VFULL:.+]], %c16384_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[VMAP]], %[[VFULL]], box[%c0_i32, %[[ROW]], %[[H]], %[[B]]]
// No cp.async, fence or arrive of copies landing on the producer's side.
// CHECK-NOT: nvgpu.device_async_copy
// CHECK-NOT: nvvm.cp.async.mbarrier.arrive
// CHECK: nvvm.exit
// CHECK: nvvm.setmaxregister increase 224
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: nvvm.wgmma.mma_async

// One work tile per block: the consumers copy Q (cp.async), the producer's
// issuing thread K and V.
// ONETILE-LABEL: gpu.func @vanilla(
// ONETILE-SAME: %arg4: !llvm.ptr, %arg5: !llvm.ptr)
// ONETILE-SAME: flashlight.tensor_maps = [{box = [64, 128], param = 1 : i64}, {box = [64, 128], param = 2 : i64}]
// ONETILE: nvgpu.device_async_copy %arg0
// ONETILE: nvvm.setmaxregister decrease 56
// ONETILE-NEXT: arith.cmpi eq, %thread_id_x, %c256 : index
// ONETILE: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg4,
// ONETILE: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg5,
// ONETILE: nvvm.exit

// Without TMA the plan keeps the cp.async producer.
// OFF: runtime_strides = true, persistent = true, query_ahead = true>
// OFF-NOT: tma = true

func.func @vanilla(%q: tensor<2x4x512x64xbf16>, %k: tensor<2x4x512x64xbf16>,
                   %v: tensor<2x4x512x64xbf16>) -> tensor<2x4x512x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x512x64xbf16>) k(%k : tensor<2x4x512x64xbf16>)
         v(%v : tensor<2x4x512x64xbf16>) scale [0.125] normalizer softmax
         -> tensor<2x4x512x64xbf16>
  return %o : tensor<2x4x512x64xbf16>
}
