// An imported program with dynamic dimensions is refused at compile time
// (runtime shapes come from --runtime-shapes-from, runtime-shapes.mlir),
// not compiled with exit 0. Attn IR may say `?` (dynamic-attn.mlir).
// RUN: not flashlight-compile %s -o %t --emit=ptx 2>&1 | FileCheck %s
// CHECK: dynamic-shapes.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: input 0 of 'dyn' has type 'tensor<?x4x?x64xbf16>': dynamic shapes are not imported; export the program at static shapes (for kernels that take runtime shapes, also at other shapes, and pass that with --runtime-shapes-from)

func.func @dyn(%q: tensor<?x4x?x64xbf16>) -> tensor<?x4x?x64xbf16> {
  return %q : tensor<?x4x?x64xbf16>
}

// JAX's symbolic shapes (custom_call shape assertions read, then refused).
// RUN: not flashlight-compile %S/Inputs/jax-symbolic-shapes.stablehlo.mlir -o %t --emit=ptx 2>&1 | FileCheck %s --check-prefix=JAX
// JAX: jax-symbolic-shapes.stablehlo.mlir:0:0: error: input 0 of 'main' has type 'tensor<?x4x?x64xbf16>': dynamic shapes are not imported

