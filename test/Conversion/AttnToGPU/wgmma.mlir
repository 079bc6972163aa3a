// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=128 block-n=64 overlap-softmax=false decouple-warpgroups=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse 2>&1 | FileCheck %s

// The plain KV loop with its block-wide barrier per step (wgmma-overlap.mlir
// has the pipelined loop, wgmma-mbarrier.mlir the mbarriers).
// Hopper's warpgroup MMA: 128 query rows are two warpgroups (256 threads),
// one block per SM. Q, K and V live in 128-byte swizzled tiles whose start
// is aligned to 1024 bytes at run time (1024 bytes reserved), K and V
// double-buffered: 1024 + 2 * 2 * 64 * 128 * 2 + 128 * 128 * 2 bytes.
// CHECK-LABEL: gpu.func @vanilla
// CHECK-SAME: generator = wgmma
// CHECK-SAME: flashlight.dynamic_shared_memory = 99328
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// CHECK-SAME: nvvm.minctasm = 1
// CHECK: %[[SMEM:.*]] = gpu.dynamic_shared_memory
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[SMEM]]
// CHECK: %[[MIS:.*]] = arith.remui %[[BASE]], %c1024
// CHECK: %[[PAD:.*]] = arith.subi %c1024, %[[MIS]]
// CHECK: %[[SHIFT:.*]] = arith.remui %[[PAD]], %c1024
// CHECK: memref.view %[[SMEM]][%[[SHIFT]]][] {{.*}} to memref<256x64xbf16
// CHECK: memref.view
// CHECK: %[[QS:.*]] = memref.view
// Q's copies are not waited for before the loop (two warpgroups: their
// latency overlaps the first K/V tile's).
// CHECK: nvgpu.device_async_create_group
// CHECK-NOT: nvgpu.device_async_wait
// CHECK: scf.for
// K_t and V_t (and, first, Q) land together: one barrier per step.
// cp.async writes through the generic proxy and wgmma reads through the
// async one, so each thread fences before the barrier.
// CHECK: nvgpu.device_async_wait {{.*}} {numGroups = 0 : i32}
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// S = Q K^T: D / 16 k steps, both operands from swizzled shared memory; the
// first step overwrites the accumulator.
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-7: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// The next tile's K and V go into the other buffers right away (no barrier).
// CHECK-NOT: gpu.barrier
// CHECK: nvgpu.device_async_copy
// P V needs no other wait or barrier.
// CHECK-NOT: nvgpu.device_async_wait
// CHECK-NOT: gpu.barrier
// P V: P from registers (four i32 per k step), V transposed from shared
// memory, as inline PTX (no NVVM op has the register-A form).
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1, 1;"
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// The output goes through the warpgroup's own rows of the Q tile: once
// every Q copy has landed (a block whose loop ran no step has not
// synchronized), column pairs in, a barrier of the warpgroup's 128 threads
// (not the block's), then 16-byte chunks out, row-contiguous.
// CHECK: scf.yield
// CHECK: gpu.barrier
// CHECK: vector.store %{{.*}}, %[[QS]]{{.*}} {alignment = 4 : i64} {{.*}}, vector<2xbf16>
// CHECK-NOT: gpu.barrier
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: vector.load %[[QS]]{{.*}} {alignment = 16 : i64} {{.*}}, vector<8xbf16>
// CHECK: vector.store %{{.*}}, %arg3{{.*}} {alignment = 16 : i64} : memref<1x2x256x128xbf16, strided<[?, ?, ?, 1]>>, vector<8xbf16>
// CHECK-NOT: vector<2xbf16>
func.func @vanilla(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>,
                   %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x128xbf16>) k(%k : tensor<1x2x256x128xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) scale [0.088] normalizer softmax
      -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}

// -----

