//===- json-import-fuzzer.cpp - libFuzzer target for the JSON importer ----===//
//
// Arbitrary bytes as a flashlight-graph JSON file, through the importer,
// the verifier, attn-raise and attn-outline. Rejections are fine; crashes
// are findings. Built by scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"
#include "flashlight/Import/JSON/JSONGraph.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

static MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registry.insert<flashlight::attn::AttnDialect, arith::ArithDialect,
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
  ScopedDiagnosticHandler silence(&ctx, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = flashlight::importJSONGraph(
      StringRef(reinterpret_cast<const char *>(data), size), "fuzz.json", &ctx);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager pm(&ctx);
  pm.addPass(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(flashlight::attn::createAttnRaise());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(flashlight::attn::createAttnOutline());
  (void)pm.run(*module);
  return 0;
}
