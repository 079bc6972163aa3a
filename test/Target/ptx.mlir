// REQUIRES: ptxas
// RUN: rm -rf %t && flashlight-compile %s -o %t --arch=sm_80,sm_90a
// RUN: FileCheck %s --check-prefix=PTX80 < %t/ptx.sm_80.ptx
// RUN: FileCheck %s --check-prefix=PTX90 < %t/ptx.sm_90a.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST < %t/ptx.json

// One kernel per attention, for the named chip, with no local memory (no
// spilled arrays), its logit a warp-wide butterfly sum, exp from libdevice
// (no unresolved calls are left for ptxas).
// PTX80: .target sm_80
// PTX80: .visible .entry causal_softcap(
// PTX80-NOT: .local
// PTX80-NOT: .extern .func
// PTX80: shfl.sync.bfly.b32
// PTX80-NOT: .entry
// PTX90: .target sm_90a
// PTX90-COUNT-1: .entry

// The manifest: one cubin per arch, ptxas reports no spill and no stack;
// every global buffer is a parameter (q, k, v, out), nothing M x N.
// MANIFEST: "sm_80": {
// MANIFEST: "cubin": "ptx.sm_80.cubin"
// MANIFEST: "spill_store_bytes": 0,
// MANIFEST-NEXT: "stack_frame_bytes": 0
// MANIFEST: "sm_90a": {
// MANIFEST: "spill_store_bytes": 0,
// MANIFEST-NEXT: "stack_frame_bytes": 0
// MANIFEST: "kernel": "causal_softcap"
// MANIFEST: "name": "q0"
// MANIFEST: "name": "k0"
// MANIFEST: "name": "v"
// MANIFEST: "direction": "out"
// MANIFEST: "name": "out"
// MANIFEST-NOT: "name":

func.func @causal_softcap(%q: tensor<1x2x64x64xbf16>, %k: tensor<1x2x64x64xbf16>,
                          %v: tensor<1x2x64x64xbf16>) -> tensor<1x2x64x64xbf16> {
  %o = attn.attention q(%q : tensor<1x2x64x64xbf16>) k(%k : tensor<1x2x64x64xbf16>)
      v(%v : tensor<1x2x64x64xbf16>) scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 20.0 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %t, %c : f32
        attn.yield %r : f32
      }
      mask {
      ^bb0(%b: index, %h: index, %i: index, %j: index):
        %keep = arith.cmpi sge, %i, %j : index
        attn.yield %keep : i1
      } -> tensor<1x2x64x64xbf16>
  return %o : tensor<1x2x64x64xbf16>
}
