// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=192 block-n=128 persistent=false tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: not flashlight-opt %s --attn-plan="arch=sm_90a block-m=192 block-n=64 tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu 2>&1 | FileCheck %s --check-prefix=NARROW
// RUN: not flashlight-opt %s --attn-plan="arch=sm_90a block-m=192 block-n=128 producer-warpgroup=false tma=false" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu 2>&1 | FileCheck %s --check-prefix=NARROW
// RUN: not flashlight-opt %s --attn-plan="block-m=192 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu 2>&1 | FileCheck %s --check-prefix=AMPERE

// 192-row tiles (one work tile per block; persistent.mlir has the
// persistent grid): three consumer warpgroups (threads 0..383) and the
// producer warpgroup (384..511), the consumers taking turns in order
// 0, 1, 2, 0, ... (FlashAttention-3's D = 64 configuration).
// CHECK-LABEL: gpu.func @vanilla
// CHECK-SAME: known_block_size = array<i32: 512, 1, 1>
// The 384 consumers release each buffer (empty barriers' count).
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c128_i32
// CHECK-COUNT-2: nvvm.mbarrier.init %{{.*}}, %c384_i32
// The register file split: the producer 32, each consumer 160
// (3 * 128 * 160 + 128 * 32 = 65536).
// CHECK: arith.cmpi uge, %thread_id_x, %c384
// CHECK: nvvm.setmaxregister decrease 32
// CHECK: nvvm.exit
// CHECK: nvvm.setmaxregister increase 160
// The last warpgroup lets warpgroup 0 take the first turn; warpgroup g's
// turn is named barrier 6 + g, shared by the two warpgroups handing it
// over (256 threads).
// CHECK: %[[G:.+]] = arith.divui %{{.*}}, %c4 : index
// CHECK: %[[LAST:.+]] = arith.cmpi eq, %[[G]], %c2 : index
// CHECK: scf.if %[[LAST]] {
// CHECK-NEXT: nvvm.barrier.arrive id = %c6_i32 number_of_threads = %c256_i32
// CHECK: %[[OWN:.+]] = arith.addi %{{.*}}, %c6_i32 : i32
// CHECK-NEXT: nvvm.barrier id = %[[OWN]] number_of_threads = %c256_i32
// Each S ends the turn: it passes to warpgroup (g + 1) mod 3.
// CHECK: scf.for
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: %[[NEXT:.+]] = arith.remui %{{.*}}, %c3_i32 : i32
// CHECK: %[[ID:.+]] = arith.addi %[[NEXT]], %c6_i32 : i32
// CHECK-NEXT: nvvm.barrier.arrive id = %[[ID]] number_of_threads = %c256_i32
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// After the loop, warpgroup 0 takes the turn warpgroup 2 handed over last;
// the consumers' block-wide barrier counts all 384.
// CHECK: scf.yield
// CHECK: nvvm.barrier id = %c6_i32 number_of_threads = %c256_i32
// CHECK: nvvm.barrier id = %c5_i32 number_of_threads = %c384_i32
// CHECK: gpu.return
// Elsewhere (64-key tiles: the pipelined loop; no producer; a single KV
// tile or a block mask), and without wgmma, 192-row tiles are an error (the
// tile choice picks them only where they apply).
// NARROW: error: attn-plan: block-m 192 needs wgmma's producer warpgroup on a dense KV loop
// AMPERE: error: attn-plan: block-m 192 needs wgmma (sm_90a)
func.func @vanilla(%q: tensor<1x2x512x64xbf16>, %k: tensor<1x2x512x64xbf16>,
                   %v: tensor<1x2x512x64xbf16>) -> tensor<1x2x512x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x64xbf16>) k(%k : tensor<1x2x512x64xbf16>)
      v(%v : tensor<1x2x512x64xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x512x64xbf16>
  return %o : tensor<1x2x512x64xbf16>
}
