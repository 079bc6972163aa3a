// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128 tile-counter=true" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=ONETILE

// A causal kernel with a tile counter (the plan's tile_counter): a
// persistent grid whose blocks draw their work tiles from two i32 after the
// other buffers (before the tensor maps). The producer's issuing thread
// waits until the consumers released Q's buffer work % 2 (mbarrier 10 +
// buffer), draws a tile, leaves it in the buffer's slot (the words after
// the twelve mbarriers: bytes 96 + 8 * buffer), and past the last of the
// 8 work tiles arrives on Q's full mbarrier (8 + buffer) itself. The work
// tile's query tile runs longest first (3 - tile % 4). After its last
// draw, the block counts itself done, and the last block sets both words
// back to zero between fences.
// CHECK-LABEL: gpu.func @causal
// CHECK-SAME: %arg4: memref<2xi32>, %arg5: !llvm.ptr
// CHECK-SAME: persistent = true, query_ahead = true, tma = true, tile_counter = true
// CHECK: nvvm.setmaxregister decrease 56
// CHECK: scf.while (%{{.*}} = %c0, %[[WORK:.+]] = %c0) : (index, index) -> (index, index, index) {
// CHECK: %[[BUF:.+]] = arith.remui %[[WORK]], %c2 : index
// CHECK: scf.if
// CHECK: arith.addi %{{.*}}, %c80_i64 : i64
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: }
// CHECK: %[[DRAWN:.+]] = memref.atomic_rmw addi %c1_i32, %arg4[%c0]
// CHECK: %[[OFF:.+]] = arith.muli %[[BUF]], %c8 : index
// CHECK: %[[OFF64:.+]] = arith.index_castui %[[OFF]] : index to i64
// CHECK: arith.addi %[[OFF64]], %c96_i64 : i64
// CHECK: llvm.store %[[DRAWN]], %{{.*}} : i32, !llvm.ptr<3>
// CHECK: %[[TILE:.+]] = arith.index_castui %[[DRAWN]] : i32 to index
// CHECK: %[[PAST:.+]] = arith.cmpi uge, %[[TILE]], %c8 : index
// CHECK: scf.if %[[PAST]] {
// CHECK: arith.addi %[[OFF64]], %c64_i64 : i64
// CHECK: nvvm.mbarrier.arrive
// CHECK: }
// CHECK: %[[MORE:.+]] = arith.cmpi ult, %[[TILE]], %c8 : index
// CHECK: scf.condition(%[[MORE]])
// CHECK: } do {
// CHECK: ^bb0(%{{.*}}: index, %{{.*}}: index, %[[T:.+]]: index):
// CHECK: %[[QT:.+]] = arith.remui %[[T]], %c4 : index
// CHECK: arith.subi %c3, %[[QT]] : index
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: %[[DONE:.+]] = memref.atomic_rmw addi %c1_i32, %arg4[%c1]
// CHECK: gpu.grid_dim x
// CHECK: scf.if
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK-NEXT: memref.store %c0_i32, %arg4[%c0]
// CHECK-NEXT: memref.store %c0_i32, %arg4[%c1]
// CHECK: nvvm.exit
// The consumers wait for Q's full mbarrier and read the slot beside it.
// CHECK: nvvm.setmaxregister increase 224
// CHECK: scf.while (%{{.*}} = %c0, %[[CWORK:.+]] = %c0) : (index, index) -> (index, index, index) {
// CHECK: %[[CBUF:.+]] = arith.remui %[[CWORK]], %c2 : index
// CHECK: %[[COFF:.+]] = arith.muli %[[CBUF]], %c8 : index
// CHECK: %[[COFF64:.+]] = arith.index_castui %[[COFF]] : index to i64
// CHECK: arith.addi %[[COFF64]], %c64_i64 : i64
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: arith.addi %[[COFF64]], %c96_i64 : i64
// CHECK: %[[SLOT:.+]] = llvm.load %{{.*}} : !llvm.ptr<3> -> i32
// CHECK: %[[CTILE:.+]] = arith.index_castui %[[SLOT]] : i32 to index
// CHECK: %[[CMORE:.+]] = arith.cmpi ult, %[[CTILE]], %c8 : index
// CHECK: scf.condition(%[[CMORE]])
// CHECK: gpu.return
// Without it (the default): one work tile per block, longest first by
// block id.
// ONETILE-LABEL: gpu.func @causal
// ONETILE-NOT: memref<2xi32>
// ONETILE-NOT: tile_counter
// ONETILE-NOT: scf.while
// ONETILE: gpu.block_id x
// ONETILE: gpu.return
func.func @causal(%q: tensor<1x2x512x64xbf16>, %k: tensor<1x2x512x64xbf16>,
                  %v: tensor<1x2x512x64xbf16>) -> tensor<1x2x512x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x64xbf16>) k(%k : tensor<1x2x512x64xbf16>)
      v(%v : tensor<1x2x512x64xbf16>) scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sle, %j, %i : index
        attn.yield %keep : i1
      } -> tensor<1x2x512x64xbf16>
  return %o : tensor<1x2x512x64xbf16>
}
