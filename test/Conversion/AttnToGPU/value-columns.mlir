// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=WGMMA
// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=MMA
// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=4 block-n=32 tensor-cores=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=ROW

// value_columns (the backward's dK and dV in one kernel): one V tile
// [block-n, 128] is staged per step; branch 0's P V reads its first 64
// columns, branch 1's the next 64, each into its own 64-column
// accumulators, and the output's column blocks are the branches'.

// wgmma: V is MN-major in 64-column atoms of block-n rows (8192 bytes): a
// buffer holds two atoms (16384 bytes); branch 0's P V starts at the
// buffer, branch 1's one atom in, each an n64 product.
// WGMMA-LABEL: gpu.func @key_value
// WGMMA-SAME: generator = wgmma
// WGMMA: %[[BUF:.+]] = arith.muli %{{.*}}, %c16384 : index
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16
// WGMMA: arith.addi %{{.*}}, %c8192_i64 : i64
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16

// mma.sync: branch 1's ldmatrix.trans reads V's columns from 64.
// MMA-LABEL: gpu.func @key_value
// MMA-SAME: generator = mma_sync
// MMA: nvgpu.ldmatrix %[[V:.+]][%[[KEY:.+]], %[[COL:.+]]] {numTiles = 4 : i32, transpose = true} : memref<64x136xbf16
// MMA: %[[COL1:.+]] = arith.addi %[[COL]], %c64 : index
// MMA-NEXT: nvgpu.ldmatrix %[[V]][%[[KEY]], %[[COL1]]] {numTiles = 4 : i32, transpose = true}

// The reference generator: each branch stores its own block (a warp's
// lanes, 32 columns a chunk).
// ROW-LABEL: gpu.func @key_value
// ROW-SAME: generator = reference
// ROW: memref.store {{.*}}[%c0, %{{.*}}, %{{.*}}, %[[LANE:.+]]] : memref<1x2x128x128xbf16
// ROW: %[[C64:.+]] = arith.addi %[[LANE]], %c64 : index
// ROW-NEXT: memref.store {{.*}}[%c0, %{{.*}}, %{{.*}}, %[[C64]]] : memref<1x2x128x128xbf16
// ROW: %[[C96:.+]] = arith.addi %[[LANE]], %c96 : index
// ROW-NEXT: memref.store {{.*}}[%c0, %{{.*}}, %{{.*}}, %[[C96]]] : memref<1x2x128x128xbf16
func.func @key_value(%k: tensor<1x2x128x64xbf16>, %v: tensor<1x2x128x64xbf16>,
                     %q: tensor<1x2x256x64xbf16>, %do: tensor<1x2x256x64xbf16>,
                     %qdo: tensor<1x2x256x128xbf16>) -> tensor<1x2x128x128xbf16> {
  %o = attn.attention q(%k, %v : tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>)
      k(%q, %do : tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
      v(%qdo : tensor<1x2x256x128xbf16>) value_columns [64, 64]
      scale [0.125, 1.0] normalizer none
      score {
      ^bb0(%s: f32, %dp: f32, %b: index, %h: index, %i: index, %j: index):
        %e = math.exp2 %s : f32
        %ds = arith.mulf %e, %dp : f32
        attn.yield %ds, %e : f32, f32
      } -> tensor<1x2x128x128xbf16>
  return %o : tensor<1x2x128x128xbf16>
}
