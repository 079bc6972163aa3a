//===- torch-import-fuzzer.cpp - libFuzzer target for the torch importer -===//
//
// Feeds arbitrary text through what `flashlight-compile` does with an
// imported program before code generation: parse (torch import dialect,
// pretty and generic forms), verify, flashlight-import-torch,
// canonicalize, attn-raise, attn-outline. Any input may be rejected with a
// diagnostic; none may crash. Built by scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"

#include "flashlight/Import/InputChecks.h"
#include "flashlight/Import/Passes.h"
#include "flashlight/Import/Torch/TorchDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &ctx =
      flashlight::fuzz::context<flashlight::torchimport::TorchDialect>();
  ScopedDiagnosticHandler silence(&ctx, [](Diagnostic &) { return success(); });
  ParserConfig config(&ctx);
  // MLIR's lexer relies on a NUL after the text, as files read through
  // MemoryBuffer have; libFuzzer's bytes have none.
  std::string text(reinterpret_cast<const char *>(data), size);
  // What flashlight-compile rejects before parsing (MLIR's parser recursion).
  if (flashlight::nestingDepth(text) > flashlight::kMaxNesting ||
      flashlight::openStringLine(text))
    return 0;
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, config);
  if (module)
    flashlight::fuzz::raiseImported(*module, [](PassManager &pm) {
      pm.addPass(flashlight::createImportTorch());
    });
  return 0;
}
