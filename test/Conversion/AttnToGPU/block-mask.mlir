// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=WGMMA
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=PRODUCER
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=CPASYNC

// A mask that reads document ids (by batch, not by head): the attention
// kernel takes a block mask [B, 1, M tiles, N tiles] after its output and
// reads its tile's byte instead of voting.
// CHECK-LABEL: gpu.func @document(
// CHECK-SAME: %[[OUT:.*]]: memref<2x4x128x64xbf16, strided<[?, ?, ?, 1]>>, %[[MASK:.*]]: memref<?x?x?x?xi8>)
// CHECK-SAME: flashlight.block_mask = {batch = true, block = 128 : i64, heads = false, kernel = "document_block_mask"}
// CHECK: scf.for %[[K0:.*]] = {{.*}} iter_args
// the tile's byte: the batch's row, head 0, (query tile, KV tile)
// CHECK: %[[KT:.*]] = arith.divui %[[K0]], %c64
// CHECK: %[[TILE:.*]] = memref.load %[[MASK]][%block_id_z, %c0, %{{.*}}, %[[KT]]]
// CHECK-NOT: nvvm.barrier #nvvm.reduction
// CHECK: %[[EMPTY:.*]] = arith.cmpi eq, %[[TILE]], %c0_i8
// CHECK: %[[PARTIAL:.*]] = arith.cmpi eq, %[[TILE]], %c1_i8
// an empty tile skips the products and the softmax
// CHECK: scf.if %[[EMPTY]]
// CHECK-NOT: nvvm.mma.sync
// CHECK: } else {
// CHECK: nvvm.mma.sync
// the mask is evaluated on partial tiles only; a full tile keeps all
// CHECK: scf.if %[[PARTIAL]] -> (i1,
// CHECK: memref.load %arg3
// CHECK: } else {
// CHECK-NEXT: scf.yield %true,

// The pre-kernel: the inputs then the mask; block x is (query tile, KV
// tile), and a tile outside the KV loop's range is not written (nor read).
// CHECK-LABEL: gpu.func @document_block_mask(
// CHECK-SAME: %{{.*}}: memref<2x128xi32, strided<[?, 1]>>, %[[M:.*]]: memref<?x?x?x?xi8>) kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK: %[[TILES:.*]] = memref.dim %[[M]], %c3
// CHECK: %[[KV:.*]] = arith.remui %block_id_x, %[[TILES]]
// CHECK: %[[QT:.*]] = arith.divui %block_id_x, %[[TILES]]
// CHECK: %[[Q0:.*]] = arith.muli %[[QT]], %c64
// CHECK: %[[KB:.*]] = arith.muli %[[KV]], %c64
// CHECK: scf.if
// every thread keeps one column (key) and walks every other row of the
// 64 x 64 tile, evaluating the region and folding "any kept" and "all
// kept" (elements past the ends count for neither); the column's part is
// loop-invariant
// CHECK: %[[TID:.*]] = arith.addi
// CHECK: %[[COLUMN:.*]] = arith.remui %[[TID]], %c64
// CHECK: %[[ROW:.*]] = arith.divui %[[TID]], %c64
// CHECK: %[[K:.*]] = arith.addi %[[KB]], %[[COLUMN]]
// CHECK: scf.for %[[R:.*]] = %[[ROW]] to %c64 step %c2 iter_args(%{{.*}} = %false, %{{.*}} = %true)
// CHECK: arith.addi %[[Q0]], %[[R]]
// CHECK: arith.cmpi slt, %[[K]], %c128
// CHECK: memref.load %arg3
// CHECK: memref.load %arg3
// CHECK: scf.yield
// the barrier reduces both over the block; thread 0 writes 0, 1 or 2
// CHECK: nvvm.barrier #nvvm.reduction<or>
// CHECK: nvvm.barrier #nvvm.reduction<and>
// CHECK: %[[PF:.*]] = arith.select %{{.*}}, %c2_i8, %c1_i8
// CHECK: %[[BYTE:.*]] = arith.select %{{.*}}, %[[PF]], %c0_i8
// CHECK: scf.if
// CHECK: memref.store %[[BYTE]], %[[M]][%block_id_z, %c0, %{{.*}}, %{{.*}}]
// a tile outside the KV loop's range is written empty: every byte is set
// CHECK: } else {
// CHECK: memref.store %c0_i8, %[[M]][%block_id_z, %c0, %{{.*}}, %{{.*}}]

