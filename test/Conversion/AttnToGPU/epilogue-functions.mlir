// RUN: flashlight-opt %s --split-input-file --attn-plan="block-m=64 block-n=64" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --canonicalize --cse | FileCheck %s

// A sigmoid gate in the epilogue (Evoformer's): with a bf16 output, its
// division and exp may be approximate (afn), as the store rounds to 2^-9
// anyway; the region's own flags stay. Its reads at column d are paired.
// CHECK-LABEL: gpu.func @gate_bf16
// The gate of the thread's two columns d, d + 1: one load of both.
// CHECK-NOT: memref.load %arg3
// CHECK: %[[BOTH:.*]] = vector.load %arg3[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] {alignment = 4 : i64} : memref<1x2x128x64xbf16, strided<[?, ?, ?, 1]>>, vector<2xbf16>
// CHECK: vector.extract %[[BOTH]][0]
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<reassoc,contract,afn>
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @gate_bf16(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                     %v: tensor<1x2x128x64xbf16>, %g: tensor<1x2x128x64xbf16>)
    -> tensor<1x2x128x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) captures(%g : tensor<1x2x128x64xbf16>)
      scale [0.125] normalizer softmax
      epilogue {
      ^bb0(%x: f32, %b: index, %h: index, %i: index, %d: index,
           %gt: tensor<1x2x128x64xbf16>):
        %gv = tensor.extract %gt[%b, %h, %i, %d] : tensor<1x2x128x64xbf16>
        %gf = arith.extf %gv : bf16 to f32
        %n = arith.negf %gf : f32
        %e = math.exp %n fastmath<nnan> : f32
        %one = arith.constant 1.0 : f32
        %den = arith.addf %e, %one : f32
        %s = arith.divf %one, %den : f32
        %r = arith.mulf %x, %s : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xbf16>
  return %o : tensor<1x2x128x64xbf16>
}

// -----

// An f32 output keeps IEEE division and the accurate exp.
// CHECK-LABEL: gpu.func @gate_f32
// CHECK: math.exp %{{.*}} fastmath<reassoc,contract> : f32
// CHECK: arith.divf %{{.*}}, %{{.*}} fastmath<reassoc,contract> : f32
func.func @gate_f32(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>,
                    %v: tensor<1x2x128x64xbf16>, %g: tensor<1x2x128x64xbf16>)
    -> tensor<1x2x128x64xf32> {
  %o = attn.attention q(%q : tensor<1x2x128x64xbf16>) k(%k : tensor<1x2x128x64xbf16>)
      v(%v : tensor<1x2x128x64xbf16>) captures(%g : tensor<1x2x128x64xbf16>)
      scale [0.125] normalizer softmax
      epilogue {
      ^bb0(%x: f32, %b: index, %h: index, %i: index, %d: index,
           %gt: tensor<1x2x128x64xbf16>):
        %gv = tensor.extract %gt[%b, %h, %i, %d] : tensor<1x2x128x64xbf16>
        %gf = arith.extf %gv : bf16 to f32
        %n = arith.negf %gf : f32
        %e = math.exp %n : f32
        %one = arith.constant 1.0 : f32
        %den = arith.addf %e, %one : f32
        %s = arith.divf %one, %den : f32
        %r = arith.mulf %x, %s : f32
        attn.yield %r : f32
      } -> tensor<1x2x128x64xf32>
  return %o : tensor<1x2x128x64xf32>
}
