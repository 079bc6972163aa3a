// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// wgmma's matrix descriptors: each product builds one descriptor per operand
// tile from an opaque copy of its shared address (a side-effecting
// `mov.b64`, which LLVM neither hoists nor merges), and each k16 step adds
// its offset in 16-byte units to that descriptor. Without the copy, LLVM
// computed every step's address at the top of the loop body and kept them
// live across the softmax.
// CHECK-LABEL: gpu.func @vanilla
// S = Q K^T in the loop: Q's and K's descriptors from pinned addresses.
// CHECK: scf.for
// CHECK: %[[QA:.+]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l"
// CHECK: %[[QS:.+]] = arith.shrui {{.*}}, %c4_i64
// CHECK: %[[Q:.+]] = arith.ori %[[QS]], %[[FLAGS:.+]] : i64
// CHECK: %[[KA:.+]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l"
// CHECK: %[[KS:.+]] = arith.shrui {{.*}}, %c4_i64
// CHECK: %[[K:.+]] = arith.ori %[[KS]], %[[FLAGS]] : i64
// CHECK: nvvm.wgmma.mma_async %[[Q]], %[[K]]
// The next k16 step: 32 bytes further into each 128-byte row.
// CHECK-NEXT: %[[Q1:.+]] = arith.addi %[[Q]], %c2_i64
// CHECK-NEXT: %[[K1:.+]] = arith.addi %[[K]], %c2_i64
// CHECK-NEXT: nvvm.wgmma.mma_async %[[Q1]], %[[K1]]
// The next 64-column atom: Q's tile of 128 rows, K's of 64.
// CHECK: %[[Q4:.+]] = arith.addi %[[Q]], %c1024_i64
// CHECK-NEXT: %[[K4:.+]] = arith.addi %[[K]], %c512_i64
// CHECK-NEXT: nvvm.wgmma.mma_async %[[Q4]], %[[K4]]
// P V: V's descriptor, then 16 keys (16 rows of 128 bytes) per step.
// CHECK: %[[VA:.+]] = llvm.inline_asm has_side_effects "mov.b64 $0, $1;", "=l,l"
// CHECK: %[[VS:.+]] = arith.shrui {{.*}}, %c4_i64
// CHECK: %[[V:.+]] = arith.ori %[[VS]]
// CHECK: "wgmma.mma_async{{.*}}" {{.*}}, %[[V]],
// CHECK: %[[V1:.+]] = arith.addi %[[V]], %c128_i64
// CHECK: "wgmma.mma_async{{.*}}" {{.*}}, %[[V1]],
func.func @vanilla(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>,
                   %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x128xbf16>) k(%k : tensor<1x2x256x128xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) scale [0.088388] normalizer softmax
      -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}