// wgmma visits only the tiles the block mask keeps. The first kept tile is
// found before the loop (a scan of the bytes of this query tile's row).
// WGMMA-LABEL: gpu.func @document(
// WGMMA-SAME: generator = wgmma
// The scans stop at the loop's end, clamped into the buffer's row.
// WGMMA: %[[TILES:.*]] = memref.dim %{{.*}}, %c3 : memref<?x?x?x?xi8>
// WGMMA-NEXT: %[[END:.*]] = arith.minsi %[[TILES]], %c2
// WGMMA: %[[FIRST:.*]] = scf.while
// WGMMA-NEXT: arith.cmpi slt, %{{.*}}, %[[END]]
// WGMMA: memref.load %{{.*}} : memref<?x?x?x?xi8>
// WGMMA: scf.condition
// the loop also carries the buffer of the next kept tile; an empty tile
// costs a byte load: no copies, wait or barrier
// WGMMA: scf.for {{.*}} -> ({{.*}}, index)
// WGMMA: %[[BYTE:.*]] = memref.load %{{.*}}[%block_id_z, %c0, %{{.*}}, %{{.*}}] : memref<?x?x?x?xi8>
// WGMMA: %[[EMPTY:.*]] = arith.cmpi eq, %[[BYTE]], %c0_i8
// WGMMA: scf.if %[[EMPTY]]
// WGMMA-NEXT: scf.yield %arg
// WGMMA-NEXT: } else {
// the first kept tile is staged in the loop's first buffer
// WGMMA: %[[AT:.*]] = arith.muli %[[FIRST]], %c64
// WGMMA: arith.cmpi eq, %{{.*}}, %[[AT]]
// WGMMA-NOT: nvvm.barrier #nvvm.reduction
// WGMMA: nvgpu.device_async_wait {{.*}} {numGroups = 0 : i32}
// WGMMA: nvvm.wgmma.mma_async
// right after S, the next kept tile goes into the other buffer; past the
// loop's end, its copies zero-fill without reading global memory
// WGMMA: %[[OTHER:.*]] = arith.subi %c1, %{{.*}} : index
// WGMMA: %[[NEXT:.*]] = scf.while
// WGMMA: %[[NEXTAT:.*]] = arith.muli %[[NEXT]], %c64
// WGMMA: nvgpu.device_async_copy %arg1
// the buffer flips with each kept tile
// WGMMA: scf.yield {{.*}}, %[[OTHER]] : {{.*}}, index
// WGMMA-LABEL: gpu.func @document_block_mask(
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

// -----

// A per-head key mask (read by head, not by batch): the block mask is
// [1, H, M tiles, N tiles].
// CHECK-LABEL: gpu.func @head_keys(
// CHECK-SAME: batch = false, block = 128 : i64, heads = true
// CHECK: memref.load %{{.*}}[%c0, %block_id_y, %{{.*}}, %{{.*}}] : memref<?x?x?x?xi8>
// CHECK-LABEL: gpu.func @head_keys_block_mask(
// CHECK: memref.store %{{.*}}, %{{.*}}[%c0, %block_id_y, %{{.*}}, %{{.*}}] : memref<?x?x?x?xi8>
// WGMMA-LABEL: gpu.func @head_keys(
func.func @head_keys(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                     %v: tensor<2x4x128x64xbf16>,
                     %keep: tensor<4x128xi1>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>) k(%k : tensor<2x4x128x64xbf16>)
      v(%v : tensor<2x4x128x64xbf16>) captures(%keep : tensor<4x128xi1>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %kk: tensor<4x128xi1>):
        %x = tensor.extract %kk[%h, %j] : tensor<4x128xi1>
        attn.yield %x : i1
      } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}

// -----

// With block-mask=false the block votes instead (mma-sync-tile-vote.mlir);
// masks a bound describes (causal) get neither.
// CHECK-LABEL: gpu.func @causal(
// CHECK-SAME: sparsity = none
// CHECK-NOT: flashlight.block_mask
// CHECK: gpu.return
// CHECK-NOT: gpu.func
// WGMMA-LABEL: gpu.func @causal(
func.func @causal(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                  %v: tensor<2x4x128x64xbf16>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>) k(%k : tensor<2x4x128x64xbf16>)
      v(%v : tensor<2x4x128x64xbf16>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}

// -----

