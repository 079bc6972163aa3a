// RUN: flashlight-opt %s --attn-plan="arch=sm_90a block-m=128 block-n=128" --attn-online-softmax --attn-tile --canonicalize --cse --attn-to-gpu --verify-diagnostics

// Four branches at D = 128 on 128 x 128 tiles do not fit in shared memory:
// the remark says so (the reference generator cannot take 128-row tiles
// either, hence the error).
func.func @four(%q: tensor<1x2x256x128xbf16>, %k: tensor<1x2x256x128xbf16>,
                %v: tensor<1x2x256x128xbf16>) -> tensor<1x2x256x128xbf16> {
  // expected-remark @+2 {{tensor-core path not taken: its tiles (4 logit branches) need}}
  // expected-error @+1 {{block-m 128 needs 4096 threads per block}}
  %o = attn.attention q(%q, %q, %q, %q : tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16>)
      k(%k, %k, %k, %k : tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16>, tensor<1x2x256x128xbf16>)
      v(%v : tensor<1x2x256x128xbf16>) scale [0.1, 0.1, 0.1, 0.1] normalizer softmax
      epilogue {
      ^bb0(%o1: f32, %o2: f32, %o3: f32, %o4: f32, %b: index, %h: index, %i: index, %d: index):
        %r = arith.subf %o1, %o2 : f32
        %s = arith.addf %o3, %o4 : f32
        %t = arith.addf %r, %s : f32
        attn.yield %t : f32
      } -> tensor<1x2x256x128xbf16>
  return %o : tensor<1x2x256x128xbf16>
}
