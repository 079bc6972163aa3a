// RUN: flashlight-opt %s --attn-plan="arch=sm_90a" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize | FileCheck %s --check-prefix=RUNTIME
// RUN: flashlight-opt %s --attn-plan="arch=sm_90a static-strides=true" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize | FileCheck %s --check-prefix=STATIC
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=biased --emit=ptx --arch=sm_80,sm_90a && FileCheck %s --check-prefix=PTX --input-file=%t/biased.sm_90a.ptx
// RUN: python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print(m['runtime_strides'], [(c, a['runtime_strides'], a['plan']['runtime_strides']) for c, a in sorted(m['archs'].items())])" %t/biased.json | FileCheck %s --check-prefix=MANIFEST

// By default (the plan's runtime_strides) every tensor of the kernel takes
// its strides from its memref descriptor, the innermost one 1: Q, K, V in
// any layout whose head dim is contiguous, the output written where the
// caller's view says, a captured bias read through its own strides.
// RUNTIME: gpu.func @biased(%{{.*}}: memref<2x4x128x64xbf16, strided<[?, ?, ?, 1]>>, %{{.*}}: memref<2x4x128x64xbf16, strided<[?, ?, ?, 1]>>, %{{.*}}: memref<2x4x128x64xbf16, strided<[?, ?, ?, 1]>>, %{{.*}}: memref<4x128x128xf32, strided<[?, ?, 1]>>, %{{.*}}: memref<2x4x128x64xbf16, strided<[?, ?, ?, 1]>>) kernel
// RUNTIME-SAME: runtime_strides = true
// With static-strides, the contiguous strides are compiled in.
// STATIC: gpu.func @biased(%{{.*}}: memref<2x4x128x64xbf16>, %{{.*}}: memref<2x4x128x64xbf16>, %{{.*}}: memref<2x4x128x64xbf16>, %{{.*}}: memref<4x128x128xf32>, %{{.*}}: memref<2x4x128x64xbf16>) kernel
// STATIC-SAME: runtime_strides = false
// The kernel reads strides from its parameters: a rank-4 descriptor is
// (allocated, aligned, offset, 4 sizes, 4 strides), so Q's outer strides
// are parameters 7 to 9 (the static kernel reads only the pointers).
// PTX-DAG: ld.param.b64 {{.*}}, [biased_param_7];
// PTX-DAG: ld.param.b64 {{.*}}, [biased_param_8];
// PTX-DAG: ld.param.b64 {{.*}}, [biased_param_9];
// The manifest says so, per arch and at the top level.
// MANIFEST: True [('sm_80', True, True), ('sm_90a', True, True)]
func.func @biased(%q: tensor<2x4x128x64xbf16>, %k: tensor<2x4x128x64xbf16>,
                  %v: tensor<2x4x128x64xbf16>, %bias: tensor<4x128x128xf32>)
    -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
                      captures(%bias : tensor<4x128x128xf32>)
         scale [0.125] normalizer softmax
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %t: tensor<4x128x128xf32>):
           %x = tensor.extract %t[%h, %i, %j] : tensor<4x128x128xf32>
           %r = arith.addf %s, %x : f32
           attn.yield %r : f32
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