// Documents, and at least 400 positions back: the KV loop's upper bound is
// negative for the first query tiles. The kept-tile scans then cover
// nothing (the end is at least the lower bound) rather than reading other
// rows' bytes.
// WGMMA-LABEL: gpu.func @lagged(
// WGMMA: %[[UB:.*]] = arith.minsi %{{.*}}, %c600 : index
// WGMMA: %[[AT_LEAST_LB:.*]] = arith.maxsi %[[UB]], %c0 : index
// WGMMA: %[[TILES:.*]] = arith.ceildivui %[[AT_LEAST_LB]], %c64 : index
// WGMMA: %[[END:.*]] = arith.minsi %[[TILES]], %{{.*}} : index
// WGMMA: scf.while
// WGMMA-NEXT: arith.cmpi slt, %{{.*}}, %[[END]]
// CHECK-LABEL: gpu.func @lagged(
func.func @lagged(%q: tensor<1x2x1000x64xbf16>, %k: tensor<1x2x600x64xbf16>,
                  %v: tensor<1x2x600x64xbf16>,
                  %doc: tensor<1000xi32>) -> tensor<1x2x1000x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x1000x64xbf16>) k(%k : tensor<1x2x600x64xbf16>)
      v(%v : tensor<1x2x600x64xbf16>) captures(%doc : tensor<1000xi32>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<1000xi32>):
        %di = tensor.extract %ids[%i] : tensor<1000xi32>
        %dj = tensor.extract %ids[%j] : tensor<1000xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        %c400 = arith.constant 400 : index
        %j400 = arith.addi %j, %c400 : index
        %lag = arith.cmpi sge, %i, %j400 : index
        %keep = arith.andi %same, %lag : i1
        attn.yield %keep : i1
      } -> tensor<1x2x1000x64xbf16>
  return %o : tensor<1x2x1000x64xbf16>
}

// -----

// 128 x 128 tiles with the producer warpgroup: its copying thread visits
// the tiles the block mask keeps, in the consumers' order, and counts them
// (a buffer's mbarrier phases follow the count); the consumers' sparse
// loop copies nothing and carries the same count.
// PRODUCER-LABEL: gpu.func @document_long(
// PRODUCER-SAME: %[[MASK:[a-z0-9]+]]: memref<?x?x?x?xi8>, %[[KMAP:[a-z0-9]+]]: !llvm.ptr, %[[VMAP:[a-z0-9]+]]: !llvm.ptr)
// PRODUCER-SAME: producer = true, loop = mbarrier, ping_pong = true, {{.*}}sparsity = block_mask
// PRODUCER: nvvm.setmaxregister decrease 56
// PRODUCER: scf.for %[[K0:.*]] = %c0 to %c512 step %c128 iter_args(%[[T:.*]] = %c0) -> (index)
// PRODUCER-NEXT: %[[KT:.*]] = arith.divui %[[K0]], %c128
// PRODUCER: %[[BYTE:.*]] = memref.load %[[MASK]][%block_id_z, %c0, %{{.*}}, %[[KT]]]
// PRODUCER-NEXT: %[[KEPT:.*]] = arith.cmpi ne, %[[BYTE]], %c0_i8
// PRODUCER-NEXT: scf.if %[[KEPT]] -> (index)
// PRODUCER-NEXT: arith.remui %[[T]], %c2
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[KMAP]]
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[VMAP]]
// PRODUCER-NEXT: %[[NEXT:.*]] = arith.addi %[[T]], %c1
// PRODUCER-NEXT: scf.yield %[[NEXT]] : index
// PRODUCER-NEXT: } else {
// PRODUCER-NEXT: scf.yield %[[T]] : index
// PRODUCER: nvvm.exit
// PRODUCER: nvvm.setmaxregister increase 224
// PRODUCER: scf.for {{.*}} -> ({{.*}}, index, index)
// PRODUCER: %[[B:.*]] = memref.load %[[MASK]]
// PRODUCER-NEXT: arith.cmpi eq, %[[B]], %c0_i8
// PRODUCER-NOT: nvgpu.device_async_copy
// PRODUCER: nvvm.mbarrier.try_wait.parity
// PRODUCER-NOT: nvgpu.device_async_copy
// PRODUCER: nvvm.wgmma.mma_async
// PRODUCER-NOT: nvgpu.device_async_copy
// PRODUCER-LABEL: gpu.func @document_long_block_mask(
// The same with the producer's 128 threads copying (cp.async): the kept
// tiles' copies only, the count carried alike.
// CPASYNC-LABEL: gpu.func @document_long(
// CPASYNC: nvvm.setmaxregister decrease 56
// CPASYNC: scf.for %[[K0:.*]] = %c0 to %c512 step %c128 iter_args(%[[T:.*]] = %c0) -> (index)
// CPASYNC: %[[BYTE:.*]] = memref.load %{{.*}} : memref<?x?x?x?xi8>
// CPASYNC-NEXT: %[[KEPT:.*]] = arith.cmpi ne, %[[BYTE]], %c0_i8
// CPASYNC-NEXT: scf.if %[[KEPT]] -> (index)
// CPASYNC: nvgpu.device_async_copy %arg1
// CPASYNC: nvvm.mbarrier.arrive
// CPASYNC: nvgpu.device_async_copy %arg2
// CPASYNC: scf.yield %{{.*}} : index
// CPASYNC-NEXT: } else {
// CPASYNC-NEXT: scf.yield %[[T]] : index
// CPASYNC: nvvm.exit
// CPASYNC-LABEL: gpu.func @document_long_block_mask(
func.func @document_long(%q: tensor<2x4x512x64xbf16>, %k: tensor<2x4x512x64xbf16>,
                         %v: tensor<2x4x512x64xbf16>,
                         %doc: tensor<2x512xi32>) -> tensor<2x4x512x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x512x64xbf16>) k(%k : tensor<2x4x512x64xbf16>)
      v(%v : tensor<2x4x512x64xbf16>) captures(%doc : tensor<2x512xi32>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<2x512xi32>):
        %di = tensor.extract %ids[%b, %i] : tensor<2x512xi32>
        %dj = tensor.extract %ids[%b, %j] : tensor<2x512xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      } -> tensor<2x4x512x64xbf16>
  return %o : tensor<2x4x512x64xbf16>
}

