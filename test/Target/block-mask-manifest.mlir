// A document mask gets a block-mask pre-kernel: the manifest names it, per
// arch, and says which indices the mask reads; the Python runtime sizes the
// buffer from the loaded arch's tiles.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=doc --emit=ptx --arch=sm_80,sm_90a
// RUN: FileCheck %s --input-file=%t/doc.json
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t/doc.sm_90a.ptx
// RUN: python3 -c "import json, sys; sys.path.insert(0, sys.argv[1]); import flashlight as f; m = json.load(open(sys.argv[2])); [print(f._block_mask_shape(f._geometry(m, a), [2, 4, 1000], [2, 4, 1000])) for a in ('doc.sm_90a.ptx', 'doc.sm_80.ptx')]" %S/../../python %t/doc.json | FileCheck %s --check-prefix=PYTHON
// RUN: flashlight-compile %s -o %t --name=vote --emit=mlir --arch=sm_90a --block-mask=false
// RUN: FileCheck %s --check-prefix=VOTE --input-file=%t/vote.json

// CHECK: "archs": {
// CHECK: "sm_80": {
// CHECK: "block_mask": {
// CHECK-NEXT: "batch": true,
// CHECK-NEXT: "block": [
// CHECK-NEXT: 128,
// CHECK: "heads": false,
// CHECK-NEXT: "kernel": "doc_block_mask",
// CHECK: "block_n": 64,
// CHECK: "sm_90a": {
// CHECK: "block_mask": {
// CHECK: "kernel": "doc_block_mask",
// CHECK: "block_n": 128,
// CHECK: "codegen": "wgmma"

// Both kernels in one module.
// PTX-DAG: .entry doc_block_mask(
// PTX-DAG: .entry doc(

// sm_90a: 128 x 128 tiles; sm_80: 64 x 64.
// PYTHON: [2, 1, 8, 8]
// PYTHON-NEXT: [2, 1, 16, 16]

// Without the block mask, the tile vote keeps 64 x 64 tiles.
// VOTE: "block_m": 64,
// VOTE-NEXT: "block_mask": null,
// VOTE-NEXT: "block_n": 64,

func.func @doc(%q: tensor<2x4x1000x64xbf16>, %k: tensor<2x4x1000x64xbf16>,
               %v: tensor<2x4x1000x64xbf16>,
               %ids: tensor<2x1000xi32>) -> tensor<2x4x1000x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x1000x64xbf16>) k(%k : tensor<2x4x1000x64xbf16>)
      v(%v : tensor<2x4x1000x64xbf16>) captures(%ids : tensor<2x1000xi32>)
      scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<2x1000xi32>):
        %di = tensor.extract %d[%b, %i] : tensor<2x1000xi32>
        %dj = tensor.extract %d[%b, %j] : tensor<2x1000xi32>
        %same = arith.cmpi eq, %di, %dj : i32
        %causal = arith.cmpi sge, %i, %j : index
        %keep = arith.andi %same, %causal : i1
        attn.yield %keep : i1
      } -> tensor<2x4x1000x64xbf16>
  return %o : tensor<2x4x1000x64xbf16>
}
