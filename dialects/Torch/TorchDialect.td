//===- TorchDialect.td - torch-mlir import dialect --------*- tablegen -*-===//
//
// Flashlight's own reading of torch-mlir's `torch` dialect text: just enough
// to import the attention programs torch-mlir exports, without linking
// torch-mlir.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_TORCH_DIALECT
#define FLASHLIGHT_TORCH_DIALECT

include "mlir/IR/OpBase.td"

def Torch_Dialect : Dialect {
  let name = "torch";
  let cppNamespace = "::flashlight::torchimport";
  let summary = "Import-only reading of torch-mlir's `torch` dialect text";
  let description = [{
    An import dialect: it claims the `torch` namespace so that MLIR's parser
    accepts the text torch-mlir prints for its `torch` backend contract
    (`torch_mlir.fx.export_and_import(..., output_type="torch")`), in the
    pretty form and in the generic form, and nothing more.

    * Types: `!torch.vtensor<[2,4,128,64],bf16>` is read as the builtin
      `tensor<2x4x128x64xbf16>` (signed and unsigned integer dtypes become
      signless: `si64` is `i64`). Every other torch type (`!torch.int`,
      `!torch.list<int>`, `!torch.none`, `!torch.Device`, ...) is an opaque
      type of this dialect; it only appears between the constants and the
      calls that read them. Unranked, dynamic and non-value tensors
      (`!torch.tensor`) are rejected with a location.
    * Operations are *unregistered* operations of this dialect. Parse hooks
      read the pretty forms: `torch.constant.{int,float,bool,str,device,none}`
      (the value in a `value` attribute), `torch.vtensor.literal(attr)`,
      `torch.prim.ListConstruct`, `torch.operator "name"(...)`, and every
      other operation as `operands attr-dict : types -> types`.

    `flashlight-import-torch` converts the ATen calls to linalg, tensor,
    arith and math; no verifier runs before that.

    ```mlir
    %int1 = torch.constant.int 1
    %0 = torch.aten.transpose.int %k, %int1, %int2
         : !torch.vtensor<[2,4,128,64],bf16>, !torch.int, !torch.int
         -> !torch.vtensor<[2,4,64,128],bf16>
    ```
  }];
  let useDefaultTypePrinterParser = 0;
  let extraClassDeclaration = [{
    /// Reads `!torch.vtensor<[dims],dtype>` as a builtin tensor type and
    /// other torch types as opaque types.
    ::mlir::Type parseType(::mlir::DialectAsmParser &parser) const override;
    /// Parsers of the pretty forms, by operation name.
    std::optional<ParseOpHook>
    getParseOperationHook(::llvm::StringRef opName) const override;
  }];
}

#endif // FLASHLIGHT_TORCH_DIALECT
