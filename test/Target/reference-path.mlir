// A program without attention is not compiled; --flashlight-explain says
// which step of attn-raise failed.
// RUN: not flashlight-compile %s -o %t --emit=mlir --flashlight-explain 2>&1 | FileCheck %s

// CHECK: remark: attn-raise: result 0 is not raised: the PV weights are neither a softmax (E / sum E) nor a sigmoid
// CHECK: error: no attention found in
func.func @matmul(%a: tensor<128x64xf32>, %b: tensor<64x32xf32>) -> tensor<128x32xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<128x32xf32>
  %cf = linalg.fill ins(%zero : f32) outs(%c0 : tensor<128x32xf32>) -> tensor<128x32xf32>
  %c = linalg.matmul ins(%a, %b : tensor<128x64xf32>, tensor<64x32xf32>) outs(%cf : tensor<128x32xf32>) -> tensor<128x32xf32>
  return %c : tensor<128x32xf32>
}
