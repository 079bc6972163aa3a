//===- stablehlo-import-fuzzer.cpp - libFuzzer target for the importer ----===//
//
// Feeds arbitrary text through what `flashlight-compile` does with an
// imported program before code generation: parse (StableHLO import dialect,
// pretty and generic forms), verify, flashlight-import-stablehlo,
// canonicalize, attn-raise, attn-outline. Any input may be rejected with a
// diagnostic; none may crash. Built by scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"
#include "flashlight/Import/Passes.h"
#include "flashlight/Import/StableHLO/StableHLODialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

static MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registry.insert<flashlight::attn::AttnDialect,
                    flashlight::shlo::StableHLODialect, arith::ArithDialect,
                    func::FuncDialect, linalg::LinalgDialect, math::MathDialect,
                    tensor::TensorDialect>();
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->disableMultithreading();
    return c;
  }();
  return *ctx;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &ctx = context();
  // Rejections are expected; only crashes are findings.
  ScopedDiagnosticHandler silence(&ctx, [](Diagnostic &) { return success(); });
  ParserConfig config(&ctx);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      StringRef(reinterpret_cast<const char *>(data), size), config);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager pm(&ctx);
  pm.addPass(flashlight::createImportStableHLO());
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(flashlight::attn::createAttnRaise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(flashlight::attn::createAttnOutline());
  (void)pm.run(*module);
  return 0;
}
