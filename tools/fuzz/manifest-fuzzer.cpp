//===- manifest-fuzzer.cpp - libFuzzer target for manifest loading --------===//
//
// Any bytes as a manifest: parsing, validation, artifact choice for several
// GPUs, per-arch geometry, the launch grid and the block-mask shape must
// either succeed or throw ManifestError, never crash or divide by zero.
// (The runtime is built with exceptions; so is this target.)
//
//===----------------------------------------------------------------------===//

#include "flashlight/Runtime/Kernel.h"

#include <cstdint>
#include <string>

using namespace flashlight::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    KernelManifest m = KernelManifest::parse(text, "fuzz/manifest.json");
    std::vector<std::vector<int64_t>> shapes;
    for (const ParamInfo &p : m.params)
      shapes.push_back(p.shape);
    m.grid(shapes);
    m.blockMaskShape(shapes);
    for (int cc : {80, 86, 90, 100, 120}) {
      try {
        KernelManifest arch = m.forArtifact(chooseArtifact(m, cc));
        arch.grid(shapes);
        arch.blockMaskShape(shapes);
      } catch (const ManifestError &) {
      }
    }
  } catch (const ManifestError &) {
  }
  return 0;
}
