// RUN: rm -rf %t && flashlight-compile %s -o %t --arch=sm_90a --emit=ptx --tensor-cores --name=sig
// RUN: FileCheck %s < %t/sig.ptx

// sigmoid(s * 0.125 - 4.85) takes exp2 of -log2(e) times that: the
// generator's arithmetic reassociates, so the scale, the bias and -log2(e)
// fold into one FFMA per logit, with no multiply left (wgmma: S in
// registers, then straight to ex2).
// CHECK: .entry sig
// CHECK-NOT: mul.f32
// CHECK: fma.rn.f32
// CHECK-NEXT: ex2.approx.ftz.f32
// CHECK-NOT: mul.f32
// CHECK: ret;
func.func @sig(%q: tensor<2x4x256x64xbf16>, %k: tensor<2x4x256x64xbf16>,
               %v: tensor<2x4x256x64xbf16>) -> tensor<2x4x256x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x256x64xbf16>) k(%k : tensor<2x4x256x64xbf16>)
                      v(%v : tensor<2x4x256x64xbf16>)
         scale [0.125] normalizer sigmoid
         score {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %bias = arith.constant -4.85 : f32
           %r = arith.addf %s, %bias : f32
           attn.yield %r : f32
         } -> tensor<2x4x256x64xbf16>
  return %o : tensor<2x4x256x64xbf16>
}
