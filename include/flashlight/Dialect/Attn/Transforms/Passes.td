//===- Passes.td - attn dialect passes --------------------*- tablegen -*-===//

#ifndef FLASHLIGHT_ATTN_PASSES
#define FLASHLIGHT_ATTN_PASSES

include "mlir/Pass/PassBase.td"

def AttnExplain : Pass<"attn-explain"> {
  let summary = "Report, as remarks, what each attn op computes and how";
  let description = [{
    Emits one remark per `attn.attention`, `attn.online_step` and
    `attn.online_finalize`, located at the op: the number of logit branches,
    the normalizer, GQA grouping, sinks and log-sum-exp outputs, and the
    result of the mask/score analysis (mask structure and its parameters, how
    each logit is modified, and how every captured tensor is indexed). It
    changes nothing; it is what `--flashlight-explain` prints.

    ```
    remark: attn.attention: 1 branch, softmax, heads 8/2, mask=causal(offset=0)
            score=[identity]
    ```
  }];
}

#endif // FLASHLIGHT_ATTN_PASSES
