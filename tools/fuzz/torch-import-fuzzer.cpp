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

#include "flashlight/Import/Passes.h"
#include "flashlight/Import/Torch/TorchDialect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return flashlight::fuzz::fuzzText<flashlight::torchimport::TorchDialect>(
      data, size, [](mlir::PassManager &pm) {
        pm.addPass(flashlight::createImportTorch());
      });
}
