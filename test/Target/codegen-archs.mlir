// Each arch gets its own kernel and tiles: wgmma on sm_90a (two warpgroups
// for 128 rows and a producer warpgroup; 128 keys per tile at head dim 128),
// mma.sync on sm_80; the manifest records each arch's launch geometry and
// kernel IR, and the first arch's at its top level.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=causal --emit=mlir --arch=sm_80,sm_90a --flashlight-explain 2>&1 | FileCheck %s --check-prefix=EXPLAIN
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/causal.json
// RUN: FileCheck %s --check-prefix=HOPPER-IR < %t/causal.sm_90a.mlir
// --wgmma=false keeps mma.sync on sm_90a; both archs then share one kernel IR.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=causal --emit=mlir --arch=sm_80,sm_90a --wgmma=false --flashlight-explain 2>&1 | FileCheck %s --check-prefix=NOWGMMA
// RUN: not ls %t/causal.sm_90a.mlir
// The Python runtime launches each arch's artifact with that arch's geometry.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=causal --emit=ptx --arch=sm_80,sm_90a
// RUN: python3 -c "import json, sys; sys.path.insert(0, sys.argv[1]); import flashlight; m = json.load(open(sys.argv[2])); print(flashlight._geometry(m, 'causal.sm_90a.ptx')); print(flashlight._geometry(m, 'causal.sm_80.ptx'))" %S/../../python %t/causal.json | FileCheck %s --check-prefix=PYTHON

// EXPLAIN: code generator mma.sync, tiles 128x64, 128 threads per block for sm_80
// EXPLAIN: code generator wgmma, tiles 128x128, 384 threads per block for sm_90a

// MANIFEST: "archs": {
// MANIFEST: "sm_80": {
// MANIFEST: "block": [
// MANIFEST-NEXT: 128,
// MANIFEST: "codegen": "mma.sync"
// MANIFEST: "kernel_ir": "causal.mlir"
// MANIFEST: "sm_90a": {
// MANIFEST: "block": [
// MANIFEST-NEXT: 384,
// MANIFEST: "block_n": 128,
// MANIFEST: "codegen": "wgmma"
// MANIFEST: "dynamic_shared_memory": 164928
// MANIFEST: "kernel_ir": "causal.sm_90a.mlir"
// MANIFEST: "pointer_alignment": 16
// MANIFEST: "tensor_maps": [
// MANIFEST-NEXT: {
// MANIFEST-NEXT: "box": [
// MANIFEST-NEXT: 64,
// MANIFEST-NEXT: 128
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "param": 1
// MANIFEST: "param": 2
// MANIFEST: "codegen": "mma.sync"

// HOPPER-IR: generator = wgmma
// HOPPER-IR: nvvm.wgmma.mma_async

// PYTHON: {'block_m': 128, 'block_n': 128, 'block': [384, 1, 1], 'dynamic_shared_memory': 164928, 'block_mask': None, 'pointer_alignment': 16, 'runtime_strides': True, 'aligned': None, 'persistent': False, 'tile_counter': False, 'tensor_maps': [{'box': [64, 128], 'param': 1}, {'box': [64, 128], 'param': 2}]}
// PYTHON-NEXT: {'block_m': 128, 'block_n': 64, 'block': [128, 1, 1], 'dynamic_shared_memory': 69632, 'block_mask': None, 'pointer_alignment': 16, 'runtime_strides': True, 'aligned': None, 'persistent': False, 'tile_counter': False, 'tensor_maps': []}

// NOWGMMA: code generator mma.sync, tiles 128x64, 128 threads per block for sm_80
// NOWGMMA: code generator mma.sync, tiles 128x64, 128 threads per block for sm_90a

func.func @causal(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>,
                  %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  %o = attn.attention q(%q : tensor<1x2x256x128xbf16>) k(%k : tensor<1x2x256x128xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) scale [0.088] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi uge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}
