//===- StableHLODialect.td - StableHLO import dialect -----*- tablegen -*-===//
//
// Flashlight's own reading of StableHLO text: just enough to import the
// attention programs JAX exports, without linking StableHLO.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_STABLEHLO_DIALECT
#define FLASHLIGHT_STABLEHLO_DIALECT

include "mlir/IR/OpBase.td"

def StableHLO_Dialect : Dialect {
  let name = "stablehlo";
  let cppNamespace = "::flashlight::shlo";
  let summary = "Import-only reading of StableHLO text (JAX's export format)";
  let description = [{
    An import dialect: it claims the `stablehlo` namespace so that MLIR's
    parser accepts the text `jax.jit(f).lower(...).as_text()` prints, in the
    pretty form and in the generic form, and nothing more. Its operations
    are *unregistered* operations of this dialect: parse hooks turn each
    pretty syntax (`stablehlo.dot_general %a, %b, batching_dims = [0] x [0],
    ...`) into the generic operation with StableHLO's attribute names
    (`dot_dimension_numbers`, ...), and the dialect's attribute parser reads
    `#stablehlo.dot<...>`, `#stablehlo<comparison_direction GE>` and the like
    into builtin attributes. Operations are validated, with a location, when
    `flashlight-import-stablehlo` converts them to linalg/tensor/arith/math;
    no verifier runs before that.

    ```mlir
    %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1],
         contracting_dims = [3] x [3]
         : (tensor<2x4x128x64xbf16>, tensor<2x4x128x64xbf16>)
         -> tensor<2x4x128x128xf32>
    ```
  }];
  let useDefaultAttributePrinterParser = 0;
  let extraClassDeclaration = [{
    /// Reads `#stablehlo.dot<...>`, `#stablehlo<comparison_direction EQ>`
    /// and the other attributes of the generic form as builtin attributes.
    ::mlir::Attribute parseAttribute(::mlir::DialectAsmParser &parser,
                                     ::mlir::Type type) const override;
    /// Parsers of the pretty forms, by operation name.
    std::optional<ParseOpHook>
    getParseOperationHook(::llvm::StringRef opName) const override;
  }];
}

def CHLO_Dialect : Dialect {
  let name = "chlo";
  let cppNamespace = "::flashlight::shlo";
  let summary = "Import-only reading of CHLO, the client ops JAX prints beside StableHLO";
  let description = [{
    JAX prints a few operations in the `chlo` namespace (`chlo.square` from
    `jnp.square` in layer and RMS norms, `chlo.erf` from GELU, `chlo.is_inf`).
    Like the `stablehlo` import dialect, this one only claims the namespace;
    its operations are unregistered and `flashlight-import-stablehlo`
    decomposes each into arith/math scalar code, as upstream's
    CHLO-to-StableHLO legalization defines them (`square(x) = x * x`).

    ```mlir
    %0 = chlo.square %x : tensor<2x8xf32> -> tensor<2x8xf32>
    ```
  }];
  let extraClassDeclaration = [{
    /// The parser of `chlo.OP operands attr-dict : T -> R`.
    std::optional<ParseOpHook>
    getParseOperationHook(::llvm::StringRef opName) const override;
  }];
}

#endif // FLASHLIGHT_STABLEHLO_DIALECT
