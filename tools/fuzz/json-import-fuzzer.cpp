//===- json-import-fuzzer.cpp - libFuzzer target for the JSON importer ----===//
//
// Arbitrary bytes as a flashlight-graph JSON file, through the importer,
// the verifier, attn-raise and attn-outline. Rejections are fine; crashes
// are findings. Built by scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"

#include "flashlight/Import/JSON/JSONGraph.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &ctx = flashlight::fuzz::context();
  ScopedDiagnosticHandler silence(&ctx, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module = flashlight::importJSONGraph(
      StringRef(reinterpret_cast<const char *>(data), size), "fuzz.json", &ctx);
  if (module)
    flashlight::fuzz::raiseImported(*module);
  return 0;
}
