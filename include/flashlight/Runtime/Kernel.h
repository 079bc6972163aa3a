//===- Kernel.h - Load and launch a compiled attention kernel ---*- C++ -*-===//
//
// Reads the manifest flashlight-compile writes, picks the artifact for the
// device (cubin of its arch, else PTX for the driver to JIT), validates the
// arguments against the manifest and launches with the manifest's geometry.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_RUNTIME_KERNEL_H
#define FLASHLIGHT_RUNTIME_KERNEL_H

#include "flashlight/Runtime/CudaDriver.h"
#include "flashlight/Runtime/TensorMap.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace flashlight::runtime {

/// A manifest problem: bad file, bad arguments. Thrown by the runtime.
struct ManifestError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Bytes per element of a manifest dtype ("bf16", "f32", "i32", ...).
size_t dtypeSize(const std::string &dtype);

/// One kernel parameter, as the manifest describes it.
struct ParamInfo {
  std::string name;
  bool output = false;
  /// An output the kernel adds to (a key-side product): zeroed before each
  /// launch.
  bool zero = false;
  std::string dtype;
  /// -1 for a dynamic dimension.
  std::vector<int64_t> shape;
  /// Per dim, the symbol of a dynamic extent ("B", "M", "N", ...; dims
  /// with one symbol are equal), "" for a static one; empty when static.
  std::vector<std::string> extents;

  int64_t numElements() const;
};

/// The parsed manifest.
struct KernelManifest {
  std::string directory;
  std::string name, kernel;
  int64_t blockM = 0, blockN = 0;
  std::array<unsigned, 3> block{};
  /// A persistent kernel: its blocks loop over the work tiles.
  bool persistent = false;
  /// The blocks draw work tiles from a counter (two u32, zero at launch,
  /// left zero by the kernel), passed after the other buffers (and the
  /// block mask), before the tensor maps.
  bool tileCounter = false;
  /// The block-mask pre-kernel of a data-dependent mask ("kernel", "block",
  /// "batch", "heads"); null when there is none.
  nlohmann::json blockMask;
  /// Bytes of dynamic shared memory per block.
  unsigned dynamicSharedMemory = 0;
  /// Bytes every tensor pointer must be aligned to (besides its element
  /// size): 16 for the tensor-core kernels' 16-byte copies.
  unsigned pointerAlignment = 1;
  /// The kernel reads its tensors' strides at run time (any layout whose
  /// innermost dim is contiguous); else dense row-major tensors only.
  bool runtimeStrides = false;
  /// The TMA tensor maps the kernel takes after its other parameters.
  std::vector<TensorMapInfo> tensorMaps;
  std::vector<ParamInfo> params;
  /// The largest runtime extent the kernel takes (0: static shapes).
  int64_t maxExtent = 0;
  /// With runtime shapes, after forArtifact: the loaded arch's kernel for
  /// lengths whole tiles divide ("kernel" and its launch geometry); null
  /// when there is none.
  nlohmann::json aligned;
  nlohmann::json program;
  nlohmann::json archs;

  /// Parses `path`, the program's attention `attention` of a version-2
  /// manifest (`attentions[k]`; 0 is the top level's); throws
  /// ManifestError.
  static KernelManifest load(const std::string &path, size_t attention = 0);
  /// Parses manifest `text`, read from `path` (artifacts are found beside
  /// it), as load() does; throws ManifestError.
  static KernelManifest parse(const std::string &text, const std::string &path,
                              size_t attention = 0);
  /// This manifest with the launch geometry (block_m, block, dynamic shared
  /// memory) of the arch whose cubin or PTX is `artifact`: the code
  /// generator, and with it the geometry, can differ per arch (wgmma on
  /// sm_90a). Entries without their own geometry keep the top level's.
  KernelManifest forArtifact(const std::string &artifact) const;
  /// Whether a parameter has a dynamic extent (a kernel with runtime
  /// shapes).
  bool hasRuntimeShapes() const;
  /// The extents' values in `shapes` (each parameter's actual shape): one
  /// per symbol. Throws ManifestError where a static dim differs, where
  /// two dims with one symbol differ, or where one exceeds `maxExtent`.
  std::map<std::string, int64_t>
  bindExtents(const std::vector<std::vector<int64_t>> &shapes) const;
  /// This manifest at the given extents' values: every parameter static
  /// (validated). Throws ManifestError for a symbol without a value.
  KernelManifest
  withExtents(const std::map<std::string, int64_t> &values) const;
  /// The aligned kernel (`aligned`) as a manifest of its own, validated;
  /// none without one.
  std::optional<KernelManifest> alignedVariant() const;
  /// Whether every query length of `shapes` is a multiple of block_m and
  /// every key length of block_n.
  bool tilesDivide(const std::vector<std::vector<int64_t>> &shapes) const;
  /// The parameter named `name`, or nullptr.
  const ParamInfo *find(const std::string &name) const;
  /// Checks the launch geometry and the parameters (q0 of rank 4,
  /// non-negative static dims, a symbol for each dynamic one; sizes that do
  /// not overflow and a grid within CUDA's limits where static) before
  /// anything is allocated or launched. Throws
  /// ManifestError; load() and forArtifact() call it.
  void validate() const;
  /// Grid for the given parameter shapes: (ceil(M / block_m), Hq, B), read
  /// from q0's shape.
  std::array<unsigned, 3>
  grid(const std::vector<std::vector<int64_t>> &shapes) const;
  /// The grid a launch uses: grid(), or for a persistent kernel as many
  /// blocks as the device's `smCount` SMs (at most one per work tile), each
  /// looping over work tiles; throws ManifestError for a persistent kernel
  /// without a positive `smCount`.
  std::array<unsigned, 3>
  launchGrid(const std::vector<std::vector<int64_t>> &shapes,
             int smCount) const;
  /// Shape of the block mask for the given parameter shapes: [B or 1,
  /// Hq or 1, ceil(M / block_m), ceil(N / block_n)]; empty without one.
  std::vector<int64_t>
  blockMaskShape(const std::vector<std::vector<int64_t>> &shapes) const;
  /// Checks a launch's pointers and shapes against the parameters: count,
  /// rank, static dims, one value per dynamic extent, and pointer alignment
  /// (element size and `pointerAlignment`). Throws ManifestError.
  void checkLaunch(const std::vector<CUdeviceptr> &pointers,
                   const std::vector<std::vector<int64_t>> &shapes) const;
  /// Checks each parameter's element strides (empty: dense row-major)
  /// against what the kernel takes: row-major only without
  /// `runtimeStrides`; else the innermost dim contiguous, the others
  /// multiples of `pointerAlignment` bytes, outputs that do not overlap
  /// themselves and, where the kernel adds to a zeroed output, a
  /// permutation of a dense tensor. Throws ManifestError naming the
  /// parameter.
  void checkStrides(const std::vector<std::vector<int64_t>> &shapes,
                    const std::vector<std::vector<int64_t>> &strides) const;
};

