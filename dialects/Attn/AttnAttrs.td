//===- AttnAttrs.td - attn dialect attributes -------------*- tablegen -*-===//

#ifndef FLASHLIGHT_ATTN_ATTRS
#define FLASHLIGHT_ATTN_ATTRS

include "Attn/AttnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Attn_NormalizerSoftmax : I32EnumAttrCase<"softmax", 0>;
def Attn_NormalizerSigmoid : I32EnumAttrCase<"sigmoid", 1>;
def Attn_NormalizerNone : I32EnumAttrCase<"none", 2>;

def Attn_Normalizer : I32EnumAttr<"Normalizer",
    "how scores become probabilities",
    [Attn_NormalizerSoftmax, Attn_NormalizerSigmoid, Attn_NormalizerNone]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::flashlight::attn";
}

def Attn_NormalizerAttr : EnumAttr<Attn_Dialect, Attn_Normalizer,
                                   "normalizer"> {
  let summary = "Normalizer of the scores: softmax (over kv), sigmoid or none";
  let assemblyFormat = "$value";
}

#endif // FLASHLIGHT_ATTN_ATTRS
