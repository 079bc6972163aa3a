//===- Passes.td - Importer passes ------------------------*- tablegen -*-===//

#ifndef FLASHLIGHT_IMPORT_PASSES
#define FLASHLIGHT_IMPORT_PASSES

include "mlir/Pass/PassBase.td"

def ImportStableHLO : Pass<"flashlight-import-stablehlo", "::mlir::ModuleOp"> {
  let summary = "Convert imported StableHLO into linalg, tensor, arith and "
                "math on tensors";
  let description = [{
    Rewrites every `stablehlo` operation (read by the `stablehlo` import
    dialect) into the common input IR of Flashlight's importers:

    * elementwise operations, `compare`, `select`, `clamp`, `convert`, `iota`,
      `broadcast_in_dim`, `transpose` -> `linalg.generic` (all parallel) whose
      body is `arith` / `math` on scalars;
    * `dot_general` -> a contraction `linalg.generic` accumulating in f32 for
      f16/bf16 results (then converted), as XLA does; `reduce` (region or
      `applies` form, several inputs) -> a reduction `linalg.generic` whose
      body is the reducer;
    * `reshape` -> `tensor.collapse_shape` / `tensor.expand_shape`,
      `concatenate` -> `tensor.concat`, `slice` -> `tensor.extract_slice`,
      `gather` -> a `linalg.generic` reading the operand with
      `tensor.extract`, `constant` -> `arith.constant`;
    * `func.call`s of the module's private functions (JAX's `_where`,
      `clip`, `tril` helpers) are inlined first, and the helpers erased.

    Anything else -- an unknown operation, a dynamic shape, a malformed
    attribute -- is an error located at the operation.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def ImportTorch : Pass<"flashlight-import-torch", "::mlir::ModuleOp"> {
  let summary = "Convert imported torch-mlir `torch` dialect programs into "
                "linalg, tensor, arith and math on tensors";
  let description = [{
    Rewrites each function of a torch-mlir program (read by the `torch`
    import dialect, its value tensors already builtin tensors) into the
    common input IR of Flashlight's importers:

    * every ATen call (`torch.aten.<op>[.<overload>]`, or `torch.operator
      "aten.<op>.<overload>"`) is lowered by the same handlers as the
      flashlight-graph JSON importer (docs/json-graph.md lists the
      operators), its arguments read from the `torch.constant.*` and
      `torch.prim.ListConstruct` operations that define them;
    * `torch.vtensor.literal` becomes `arith.constant` (`dense_resource`
      data is kept as it is);
    * `aten.scaled_dot_product_attention` is expanded into the math it
      defines (`attn_mask`, `is_causal`, `scale`, `enable_gqa`), as are the
      decompositions torch-mlir applies.

    Anything else -- an operation that is not an ATen call on tensors, a
    result that is not a tensor, an argument the importer cannot read -- is
    an error located at the operation.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // FLASHLIGHT_IMPORT_PASSES
