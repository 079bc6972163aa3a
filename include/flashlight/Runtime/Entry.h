//===- Entry.h - Run a manifest's whole function ----------------*- C++ -*-===//
//
// A manifest's `entry` describes the user's function as steps over numbered
// values: buffers, constants, reshapes, the reference path's kernels (each
// contraction with its einsum), and calls of the program's attention
// kernels. EntryProgram runs them, as call_entry does in Python: the
// contractions on cuBLAS, or, as the check's independent computation, every
// step on its simple kernel and every attention by the fp64 reference.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_RUNTIME_ENTRY_H
#define FLASHLIGHT_RUNTIME_ENTRY_H

#include "flashlight/Runtime/Kernel.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace flashlight::runtime {

/// How a run computes the steps.
enum class EntryMode {
  /// Contractions on cuBLAS (on their kernels where cuBLAS cannot take
  /// them), attentions on their kernels: what a user times.
  Fast,
  /// Every step on its own simple kernel, every attention by the fp64
  /// reference on the host (Reference.h): what Fast is checked against.
  Reference,
};

/// A manifest's entry, loaded on the current context.
class EntryProgram {
public:
  /// Reads the manifest at `path` (it must have entry steps); nothing is
  /// loaded on the GPU before the first run (on the current context's
  /// device). Throws ManifestError.
  explicit EntryProgram(const std::string &path);
  ~EntryProgram();
  EntryProgram(const EntryProgram &) = delete;
  EntryProgram &operator=(const EntryProgram &) = delete;

  /// The tensors a caller passes (the entry's inputs that are not
  /// constants), in order, and the function's results.
  const std::vector<ParamInfo> &inputs() const { return callerInputs; }
  const std::vector<ParamInfo> &outputs() const { return results; }

  /// Runs the steps on the caller's dense row-major buffers `inputs` and
  /// returns the results' buffers (owned here, valid until the next run).
  /// With `poison`, every kernel's results are NaN before it runs.
  std::vector<CUdeviceptr> run(const std::vector<CUdeviceptr> &inputs,
                               EntryMode mode, bool poison,
                               CUstream stream = nullptr);

  /// Contraction steps of the last Fast run on cuBLAS and on their own
  /// kernels, and why any ran on a kernel.
  int libraryGemms = 0, kernelGemms = 0;
  std::string whyKernels;

private:
  /// Checks a step's fields and value ids before anything runs (`where`
  /// names it); throws ManifestError.
  void checkStep(const nlohmann::json &step, size_t attentionCount,
                 const std::string &where) const;
  /// The buffer of value `v` (allocated once; inputs are the caller's).
  CUdeviceptr buffer(size_t v);
  void runKernelStep(const nlohmann::json &step, EntryMode mode, bool poison,
                     CUstream stream);
  void runAttentionStep(const nlohmann::json &step, EntryMode mode,
                        CUstream stream);
  /// A kernel step that only moves data (its `copy`: a concat, or a slice
  /// of one dim) as pitched driver copies; false where it is of another
  /// form, for the step's kernel to run.
  bool runCopyStep(const nlohmann::json &step, CUstream stream);
  /// Attention `k` of the program: its manifest for this device and, for
  /// Fast runs, its loaded kernel.
  const KernelManifest &attentionManifest(size_t k);
  Kernel &attention(size_t k);
  std::vector<int64_t> shapeOf(size_t v) const;

  std::string path, directory;
  /// The device's, at the first run.
  int computeCapability = 0;
  nlohmann::json entry;
  std::vector<ParamInfo> values, callerInputs, results;
  std::vector<CUdeviceptr> pointers;
  std::vector<bool> ownsPointer;
  std::unique_ptr<HostKernels> host;
  std::map<size_t, KernelManifest> attentionManifests;
  std::map<size_t, std::unique_ptr<Kernel>> attentions;
};

} // namespace flashlight::runtime

#endif // FLASHLIGHT_RUNTIME_ENTRY_H
