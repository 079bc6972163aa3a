// One batch, one head, and fewer keys than a KV tile: canonicalization folds
// the KV loop and the full slices of K and V (a tensor.cast of the whole
// argument is left). Both code generators used to crash here (null view);
// now the whole argument is the tile.
// RUN: rm -rf %t && flashlight-compile %s -o %t --name=ref --tensor-cores=false --emit=ptx --flashlight-explain 2>&1 | FileCheck %s --check-prefix=REF
// RUN: flashlight-compile %s -o %t --name=mma --emit=ptx --flashlight-explain 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: grep -c "ld.global" %t/ref.ptx
// REF: code generator reference
// MMA: code generator mma.sync
func.func @single_tile(%q: tensor<1x1x16x64xbf16>, %k: tensor<1x1x16x64xbf16>,
                       %v: tensor<1x1x16x64xbf16>) -> tensor<1x1x16x64xbf16> {
  %o = attn.attention q(%q : tensor<1x1x16x64xbf16>) k(%k : tensor<1x1x16x64xbf16>)
      v(%v : tensor<1x1x16x64xbf16>) scale [0.125] normalizer softmax
      score {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
        %c = arith.constant 3.0e+01 : f32
        %x = arith.divf %s, %c : f32
        %t = math.tanh %x : f32
        %r = arith.mulf %t, %c : f32
        attn.yield %r : f32
      } -> tensor<1x1x16x64xbf16>
  return %o : tensor<1x1x16x64xbf16>
}
