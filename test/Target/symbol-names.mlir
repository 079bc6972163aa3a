// Kernel symbols come from function names; a name that is not a PTX
// identifier (an exported lambda, Unicode) is sanitized, never an LLVM abort.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name lambda --emit=ptx
// RUN: FileCheck %s --input-file=%t/lambda.json --check-prefix=MANIFEST
// RUN: FileCheck %s --input-file=%t/lambda.ptx --check-prefix=PTX
// RUN: cat %t/lambda.sm_90a.ptx | FileCheck %s --check-prefix=PTX

// Both generators by default: sm_80 (mma.sync) and sm_90a (wgmma).
// MANIFEST-DAG: "kernel": "_lambda_"
// MANIFEST-DAG: "sm_80":
// MANIFEST-DAG: "sm_90a":
// PTX: .entry _lambda_(

func.func @"<lambda>"(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x2x64x64xbf16>,
                      %v: tensor<1x2x64x64xbf16>) -> tensor<1x2x64x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x64x64xbf16>) k(%k : tensor<1x2x64x64xbf16>)
      v(%v : tensor<1x2x64x64xbf16>) scale [0.125] normalizer softmax
      -> tensor<1x2x64x64xbf16>
  return %o : tensor<1x2x64x64xbf16>
}
