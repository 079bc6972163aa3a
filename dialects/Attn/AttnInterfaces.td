//===- AttnInterfaces.td - attn op interfaces -------------*- tablegen -*-===//

#ifndef FLASHLIGHT_ATTN_INTERFACES
#define FLASHLIGHT_ATTN_INTERFACES

include "mlir/IR/OpBase.td"

def Attn_ScoreProgramOpInterface : OpInterface<"ScoreProgramOpInterface"> {
  let cppNamespace = "::flashlight::attn";
  let description = [{
    An op that evaluates attention scores: it owns a score region and a mask
    region over (b, h, q_idx, kv_idx) and a list of captured tensors those
    regions read. `attn.attention` and `attn.online_step` implement it, so the
    mask/score analysis and the kernel generator treat both alike.
  }];
  let methods = [
    InterfaceMethod<"Number of logit branches (softmaxes sharing one KV loop).",
      "unsigned", "getNumLogitBranches", (ins), [{
        return $_op.getNumBranches(); }]>,
    InterfaceMethod<"Region mapping logits and indices to new logits; empty "
      "means identity.", "::mlir::Region &", "getScoreRegion", (ins), [{
        return $_op.getScore(); }]>,
    InterfaceMethod<"Region mapping indices to i1 (true = keep); empty means "
      "no mask.", "::mlir::Region &", "getMaskRegion", (ins), [{
        return $_op.getMask(); }]>,
    InterfaceMethod<"Tensors the regions read.",
      "::mlir::OperandRange", "getCapturedValues", (ins), [{
        return $_op.getCaptures(); }]>,
  ];
}

#endif // FLASHLIGHT_ATTN_INTERFACES
