// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s

// A pair bias read at (h, q_idx, kv_idx) (Evoformer's): its [64, 64] tile is
// staged with each K tile by cp.async into a double-buffered shared tile,
// and the score region reads it from there, not from global memory. Chunk
// j of row r lies at chunk j ^ (r % 8), so that pair reads of 8 rows at one
// column hit different banks.
// CHECK-LABEL: gpu.func @pair_bias
// Its copies, 16 bytes each, beside K's, to a swizzled chunk of the staged
// tile: 2 buffers x 64 rows x 64 elements, no pad. (Column 248 is the
// last chunk of a bias row.)
// CHECK: arith.minsi %{{.*}}, %c248
// CHECK: %[[COL:.+]] = arith.xori
// CHECK-NEXT: nvgpu.device_async_copy %arg3[%c0, %block_id_y, {{.*}}], %[[TILE:.+]][%{{.*}}, %[[COL]]], 8, {{.*}} to memref<128x64xbf16, #gpu.address_space<workgroup>>
// The step reads the current buffer, at swizzled columns, a pair of
// adjacent columns (a thread's two elements of a row) per 32-bit load.
// CHECK: arith.xori
// CHECK: %[[PAIR:.+]] = vector.load %[[TILE]][%{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<128x64xbf16, #gpu.address_space<workgroup>>, vector<2xbf16>
// The region's bf16 -> f32 extensions become bit moves on the 32-bit word:
// the even column is its low half shifted up, the odd one its high half.
// CHECK: %[[WORD:.+]] = vector.bitcast %[[PAIR]] : vector<2xbf16> to vector<1xi32>
// CHECK: %[[BITS:.+]] = vector.extract %[[WORD]][0]
// CHECK-DAG: %[[EVEN:.+]] = arith.shli %[[BITS]], %c16_i32
// CHECK-DAG: arith.bitcast %[[EVEN]] : i32 to f32
// CHECK-DAG: %[[ODD:.+]] = arith.andi %[[BITS]], %c-65536_i32
// CHECK-DAG: arith.bitcast %[[ODD]] : i32 to f32
// CHECK-NOT: arith.extf {{.*}} : bf16 to f32
// CHECK-NOT: memref.load %arg3
func.func @pair_bias(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>,
                     %v: tensor<1x2x256x64xbf16>, %bias: tensor<1x2x256x256xbf16>)
    -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x64xbf16>) k(%k : tensor<1x2x256x64xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) captures(%bias : tensor<1x2x256x256xbf16>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<1x2x256x256xbf16>):
        %c0 = arith.constant 0 : index
        %x = tensor.extract %t[%c0, %h, %i, %j] : tensor<1x2x256x256xbf16>
        %y = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %y : f32
        attn.yield %r : f32
      } -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}

// -----

// Rows of 250 keys end mid-chunk: the bias is gathered per element.
// CHECK-LABEL: gpu.func @ragged_rows
// CHECK-NOT: nvgpu.device_async_copy %arg3
// CHECK: memref.load %arg3
func.func @ragged_rows(%q: tensor<1x2x250x64xbf16>, %k: tensor<1x2x250x64xbf16>,
                       %v: tensor<1x2x250x64xbf16>, %bias: tensor<1x2x250x250xbf16>)
    -> tensor<1x2x250x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x250x64xbf16>) k(%k : tensor<1x2x250x64xbf16>)
      v(%v : tensor<1x2x250x64xbf16>) captures(%bias : tensor<1x2x250x250xbf16>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<1x2x250x250xbf16>):
        %c0 = arith.constant 0 : index
        %x = tensor.extract %t[%c0, %h, %i, %j] : tensor<1x2x250x250xbf16>
        %y = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %y : f32
        attn.yield %r : f32
      } -> tensor<1x2x250x64xbf16>
  return %o : tensor<1x2x250x64xbf16>
}

// -----

// A key mask bias read at (b, 0, 0, kv_idx) (Evoformer's): its row index is
// uniform over the block, so each K tile brings one row of it (block-n
// elements, 8 chunks: the other threads copy nothing), and the score region
// reads it from shared memory.
// CHECK-LABEL: gpu.func @key_bias
// The staged tile: 2 buffers x 1 row x 64 elements.
// CHECK: %[[TILE:.+]] = memref.view {{.*}} to memref<2x64xbf16, #gpu.address_space<workgroup>>
// Only the first 8 threads copy a chunk.
// CHECK: %[[FEW:.+]] = arith.cmpi ult, {{.*}}, %c8
// CHECK-NEXT: scf.if %[[FEW]]
// CHECK: nvgpu.device_async_copy %arg3[%block_id_z, %c0, {{.*}}], %[[TILE]][{{.*}}], 8
// The step reads the current buffer.
// CHECK: vector.load %[[TILE]]
// CHECK-NOT: memref.load %arg3
func.func @key_bias(%q: tensor<2x2x256x64xbf16>, %k: tensor<2x2x256x64xbf16>,
                    %v: tensor<2x2x256x64xbf16>, %bias: tensor<2x1x1x256xbf16>)
    -> tensor<2x2x256x64xbf16> {
  %o = attn.attention q(%q : tensor<2x2x256x64xbf16>) k(%k : tensor<2x2x256x64xbf16>)
      v(%v : tensor<2x2x256x64xbf16>) captures(%bias : tensor<2x1x1x256xbf16>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<2x1x1x256xbf16>):
        %c0 = arith.constant 0 : index
        %x = tensor.extract %t[%b, %c0, %c0, %j] : tensor<2x1x1x256xbf16>
        %y = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %y : f32
        attn.yield %r : f32
      } -> tensor<2x2x256x64xbf16>
  return %o : tensor<2x2x256x64xbf16>
}
