// A program without attention takes the reference path: --flashlight-explain
// says which step of attn-raise failed and which path was taken, and the
// manifest's entry runs the function as steps of simple kernels.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=matmul --emit=ptx --arch=sm_80 --flashlight-explain 2>&1 | FileCheck %s
// RUN: python3 -c "import json, sys; e = json.load(open(sys.argv[1]))['entry']; print(json.dumps([s['op'] for s in e['steps']])); print(e['steps'][-1]['args'], e['steps'][-1]['results'], e['results'], e['archs']['sm_80']['ptx'])" %t/matmul.json | FileCheck %s --check-prefix=STEPS
// RUN: grep -c "^.visible .entry host" %t/matmul.host.sm_80.ptx | FileCheck %s --check-prefix=PTX

// CHECK: remark: attn-raise: result 0 is not raised: the PV weights are neither a softmax (E / sum E) nor a sigmoid
// CHECK: remark: no attention found: the function takes the reference path (one simple kernel per operation)

// An empty output, the fill's kernel, the matmul's kernel (inputs a, b,
// the filled init; result value 4).
// STEPS: ["empty", "kernel", "kernel"]
// STEPS: [0, 1, 3, 4] [4] [4] matmul.host.sm_80.ptx
// PTX: 2
func.func @matmul(%a: tensor<128x64xf32>, %b: tensor<64x32xf32>) -> tensor<128x32xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = tensor.empty() : tensor<128x32xf32>
  %cf = linalg.fill ins(%zero : f32) outs(%c0 : tensor<128x32xf32>) -> tensor<128x32xf32>
  %c = linalg.matmul ins(%a, %b : tensor<128x64xf32>, tensor<64x32xf32>) outs(%cf : tensor<128x32xf32>) -> tensor<128x32xf32>
  return %c : tensor<128x32xf32>
}
