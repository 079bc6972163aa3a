// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s
// RUN: flashlight-opt %s --split-input-file --attn-plan="arch=sm_90a block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s --check-prefix=WGMMA

// Per-element weights and score regions on the tensor-core generator.

// Sigmoid weights as 1 / (1 + 2^(-x log2 e)): ex2.approx.ftz and
// rcp.approx.ftz, no IEEE division.
// CHECK-LABEL: gpu.func @sigmoid
// CHECK: scf.for
// CHECK: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: %[[D:.*]] = arith.addf %[[E]], %{{.*}} fastmath<contract> : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"(%[[D]])
// CHECK-NOT: arith.divf
// CHECK: gpu.return
// With wgmma, every other weight takes its reciprocal on the FMA pipe: the
// bit-trick estimate (0x7EF311C7 minus the bits of the clamped 1 + e),
// refined by Newton steps.
// WGMMA-LABEL: gpu.func @sigmoid
// WGMMA: %[[MAGIC:.*]] = arith.constant 2129859015 : i32
// WGMMA: llvm.call_intrinsic "llvm.nvvm.rcp.approx.ftz.f"
// WGMMA: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// WGMMA: %[[Y:.*]] = arith.addf %[[E]]
// WGMMA: %[[C:.*]] = arith.minimumf %[[Y]]
// WGMMA: %[[BITS:.*]] = arith.bitcast %[[C]] : f32 to i32
// WGMMA: arith.subi %[[MAGIC]], %[[BITS]] : i32
// WGMMA-NOT: arith.divf
// WGMMA: gpu.return
func.func @sigmoid(%q: tensor<1x2x128x64xf16>, %k: tensor<1x2x128x64xf16>,
                   %v: tensor<1x2x128x64xf16>) -> tensor<1x2x128x64xf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xf16>) k(%k : tensor<1x2x128x64xf16>)
      v(%v : tensor<1x2x128x64xf16>) scale [0.125] normalizer sigmoid
      -> tensor<1x2x128x64xf16>
  return %o : tensor<1x2x128x64xf16>
}

// -----

// A bias gathered per element ([B, H, N, N]): its loads are issued before
// the tile's S = Q K^T, whose mma.sync then hide their latency.
// CHECK-LABEL: gpu.func @pair_bias
// CHECK: scf.for
// CHECK-NOT: nvvm.mma.sync
// CHECK: memref.load %arg3
// CHECK: nvvm.mma.sync
func.func @pair_bias(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                     %v: tensor<1x2x128x64xbf16>, %pair: tensor<1x2x128x128xbf16>)
    -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) captures(%pair : tensor<1x2x128x128xbf16>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %p: tensor<1x2x128x128xbf16>):
        %x = tensor.extract %p[%b, %h, %i, %j] : tensor<1x2x128x128xbf16>
        %y = arith.extf %x : bf16 to f32
        %r = arith.addf %s, %y : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}

// -----

// A softmax's logits from a score region are floored at -1e5 before the
// exp2 scale: a finite mask fill (finfo.min in an additive bias) would
// overflow to -inf once scaled by log2(e), or leave a huge FMA residual,
// where the program's softmax of equal logits gives the mean of V.
// CHECK-LABEL: gpu.func @finite_fill_bias
// CHECK-DAG: %[[FLOOR:.*]] = arith.constant -1.000000e+05 : f32
// CHECK: scf.for
// CHECK: arith.maximumf %{{.*}}, %[[FLOOR]] : f32
// WGMMA-LABEL: gpu.func @finite_fill_bias
// WGMMA-DAG: %[[FLOOR:.*]] = arith.constant -1.000000e+05 : f32
// WGMMA: arith.maximumf %{{.*}}, %[[FLOOR]] : f32
func.func @finite_fill_bias(%q: tensor<1x2x128x64xf16>, %k: tensor<1x2x128x64xf16>,
                            %v: tensor<1x2x128x64xf16>, %bias: tensor<1x1x128x128xf32>) -> tensor<1x2x128x64xf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xf16>) k(%k : tensor<1x2x128x64xf16>)
      v(%v : tensor<1x2x128x64xf16>) captures(%bias : tensor<1x1x128x128xf32>)
      scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<1x1x128x128xf32>):
        %c0 = arith.constant 0 : index
        %x = tensor.extract %t[%c0, %c0, %i, %j] : tensor<1x1x128x128xf32>
        %y = arith.addf %s, %x : f32
        attn.yield %y : f32
      } -> tensor<1x2x128x64xf16>
  return %o : tensor<1x2x128x64xf16>
}

// -----

// A score region's division and functions feed weights rounded to 16 bits:
// they may be approximate (afn), as the epilogue's are; the region's own
// flags stay. (Sigmoid attention's gradient program computes
// 1 / (1 + exp(-s)) per element: an IEEE rcp.rn and an accurate expf.)
// The region's exp(-s) becomes ex2.approx.ftz of -s log2 e (no math.exp
// is left), its division carries afn.
// CHECK-LABEL: gpu.func @silu_score
// CHECK-NOT: math.exp
// CHECK: scf.for
// CHECK-NOT: math.exp
// CHECK: %[[N:.*]] = arith.negf %{{.*}} fastmath<reassoc,contract,afn> : f32
// CHECK-NEXT: %[[NL:.*]] = arith.mulf %[[N]], %{{.*}} fastmath<reassoc,contract> : f32
// CHECK-NEXT: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[NL]])
// CHECK-NEXT: %[[DEN:.*]] = arith.addf %[[E]]
// CHECK-NEXT: arith.divf %{{.*}}, %[[DEN]] fastmath<reassoc,contract,afn>
// CHECK-NOT: math.exp
// CHECK: gpu.return
// WGMMA-LABEL: gpu.func @silu_score
// WGMMA-NOT: math.exp
// WGMMA: %[[N:.*]] = arith.negf %{{.*}} fastmath<reassoc,contract,afn> : f32
// WGMMA-NEXT: %[[NL:.*]] = arith.mulf %[[N]], %{{.*}} fastmath<reassoc,contract> : f32
// WGMMA-NEXT: %[[E:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[NL]])
// WGMMA-NEXT: %[[DEN:.*]] = arith.addf %[[E]]
// WGMMA-NEXT: arith.divf %{{.*}}, %[[DEN]] fastmath<reassoc,contract,afn>
// WGMMA-NOT: math.exp
// WGMMA: gpu.return
func.func @silu_score(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                      %v: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %n = arith.negf %s : f32
        %e = math.exp %n fastmath<nnan> : f32
        %one = arith.constant 1.0 : f32
        %den = arith.addf %e, %one : f32
        %y = arith.divf %s, %den : f32
        attn.yield %y : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}

// -----

// Ops whose results are rounded to an integral value (or compared, or
// converted to integers) stay exact: a few ulp of log could move the floor.
// CHECK-LABEL: gpu.func @floored_log_score
// CHECK: scf.for
// CHECK: math.log %{{.*}} fastmath<reassoc,contract> : f32
// CHECK-NEXT: %[[FL:.*]] = math.floor
// CHECK-NEXT: %[[FLL:.*]] = arith.mulf %[[FL]], %{{.*}} fastmath<reassoc,contract> : f32
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[FLL]])
func.func @floored_log_score(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                             %v: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %a = math.absf %s : f32
        %one = arith.constant 1.0 : f32
        %a1 = arith.addf %a, %one : f32
        %l = math.log %a1 : f32
        %fl = math.floor %l : f32
        %e = math.exp %fl : f32
        %y = arith.addf %s, %e : f32
        attn.yield %y : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}
