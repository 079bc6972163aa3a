// The pipeline takes the tensor-core generator when the program fits and
// says which one it used; --tensor-cores=false forces the reference one.
// No score region and a causal mask: 128-row tiles, 32 rows per warp.
// RUN: flashlight-compile %s -o %t --emit=mlir --flashlight-explain 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: flashlight-compile %s -o %t --emit=mlir --flashlight-explain --tensor-cores=false 2>&1 | FileCheck %s --check-prefix=REF
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/codegen-choice.json

// MMA: remark: attn.attention: 1 branch, softmax, heads 4/2, mask=causal(offset=0) score=[identity]
// MMA: code generator mma.sync, tiles 128x64, 128 threads per block
// REF: code generator reference, tiles 4x32, 128 threads per block
// MANIFEST: "codegen": "reference"

func.func @gqa(%q: tensor<1x4x100x64xf16>, %k: tensor<1x2x100x64xf16>,
               %v: tensor<1x2x100x64xf16>) -> tensor<1x4x100x64xf16> {
  %o = attn.attention q(%q : tensor<1x4x100x64xf16>) k(%k : tensor<1x2x100x64xf16>)
      v(%v : tensor<1x2x100x64xf16>) scale [0.125] normalizer softmax
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<1x4x100x64xf16>
  return %o : tensor<1x4x100x64xf16>
}