// -----

// Two logit branches on the sparse loop: the producer (24 registers) copies
// both branches' K tiles of a kept tile, then V.
// PRODUCER-LABEL: gpu.func @two_branches(
// PRODUCER-SAME: consumer_groups = 2, producer = true, loop = mbarrier, ping_pong = true, lookahead = false, sparsity = block_mask
// PRODUCER: nvvm.setmaxregister decrease 24
// PRODUCER: scf.for
// PRODUCER: memref.load %{{.*}} : memref<?x?x?x?xi8>
// PRODUCER-NEXT: %[[KEPT:.*]] = arith.cmpi ne, %{{.*}}, %c0_i8
// PRODUCER-NEXT: scf.if %[[KEPT]] -> (index)
// PRODUCER-COUNT-2: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg
// PRODUCER: nvvm.cp.async.bulk.tensor.shared.cluster.global
// PRODUCER: } else {
// PRODUCER: nvvm.exit
// PRODUCER: nvvm.setmaxregister increase 240
// PRODUCER-LABEL: gpu.func @two_branches_block_mask(
func.func @two_branches(%q1: tensor<2x4x512x64xbf16>, %q2: tensor<2x4x512x64xbf16>,
                        %k1: tensor<2x4x512x64xbf16>, %k2: tensor<2x4x512x64xbf16>,
                        %v: tensor<2x4x512x64xbf16>, %doc: tensor<2x512xi32>,
                        %lambda: tensor<f32>) -> tensor<2x4x512x64xbf16> {
  %o = attn.attention q(%q1, %q2 : tensor<2x4x512x64xbf16>, tensor<2x4x512x64xbf16>)
      k(%k1, %k2 : tensor<2x4x512x64xbf16>, tensor<2x4x512x64xbf16>)
      v(%v : tensor<2x4x512x64xbf16>)
      captures(%doc, %lambda : tensor<2x512xi32>, tensor<f32>)
      scale [0.125, 0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<2x512xi32>, %l: tensor<f32>):
        %di = tensor.extract %ids[%b, %i] : tensor<2x512xi32>
        %dj = tensor.extract %ids[%b, %j] : tensor<2x512xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      }
      epilogue {
      ^bb0(%o1: f32, %o2: f32, %b: index, %h: index, %i: index, %d: index,
           %ids: tensor<2x512xi32>, %l: tensor<f32>):
        %lam = tensor.extract %l[] : tensor<f32>
        %scaled = arith.mulf %lam, %o2 : f32
        %r = arith.subf %o1, %scaled : f32
        attn.yield %r : f32
      } -> tensor<2x4x512x64xbf16>
  return %o : tensor<2x4x512x64xbf16>
}