/// A loaded kernel, ready to launch on the current context.
class Kernel {
public:
  /// Loads the artifact matching `computeCapability` (e.g. 90 for sm_90a).
  Kernel(const KernelManifest &manifest, int computeCapability);
  ~Kernel();
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;

  /// The file that was loaded, e.g. "causal.sm_90a.cubin".
  const std::string &artifact() const { return loaded; }

  /// Checks pointers and shapes against the manifest and launches. `shapes`
  /// gives each parameter's actual shape (it must agree with the static
  /// dims). Throws ManifestError on a mismatch, CudaError on a driver error.
  /// A kernel with a block mask first runs its pre-kernel into a buffer the
  /// Kernel owns (grown as needed), and a kernel with a tile counter draws
  /// its work tiles from one the Kernel owns: launches of one Kernel must
  /// then be ordered (one stream, or synchronized).
  void launch(const std::vector<CUdeviceptr> &pointers,
              const std::vector<std::vector<int64_t>> &shapes,
              CUstream stream = nullptr) const;
  /// launch() of tensors with the given element strides per parameter
  /// (empty: dense row-major), checked by KernelManifest::checkStrides: a
  /// caller's layout (a [B, N, H, D] buffer as the kernel's [B, H, N, D])
  /// read and written in place.
  void launch(const std::vector<CUdeviceptr> &pointers,
              const std::vector<std::vector<int64_t>> &shapes,
              const std::vector<std::vector<int64_t>> &strides,
              CUstream stream = nullptr) const;

private:
  /// A kernel of the module and its block-mask pre-kernel, with the
  /// manifest of its launch geometry.
  struct Variant {
    KernelManifest manifest;
    CUfunction function = nullptr, maskFunction = nullptr;
  };
  Variant loadVariant(const KernelManifest &manifest) const;

  std::string loaded;
  /// The manifest with the loaded arch's launch geometry.
  KernelManifest manifest;
  CUmodule module = nullptr;
  /// The kernel, and with runtime shapes the one for aligned lengths.
  Variant general;
  std::optional<Variant> aligned;
  /// The block mask's buffer and its size in bytes.
  mutable CUdeviceptr maskBuffer = 0;
  mutable size_t maskBytes = 0;
  /// The tile counter (zeroed once; each launch leaves it zero).
  mutable CUdeviceptr counterBuffer = 0;
};

/// The reference path's kernels of a manifest entry (its `flashlight_host`
/// module: `<name>.host.<arch>.cubin` or `.ptx`), launched by name as the
/// entry's `kernel` steps say: a 1-D grid, dense row-major buffers.
class HostKernels {
public:
  /// Loads the module file at `path` on the current context.
  explicit HostKernels(const std::string &path);
  ~HostKernels();
  HostKernels(const HostKernels &) = delete;
  HostKernels &operator=(const HostKernels &) = delete;

  /// Launches kernel `name` on `grid` x `block` threads with one memref
  /// descriptor per buffer, in the kernel's parameter order.
  void launch(const std::string &name, int64_t grid, int64_t block,
              const std::vector<CUdeviceptr> &pointers,
              const std::vector<std::vector<int64_t>> &shapes,
              CUstream stream = nullptr);

private:
  CUmodule module = nullptr;
  /// Functions by name, looked up once (launches may come from several
  /// threads: XLA's).
  std::map<std::string, CUfunction> functions;
  std::mutex functionsMutex;
};

/// The artifact (cubin or PTX file name) `manifest` offers for a device of
/// `computeCapability`: its own arch's cubin (sm_90a before sm_90), else the
/// newest older arch's PTX, which the driver JIT-compiles.
std::string chooseArtifact(const KernelManifest &manifest,
                           int computeCapability);
/// The same choice among `archs` (a manifest's or its entry's), `what`
/// naming them in the error when there is none.
std::string chooseArtifact(const nlohmann::json &archs, const std::string &what,
                           int computeCapability);

/// Loads the cubin or PTX file at `path` as a module of the current
/// context; throws ManifestError or CudaError.
CUmodule loadModuleFile(const std::string &path);

} // namespace flashlight::runtime

#endif // FLASHLIGHT_RUNTIME_KERNEL_H
