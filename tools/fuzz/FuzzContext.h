//===- FuzzContext.h - The context every importer fuzz target uses -*- C++
//-*-===//

#ifndef FLASHLIGHT_TOOLS_FUZZ_FUZZCONTEXT_H
#define FLASHLIGHT_TOOLS_FUZZ_FUZZCONTEXT_H

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"
#include "flashlight/Import/InputChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

namespace flashlight::fuzz {

/// One context for all inputs (single-threaded), with the common input IR's
/// dialects and `Extra...` loaded.
template <typename... Extra> mlir::MLIRContext &context() {
  static mlir::MLIRContext *ctx = [] {
    mlir::DialectRegistry registry;
    registry.insert<attn::AttnDialect, mlir::arith::ArithDialect,
                    mlir::func::FuncDialect, mlir::linalg::LinalgDialect,
                    mlir::math::MathDialect, mlir::tensor::TensorDialect,
                    Extra...>();
    auto *c = new mlir::MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->disableMultithreading();
    return c;
  }();
  return *ctx;
}

/// Verifies an imported module and runs what flashlight-compile runs on it
/// before code generation (`importPasses` first); failures are fine.
inline void raiseImported(
    mlir::ModuleOp module,
    llvm::function_ref<void(mlir::PassManager &)> importPasses = nullptr) {
  if (mlir::failed(mlir::verify(module)))
    return;
  mlir::PassManager pm(module.getContext());
  if (importPasses)
    importPasses(pm);
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addNestedPass<mlir::func::FuncOp>(attn::createAttnRaise());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(attn::createAttnOutline());
  (void)pm.run(module);
}

/// One input of a text importer's target: the bytes as MLIR text, parsed
/// with `ImportDialect` loaded, then `importPasses` and the raise. Text
/// flashlight-compile rejects before parsing (MLIR's parser crashes on it)
/// is skipped.
template <typename ImportDialect>
int fuzzText(const uint8_t *data, size_t size,
             llvm::function_ref<void(mlir::PassManager &)> importPasses) {
  mlir::MLIRContext &ctx = context<ImportDialect>();
  mlir::ScopedDiagnosticHandler silence(
      &ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::ParserConfig config(&ctx);
  // MLIR's lexer relies on a NUL after the text, as files read through
  // MemoryBuffer have; libFuzzer's bytes have none.
  std::string text(reinterpret_cast<const char *>(data), size);
  TextChecks checks = checkText(text);
  if (checks.nesting > kMaxNesting || checks.openStringLine)
    return 0;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, config);
  if (module)
    raiseImported(*module, importPasses);
  return 0;
}

} // namespace flashlight::fuzz

#endif // FLASHLIGHT_TOOLS_FUZZ_FUZZCONTEXT_H
