// With a score region, the tensor-core generator keeps 64-row tiles (16 rows
// per warp): the per-element score code next to a 32-row warp's state would
// spill. --block-m and --warp-rows override the heuristic (256-row tiles:
// 8 warps of 32 rows).
// RUN: flashlight-compile %s -o %t --emit=mlir --flashlight-explain 2>&1 | FileCheck %s --check-prefix=SCORE
// RUN: flashlight-compile %s -o %t --emit=mlir --flashlight-explain --block-m=128 --warp-rows=16 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: flashlight-compile %S/../../examples/prefix_lm.mlir -o %t --emit=mlir --flashlight-explain 2>&1 | FileCheck %s --check-prefix=PREFIX
// RUN: flashlight-compile %s -o %t --emit=mlir --flashlight-explain --block-m=256 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not flashlight-compile %s -o %t --emit=mlir --block-m=128 --warp-rows=48 2>&1 | FileCheck %s --check-prefix=BAD

// SCORE: code generator mma.sync, tiles 64x64, 128 threads per block
// WIDE: code generator mma.sync, tiles 128x64, 256 threads per block
// A prefix-LM mask with no score region has partial tiles only on the
// diagonal, like causal: 128-row tiles.
// PREFIX: code generator mma.sync, tiles 128x64, 128 threads per block
// HUGE: code generator mma.sync, tiles 256x64, 256 threads per block
// BAD: error: attn-plan: warp-rows 48 must be 16 or 32 and divide block-m 128

func.func @alibi(%q: tensor<1x2x100x64xbf16>, %k: tensor<1x2x100x64xbf16>,
                 %v: tensor<1x2x100x64xbf16>) -> tensor<1x2x100x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x100x64xbf16>) k(%k : tensor<1x2x100x64xbf16>)
      v(%v : tensor<1x2x100x64xbf16>) scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %d = arith.subi %j, %i : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %slope = arith.constant 0.5 : f32
        %bias = arith.mulf %df, %slope : f32
        %r = arith.addf %s, %bias : f32
        attn.yield %r : f32
      } -> tensor<1x2x100x64xbf16>
  return %o : tensor<1x2x100x64xbf16>
}
