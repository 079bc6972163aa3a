// Bad input and a missing ptxas are clear errors, never crashes.
// RUN: not flashlight-compile %s -o %t --arch=sm_5x 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not flashlight-compile %s -o %t --arch=sm_75 2>&1 | FileCheck %s --check-prefix=ARCH75
// RUN: not flashlight-compile %s -o %t --arch=sm_80,sm_100a 2>&1 | FileCheck %s --check-prefix=ARCH100
// RUN: not flashlight-compile %s -o %t --arch=sm_120 2>&1 | FileCheck %s --check-prefix=ARCH120
// RUN: not flashlight-compile %s -o %t --emit=sass 2>&1 | FileCheck %s --check-prefix=EMIT
// RUN: not flashlight-compile %s -o %t --ptxas=%t.nonexistent/ptxas 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: not flashlight-compile %s.missing -o %t 2>&1 | FileCheck %s --check-prefix=INPUT
// RUN: not flashlight-compile %s -o %t --emit=ptx --q-len=10 --kv-len=20 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: flashlight-compile %s -o %t --emit=mlir --print-ir-after=attn-tile 2>&1 | FileCheck %s --check-prefix=PRINT

// ARCH: error: --arch=sm_5x is not supported: Flashlight generates code for sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a (sm_80 PTX runs on newer GPUs through the driver's JIT)
// ARCH75: error: --arch=sm_75 is not supported
// ARCH100: error: --arch=sm_100a is not supported
// ARCH120: error: --arch=sm_120 is not supported
// EMIT: error: --emit must be mlir, ptx or cubin, got 'sass'
// PTXAS: error: ptxas not found at
// INPUT: error: cannot open input file
// SHAPE: error: attn-specialize: dimension 0 of capture #0 is indexed by roles of different new sizes (10 and 20)
// PRINT: IR Dump After AttnTile (attn-tile)
// PRINT: scf.forall

func.func @doc(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>,
               %v: tensor<1x2x16x8xf16>, %doc: tensor<16xi32>)
    -> tensor<1x2x16x8xf16> {
  %o = attn.attention q(%q : tensor<1x2x16x8xf16>) k(%k : tensor<1x2x16x8xf16>)
      v(%v : tensor<1x2x16x8xf16>) captures(%doc : tensor<16xi32>)
      scale [0.5] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %ids: tensor<16xi32>):
        %di = tensor.extract %ids[%i] : tensor<16xi32>
        %dj = tensor.extract %ids[%j] : tensor<16xi32>
        %keep = arith.cmpi eq, %di, %dj : i32
        attn.yield %keep : i1
      } -> tensor<1x2x16x8xf16>
  return %o : tensor<1x2x16x8xf16>
}
