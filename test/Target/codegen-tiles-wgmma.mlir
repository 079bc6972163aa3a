// wgmma at D = 128: a score region of plain arithmetic (ALiBi: no math-dialect
// op, no per-element gather) takes the 128 x 128 tiles of the lean programs;
// a transcendental score (tanh soft-cap) keeps 64 x 64; mma.sync (sm_80)
// keeps 64 x 64 for both.
// RUN: flashlight-compile %s -o %t --emit=mlir --arch=sm_90a --flashlight-explain 2>&1 | FileCheck %s --check-prefix=ALIBI
// RUN: flashlight-compile %s -o %t --emit=mlir --arch=sm_80 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=AMPERE
// RUN: flashlight-compile %S/Inputs/softcap-d128.mlir -o %t --emit=mlir --arch=sm_90a --flashlight-explain 2>&1 | FileCheck %s --check-prefix=SOFTCAP
// A pair bias, which wgmma stages with K (no per-element gather), takes
// 128 x 128 too; mma.sync gathers it and keeps 64 x 64.
// RUN: flashlight-compile %S/Inputs/pair-bias-d128.mlir -o %t --emit=mlir --arch=sm_90a --flashlight-explain 2>&1 | FileCheck %s --check-prefix=PAIR
// RUN: flashlight-compile %S/Inputs/pair-bias-d128.mlir -o %t --emit=mlir --arch=sm_80 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=PAIR80
// Two logit branches at D = 64 (differential): two warpgroups on 128 x 128
// and a producer warpgroup; with --branch-warpgroups, one warpgroup per
// branch on 64 x 64.
// RUN: flashlight-compile %S/Inputs/differential-d64.mlir -o %t --emit=mlir --arch=sm_90a --flashlight-explain 2>&1 | FileCheck %s --check-prefix=DIFF
// RUN: flashlight-compile %S/Inputs/differential-d64.mlir -o %t --emit=mlir --arch=sm_90a --branch-warpgroups --flashlight-explain 2>&1 | FileCheck %s --check-prefix=DIFF2

// ALIBI: code generator wgmma, tiles 128x128, 384 threads per block
// AMPERE: code generator mma.sync, tiles 64x64, 128 threads per block
// SOFTCAP: code generator wgmma, tiles 64x64, 128 threads per block
// PAIR: code generator wgmma, tiles 128x128, 384 threads per block
// PAIR80: code generator mma.sync, tiles 64x64, 128 threads per block
// DIFF: code generator wgmma, tiles 128x128, 384 threads per block
// DIFF2: code generator wgmma, tiles 64x64, 256 threads per block

func.func @alibi(%q: tensor<1x2x512x128xbf16>, %k: tensor<1x2x512x128xbf16>,
                 %v: tensor<1x2x512x128xbf16>, %slopes: tensor<2xf32>)
    -> tensor<1x2x512x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x512x128xbf16>) k(%k : tensor<1x2x512x128xbf16>)
      v(%v : tensor<1x2x512x128xbf16>) captures(%slopes : tensor<2xf32>)
      scale [0.088] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index,
           %m: tensor<2xf32>):
        %slope = tensor.extract %m[%h] : tensor<2xf32>
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %bias = arith.mulf %slope, %df : f32
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      }
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %m: tensor<2xf32>):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<1x2x512x128xbf16>
  return %o : tensor<1x2x512x128xbf16>
}
