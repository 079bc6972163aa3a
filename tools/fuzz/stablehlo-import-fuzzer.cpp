//===- stablehlo-import-fuzzer.cpp - libFuzzer target for the importer ----===//
//
// Feeds arbitrary text through what `flashlight-compile` does with an
// imported program before code generation: parse (StableHLO import dialect,
// pretty and generic forms), verify, flashlight-import-stablehlo,
// canonicalize, attn-raise, attn-outline. Any input may be rejected with a
// diagnostic; none may crash. Built by scripts/fuzz.sh.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"

#include "flashlight/Import/Passes.h"
#include "flashlight/Import/StableHLO/StableHLODialect.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return flashlight::fuzz::fuzzText<flashlight::shlo::StableHLODialect>(
      data, size, [](mlir::PassManager &pm) {
        pm.addPass(flashlight::createImportStableHLO());
      });
}
