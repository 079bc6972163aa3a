//===- Reference.h - fp64 reference of an attention program -----*- C++ -*-===//
//
// Evaluates the attention program serialized in a manifest ("program") on
// the CPU in double precision, straight from the attn.attention semantics
// (materialized scores, two-pass softmax), independent of the kernel's
// online algorithm and tiling. Written once; flashlight-run and the unit
// tests use it.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_RUNTIME_REFERENCE_H
#define FLASHLIGHT_RUNTIME_REFERENCE_H

#include "flashlight/Runtime/Kernel.h"

#include <cstdint>
#include <vector>

namespace flashlight::runtime {

/// A host tensor of doubles, row-major.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

/// Evaluates `manifest.program` on `tensors` (one per manifest parameter;
/// outputs are ignored) for the query rows in `rows` (every row if empty).
/// Returns one tensor per output parameter, in manifest order; entries of
/// rows not computed are NaN. Throws ManifestError if the program is absent
/// or malformed.
std::vector<HostTensor>
evaluateReference(const KernelManifest &manifest,
                  const std::vector<HostTensor> &tensors,
                  const std::vector<int64_t> &rows);

} // namespace flashlight::runtime

#endif // FLASHLIGHT_RUNTIME_REFERENCE_H
