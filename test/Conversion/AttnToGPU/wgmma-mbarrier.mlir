// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=128 producer-warpgroup=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=128 decouple-warpgroups=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s --check-prefix=BARRIER

// Causal on two warpgroups (the plain loop, 128 x 128 tiles; without the
// producer warpgroup, producer-warpgroup.mlir): mbarriers say when a K/V
// buffer is full and empty, instead of a block-wide barrier per step, so
// that the warpgroups need not run the same step.
// CHECK-LABEL: gpu.func @causal
// Four mbarriers (buffer 0/1 full, 0/1 empty) after the tiles, set up by
// thread 0 before Q's copies, whose barrier shows them to every thread. Q's
// copies are not waited for there: the first step's wait covers them.
// CHECK: memref.view {{.*}} to memref<4xi64, #gpu.address_space<workgroup>>
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK: nvgpu.device_async_create_group
// CHECK-NOT: nvgpu.device_async_wait
// CHECK: gpu.barrier
// CHECK: scf.for
// The first tile's copies arrive on its full barrier as they land.
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true}
// A step waits for its buffer to be full (every thread's copies landed),
// fences for the async proxy and runs S: no block-wide barrier.
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// From the second tile on, the prefetch first waits until every thread is
// done with the buffer it refills; its copies arrive on that buffer's full
// barrier.
// CHECK-NOT: gpu.barrier
// CHECK: %[[USED:.*]] = arith.cmpi ugt, %{{.*}}, %c0 : index
// CHECK-NEXT: scf.if %[[USED]]
// CHECK-NEXT: arith.subi
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.mbarrier.arrive %{{.*}} {noinc = true}
// After P V, the thread releases the step's buffer.
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NOT: nvvm.wgmma
// CHECK: nvvm.mbarrier.arrive %
// BARRIER-LABEL: gpu.func @causal
// BARRIER-NOT: mbarrier
// BARRIER: gpu.return
func.func @causal(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                  %v: tensor<1x2x512x128xbf16>) -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) scale [0.088] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sle, %j, %i : index
        attn.yield %keep : i1
      } -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}

// -----

// Vanilla too: its steps are alike, but the warpgroups still need not
// issue their products at the same time.
// CHECK-LABEL: gpu.func @vanilla
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK: scf.for
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: gpu.barrier
// CHECK: nvgpu.device_async_wait {{.*}} {numGroups = 0 : i32}
func.func @vanilla(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                   %v: tensor<1x2x512x128xbf16>) -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) scale [0.088] normalizer softmax
      -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}

// -----

// The block-masked (sparse) loop too: it carries the number of kept tiles
// visited, whose parity picks the buffer and the barriers' phase.
// CHECK-LABEL: gpu.func @documents
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %c256_i32
// CHECK: scf.for {{.*}} iter_args({{.*}}%[[VISITS:.*]] = %c0) -> ({{.*}}index, index)
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NOT: gpu.barrier
// CHECK: arith.addi %[[VISITS]], %c1
// CHECK-NOT: gpu.barrier
// CHECK: nvgpu.device_async_wait {{.*}} {numGroups = 0 : i32}
func.func @documents(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                     %v: tensor<1x2x512x128xbf16>, %doc: tensor<1x512xi32>)
    -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) captures(%doc : tensor<1x512xi32>)
      scale [0.088] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<1x512xi32>):
        %di = tensor.extract %ids[%b, %i] : tensor<1x512xi32>
        %dj = tensor.extract %ids[%b, %j] : tensor<1x512xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      } -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}