// A V head dim that fills its last 64-column swizzle atom partly (96) takes
// wgmma: K and V tiles hold whole atoms ([2 buffers x 64 rows x 2 atoms,
// 64]), S = Q K^T in six k16 steps, P V with N = 96 (four k16 steps over
// the 64 keys), reading the second atom's first 32 columns only.
// CHECK-LABEL: gpu.func @narrow
// CHECK-SAME: generator = wgmma
// CHECK: memref.view {{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>]
// CHECK-COUNT-5: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <one>]
// CHECK-COUNT-4: wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16
func.func @narrow(%q: tensor<1x2x256x96xbf16>, %k: tensor<1x2x256x96xbf16>,
                  %v: tensor<1x2x256x96xbf16>) -> tensor<1x2x256x96xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x96xbf16>) k(%k : tensor<1x2x256x96xbf16>)
      v(%v : tensor<1x2x256x96xbf16>) scale [0.1] normalizer softmax
      -> tensor<1x2x256x96xbf16>
  return %o : tensor<1x2x256x96xbf16>
}

// -----

// Head dim 80: a 64-row K or V tile is 640 16-byte chunks, two rounds and
// a half of the block's 256 threads: the last round's copies are guarded
// (without the guard, threads past the tile wrote into the next buffer).
// CHECK-LABEL: gpu.func @narrow_80
// CHECK-DAG: %[[C640:.*]] = arith.constant 640 : index
// CHECK-DAG: %[[C512:.*]] = arith.constant 512 : index
// CHECK: %[[LAST:.*]] = arith.addi %{{.*}}thread_id_x, %[[C512]] : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[LAST]], %[[C640]] : index
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK: nvgpu.device_async_copy %arg1
// CHECK: wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16
func.func @narrow_80(%q: tensor<1x2x256x80xbf16>, %k: tensor<1x2x256x80xbf16>,
                     %v: tensor<1x2x256x80xbf16>) -> tensor<1x2x256x80xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x80xbf16>) k(%k : tensor<1x2x256x80xbf16>)
      v(%v : tensor<1x2x256x80xbf16>) scale [0.11] normalizer softmax
      -> tensor<1x2x256x80xbf16>
  return %o : tensor<1x2x256x80xbf16>
}

// -----

// A Q.K head dim that fills its last atom partly (80: IPA's folded point
// term) takes wgmma. Its Q and K tiles hold whole atoms: K [2 buffers x 64
// rows x 2 atoms, 64], V [2 x 64, 64], Q [128 rows x 2 atoms, 64].
// CHECK-LABEL: gpu.func @partial_atom
// CHECK-SAME: generator = wgmma
// CHECK: memref.view {{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<128x64xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<256x64xbf16, #gpu.address_space<workgroup>>
// S = Q K^T: 5 k16 steps, the first from zero.
// CHECK: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>]
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>]
// CHECK-NOT: nvvm.wgmma.mma_async
func.func @partial_atom(%q: tensor<1x2x256x80xbf16>, %k: tensor<1x2x256x80xbf16>,
                        %v: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x80xbf16>) k(%k : tensor<1x2x256x80xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) scale [0.1] normalizer softmax
      -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}

// -----

// A row's max over its tile is pairwise, not a chain (the row's every
// exponential waits for it): 16 values per thread and row (block-n 64),
// 8 + 4 + 2 + 1 maxes, the first level over S's values, then the quad's
// shuffles.
// CHECK-LABEL: gpu.func @row_max
// CHECK: %[[A:[0-9]+]] = arith.maximumf %{{[0-9]+}}, %{{[0-9]+}} : f32
// CHECK-NEXT: %[[B:[0-9]+]] = arith.maximumf %{{[0-9]+}}, %{{[0-9]+}} : f32
// CHECK-COUNT-6: arith.maximumf
// CHECK-NEXT: %[[AB:[0-9]+]] = arith.maximumf %[[A]], %[[B]] : f32
// CHECK-COUNT-6: arith.maximumf
// CHECK-NEXT: gpu.shuffle xor
func.func @row_max(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>,
                   %v: tensor<1x2x256x64xbf16>) -> tensor<1x2x256x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x64xbf16>) k(%k : tensor<1x2x256x64xbf16>)
      v(%v : tensor<1x2x256x64xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x256x64xbf16>
  return %o : tensor<1x2x256x64xbf16>
}
