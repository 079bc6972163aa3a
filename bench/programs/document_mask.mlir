// Document (packed-sequence) masking: a query sees the keys of its own
// document, causally. The document id of every position is a captured tensor,
// so the mask is data-dependent.

func.func @document_mask(%q: tensor<2x4x128x64xbf16>,
                         %k: tensor<2x4x128x64xbf16>,
                         %v: tensor<2x4x128x64xbf16>,
                         %doc: tensor<2x128xi32>) -> tensor<2x4x128x64xbf16> {
  %o = attn.attention q(%q : tensor<2x4x128x64xbf16>)
                      k(%k : tensor<2x4x128x64xbf16>)
                      v(%v : tensor<2x4x128x64xbf16>)
                      captures(%doc : tensor<2x128xi32>)
         scale [0.125] normalizer softmax
         mask {
         ^bb0(%b: index, %h: index, %i: index, %j: index,
              %ids: tensor<2x128xi32>):
           %di = tensor.extract %ids[%b, %i] : tensor<2x128xi32>
           %dj = tensor.extract %ids[%b, %j] : tensor<2x128xi32>
           %same = arith.cmpi eq, %di, %dj : i32
           %causal = arith.cmpi sge, %i, %j : index
           %keep = arith.andi %same, %causal : i1
           attn.yield %keep : i1
         } -> tensor<2x4x128x64xbf16>
  return %o : tensor<2x4x128x64xbf16>
}
