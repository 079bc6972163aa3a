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
// and a producer warpgroup.
// RUN: flashlight-compile %S/Inputs/differential-d64.mlir -o %t --emit=mlir --arch=sm_90a --flashlight-explain 2>&1 | FileCheck %s --check-prefix=DIFF
// One branch at D = 64 with a plain mask and score: 192 x 128 tiles (three
// consumer warpgroups and the producer) once queries and keys are both at
// least 8192 long; 128 x 128 below (with the producer and ping-pong) down
// to N = 2048, 128 x 64 below that, on Ampere and without the producer.
// RUN: flashlight-compile %S/../../examples/causal.mlir -o %t --emit=mlir --arch=sm_90a --q-len=8192 --kv-len=8192 --head-dim=64 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=LONG
// RUN: flashlight-compile %S/../../examples/causal.mlir -o %t --emit=mlir --arch=sm_90a --q-len=4096 --kv-len=8192 --head-dim=64 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=SHORTQ
// RUN: flashlight-compile %S/../../examples/causal.mlir -o %t --emit=mlir --arch=sm_90a --q-len=1024 --kv-len=1024 --head-dim=64 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: flashlight-compile %S/../../examples/causal.mlir -o %t --emit=mlir --arch=sm_80 --q-len=8192 --kv-len=8192 --head-dim=64 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=LONG80
// RUN: flashlight-compile %S/../../examples/causal.mlir -o %t --emit=mlir --arch=sm_90a --q-len=8192 --kv-len=8192 --head-dim=128 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=LONG128
// Without the producer warpgroup there are no three consumer warpgroups.
// RUN: flashlight-compile %S/../../examples/causal.mlir -o %t --emit=mlir --arch=sm_90a --q-len=8192 --kv-len=8192 --head-dim=64 --producer-warpgroup=false --flashlight-explain 2>&1 | FileCheck %s --check-prefix=NOPROD
// A tanh soft-cap (0.96-0.99x on 192 x 128) and sliding windows (not
// measured there) keep their tiles.
// RUN: flashlight-compile %S/../../examples/softcap.mlir -o %t --emit=mlir --arch=sm_90a --q-len=8192 --kv-len=8192 --head-dim=64 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=CAP
// RUN: flashlight-compile %S/../../examples/sliding_window.mlir -o %t --emit=mlir --arch=sm_90a --q-len=8192 --kv-len=8192 --head-dim=64 --flashlight-explain 2>&1 | FileCheck %s --check-prefix=WINDOW

// LONG: code generator wgmma, tiles 192x128, 512 threads per block
// SHORTQ: code generator wgmma, tiles 128x128, 384 threads per block
// SHORT: code generator wgmma, tiles 128x64, 256 threads per block
// LONG80: code generator mma.sync, tiles 128x64
// LONG128: code generator wgmma, tiles 128x128, 384 threads per block
// NOPROD: code generator wgmma, tiles 128x64, 256 threads per block
// CAP: code generator wgmma, tiles 64x64, 128 threads per block
// WINDOW: code generator wgmma, tiles 64x64, 128 threads per block

// ALIBI: code generator wgmma, tiles 128x128, 384 threads per block
// AMPERE: code generator mma.sync, tiles 64x64, 128 threads per block
// SOFTCAP: code generator wgmma, tiles 64x64, 128 threads per block
// PAIR: code generator wgmma, tiles 128x128, 384 threads per block
// PAIR80: code generator mma.sync, tiles 64x64, 128 threads per block
// DIFF: code generator wgmma, tiles 128x128, 384 threads per block

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
