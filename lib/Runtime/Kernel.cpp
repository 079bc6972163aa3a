//===- Kernel.cpp - Load and launch a compiled attention kernel -----------===//

#include "flashlight/Runtime/Kernel.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>

using namespace flashlight::runtime;
using json = nlohmann::json;

size_t flashlight::runtime::dtypeSize(const std::string &dtype) {
  if (dtype == "f16" || dtype == "bf16" || dtype == "i16")
    return 2;
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "f64" || dtype == "i64" || dtype == "index")
    return 8;
  if (dtype == "i1" || dtype == "i8")
    return 1;
  throw ManifestError("unsupported dtype '" + dtype + "'");
}

int64_t ParamInfo::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      throw ManifestError(name + ": shape has a dynamic dim or is too large");
  return n;
}

/// A manifest's `tensor_maps` entry: per map its parameter, box
/// ([columns, rows]) and swizzle (bytes: 128, the default, or 0).
static std::vector<TensorMapInfo> tensorMapsOf(const json &listed) {
  std::vector<TensorMapInfo> maps;
  for (const json &t : listed) {
    int64_t swizzle = t.value("swizzle", int64_t(128));
    if (swizzle != 0 && swizzle != 128)
      throw ManifestError("a tensor map's swizzle must be 0 or 128 bytes, "
                          "not " +
                          std::to_string(swizzle));
    maps.push_back({t.at("param").get<size_t>(),
                    t.at("box").at(0).get<unsigned>(),
                    t.at("box").at(1).get<unsigned>(), swizzle == 128});
  }
  return maps;
}

/// A manifest's `block_mask` entry: null, or the pre-kernel's name, block
/// size and whether the mask reads the batch / head index. Checked when the
/// manifest is read, so that a launch never meets a malformed one.
static const json &checkedBlockMask(const json &mask,
                                    const std::string &where) {
  if (mask.is_null())
    return mask;
  const json *block =
      mask.is_object() && mask.contains("block") ? &mask.at("block") : nullptr;
  bool ok = mask.is_object() && mask.value("kernel", json()).is_string() &&
            mask.value("batch", json()).is_boolean() &&
            mask.value("heads", json()).is_boolean() && block &&
            block->is_array() && block->size() == 3 &&
            std::all_of(block->begin(), block->end(),
                        [](const json &d) { return d.is_number_unsigned(); });
  if (!ok)
    throw ManifestError(where +
                        ": bad block_mask (want kernel, block [3], "
                        "batch, heads): " +
                        mask.dump());
  return mask;
}

KernelManifest KernelManifest::load(const std::string &path, size_t attention) {
  std::ifstream in(path);
  if (!in)
    throw ManifestError("cannot open manifest " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path, attention);
}

KernelManifest KernelManifest::parse(const std::string &text,
                                     const std::string &path,
                                     size_t attention) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception &e) {
    throw ManifestError("bad manifest " + path + ": " + e.what());
  }
  KernelManifest m;
  try {
    // Attention k of a version-2 manifest: its own fields (kernel, params,
    // archs, geometry) over the top level's.
    const json &listed = j.value("attentions", json(nullptr));
    if (attention > 0 || !listed.is_null()) {
      if (!listed.is_array() || attention >= listed.size() ||
          !listed[attention].is_object())
        throw ManifestError("manifest " + path + " has no attention " +
                            std::to_string(attention));
      json own = listed[attention];
      j.update(own);
      j.erase("attentions");
    }
    // Version 2 adds the program's other attention kernels (`attentions`,
    // run by the entry's steps); the top-level kernel is the first.
    int version = j.at("manifest_version").get<int>();
    if (version != 1 && version != 2)
      throw ManifestError("unsupported manifest version in " + path);
    size_t slash = path.find_last_of('/');
    m.directory = slash == std::string::npos ? "." : path.substr(0, slash);
    m.name = j.at("name");
    if (j.at("kernel").is_null())
      throw ManifestError(m.name + " has no attention kernel: the program "
                                   "runs on the reference path only; call "
                                   "it through flashlight.load(m)."
                                   "call_entry (Python)");
    m.kernel = j.at("kernel");
    m.blockM = j.at("block_m");
    m.blockN = j.value("block_n", 0);
    m.persistent = j.value("persistent", false);
    m.tileCounter = j.value("tile_counter", false);
    m.blockMask = checkedBlockMask(j.value("block_mask", json(nullptr)),
                                   "manifest " + path);
    for (int i = 0; i < 3; ++i)
      m.block[i] = j.at("block").at(i);
    m.dynamicSharedMemory = j.value("dynamic_shared_memory", 0u);
    m.pointerAlignment = j.value("pointer_alignment", 1u);
    m.runtimeStrides = j.value("runtime_strides", false);
    m.tensorMaps = tensorMapsOf(j.value("tensor_maps", json::array()));
    for (const json &p : j.at("params")) {
      ParamInfo info;
      info.name = p.at("name");
      info.output = p.at("direction") == "out";
      info.zero = info.output && p.value("zero", false);
      info.dtype = p.at("dtype");
      info.shape = p.at("shape").get<std::vector<int64_t>>();
      if (p.contains("extents"))
        info.extents = p.at("extents").get<std::vector<std::string>>();
      dtypeSize(info.dtype); // Rejects unknown dtypes now.
      m.params.push_back(info);
    }
    m.maxExtent = j.value("max_extent", int64_t(0));
    m.program = j.value("program", json(nullptr));
    m.archs = j.at("archs");
  } catch (const json::exception &e) {
    throw ManifestError("bad manifest " + path + ": " + e.what());
  }
  if (!m.find("q0"))
    throw ManifestError("manifest " + path + " has no q0 parameter");
  m.validate();
  return m;
}

void KernelManifest::validate() const {
  auto bad = [&](const std::string &what) {
    throw ManifestError("manifest " + name + ": " + what);
  };
  if (blockM < 1 || blockM > 1024)
    bad("block_m " + std::to_string(blockM) + " is not in [1, 1024]");
  if (blockN < 0 || blockN > 1024)
    bad("block_n " + std::to_string(blockN) + " is not in [0, 1024]");
  uint64_t threads = 1;
  for (unsigned b : block)
    threads *= b;
  if (threads < 1 || threads > 1024 || block[2] > 64)
    bad("block [" + std::to_string(block[0]) + ", " + std::to_string(block[1]) +
        ", " + std::to_string(block[2]) +
        "] is not a CUDA block (1 to 1024 threads)");
  if (dynamicSharedMemory > 227 * 1024)
    bad("dynamic_shared_memory " + std::to_string(dynamicSharedMemory) +
        " exceeds 227 KiB");
  if (pointerAlignment < 1 || pointerAlignment > 256 ||
      (pointerAlignment & (pointerAlignment - 1)))
    bad("pointer_alignment must be a power of 2 up to 256");
  for (const TensorMapInfo &t : tensorMaps)
    if (t.param >= params.size() || t.boxColumns < 1 || t.boxColumns > 256 ||
        t.boxRows < 1 || t.boxRows > 256)
      bad("a tensor map of parameter " + std::to_string(t.param) +
          " with box " + std::to_string(t.boxColumns) + " x " +
          std::to_string(t.boxRows) + " (parameters " +
          std::to_string(params.size()) + ", boxes up to 256)");
  for (const ParamInfo &p : params)
    for (size_t d = 0; d < p.shape.size(); ++d)
      if (p.shape[d] < 0 &&
          (p.shape[d] != -1 || d >= p.extents.size() || p.extents[d].empty()))
        bad(p.name + ": dim " + std::to_string(d) +
            " is negative without an extent symbol");
  for (const char *role : {"q0", "k0", "v"})
    if (const ParamInfo *p = find(role); p && p->shape.size() != 4)
      bad(std::string(role) + " must have rank 4");
  if (hasRuntimeShapes()) {
    if (maxExtent < 1)
      bad("runtime extents without a positive max_extent");
    return; // Sizes and the grid are checked per launch.
  }
  std::vector<std::vector<int64_t>> shapes;
  for (const ParamInfo &p : params) {
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(uint64_t(p.numElements()), dtypeSize(p.dtype),
                               &bytes) ||
        bytes > (uint64_t(1) << 47))
      bad(p.name + " needs more than 128 TiB");
    shapes.push_back(p.shape);
  }
  grid(shapes); // Throws when the problem exceeds the launch grid.
}

bool KernelManifest::hasRuntimeShapes() const {
  return std::any_of(params.begin(), params.end(), [](const ParamInfo &p) {
    return std::any_of(p.shape.begin(), p.shape.end(),
                       [](int64_t d) { return d < 0; });
  });
}

std::map<std::string, int64_t> KernelManifest::bindExtents(
    const std::vector<std::vector<int64_t>> &shapes) const {
  std::map<std::string, int64_t> values;
  std::map<std::string, std::string> from;
  for (size_t i = 0; i < params.size() && i < shapes.size(); ++i) {
    const ParamInfo &p = params[i];
    for (size_t d = 0; d < p.shape.size() && d < shapes[i].size(); ++d) {
      if (p.shape[d] >= 0)
        continue;
      const std::string &symbol = p.extents.at(d);
      std::string here = p.name + " dim " + std::to_string(d);
      if (shapes[i][d] > maxExtent)
        throw ManifestError(here + " is " + std::to_string(shapes[i][d]) +
                            "; this kernel takes extents up to " +
                            std::to_string(maxExtent));
      auto [it, fresh] = values.emplace(symbol, shapes[i][d]);
      if (fresh)
        from[symbol] = here;
      else if (it->second != shapes[i][d])
        throw ManifestError(here + " is " + std::to_string(shapes[i][d]) +
                            ", but " + from[symbol] + " is " +
                            std::to_string(it->second) + ": both are extent " +
                            symbol);
    }
  }
  return values;
}

KernelManifest KernelManifest::withExtents(
    const std::map<std::string, int64_t> &values) const {
  KernelManifest m = *this;
  for (ParamInfo &p : m.params)
    for (size_t d = 0; d < p.shape.size(); ++d) {
      if (p.shape[d] >= 0)
        continue;
      auto it = values.find(p.extents.at(d));
      if (it == values.end())
        throw ManifestError(p.name + " dim " + std::to_string(d) +
                            " is extent " + p.extents.at(d) +
                            ", which was given no value");
      if (it->second < 0 || it->second > m.maxExtent)
        throw ManifestError("extent " + p.extents.at(d) + " = " +
                            std::to_string(it->second) + " is not in [0, " +
                            std::to_string(m.maxExtent) + "]");
      p.shape[d] = it->second;
    }
  m.validate();
  return m;
}

/// `m` with the launch geometry of `info` (a manifest arch entry, or its
/// `aligned` variant) where it gives one.
static void applyGeometry(KernelManifest &m, const json &info,
                          const std::string &arch) {
  try {
    m.blockM = info.value("block_m", m.blockM);
    m.blockN = info.value("block_n", m.blockN);
    m.persistent = info.value("persistent", m.persistent);
    m.tileCounter = info.value("tile_counter", m.tileCounter);
    if (info.contains("block_mask"))
      m.blockMask =
          checkedBlockMask(info.at("block_mask"), "manifest entry for " + arch);
    if (info.contains("block"))
      for (int i = 0; i < 3; ++i)
        m.block[i] = info.at("block").at(i);
    m.dynamicSharedMemory =
        info.value("dynamic_shared_memory", m.dynamicSharedMemory);
    m.pointerAlignment = info.value("pointer_alignment", m.pointerAlignment);
    m.runtimeStrides = info.value("runtime_strides", m.runtimeStrides);
    if (info.contains("tensor_maps"))
      m.tensorMaps = tensorMapsOf(info.at("tensor_maps"));
  } catch (const json::exception &e) {
    throw ManifestError("bad manifest entry for " + arch + ": " + e.what());
  }
}

KernelManifest KernelManifest::forArtifact(const std::string &artifact) const {
  KernelManifest m = *this;
  for (auto &[arch, info] : archs.items()) {
    if (info.value("cubin", "") != artifact &&
        info.value("ptx", "") != artifact)
      continue;
    applyGeometry(m, info, arch);
    m.aligned = info.value("aligned", json(nullptr));
  }
  m.validate();
  return m;
}

std::optional<KernelManifest> KernelManifest::alignedVariant() const {
  if (aligned.is_null())
    return std::nullopt;
  KernelManifest m = *this;
  applyGeometry(m, aligned, "the aligned kernel");
  try {
    m.kernel = aligned.at("kernel").get<std::string>();
  } catch (const json::exception &e) {
    throw ManifestError("bad aligned kernel entry: " + std::string(e.what()));
  }
  m.aligned = nullptr;
  m.validate();
  return m;
}

bool KernelManifest::tilesDivide(
    const std::vector<std::vector<int64_t>> &shapes) const {
  for (size_t i = 0; i < params.size() && i < shapes.size(); ++i) {
    const std::string &name = params[i].name;
    int64_t tile = name[0] == 'q'                  ? blockM
                   : name[0] == 'k' || name == "v" ? blockN
                                                   : 0;
    if (tile > 0 && shapes[i].size() > 2 && shapes[i][2] % tile)
      return false;
  }
  return true;
}

const ParamInfo *KernelManifest::find(const std::string &name) const {
  for (const ParamInfo &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

std::array<unsigned, 3>
KernelManifest::grid(const std::vector<std::vector<int64_t>> &shapes) const {
  size_t q = find("q0") - params.data();
  const std::vector<int64_t> &s = shapes.at(q);
  int64_t tiles = (s.at(2) + blockM - 1) / blockM;
  if (tiles > 0x7fffffff || s.at(1) > 65535 || s.at(0) > 65535)
    throw ManifestError(
        "problem too large for the launch grid: B = " + std::to_string(s[0]) +
        " and H = " + std::to_string(s[1]) + " may be at most 65535, M / " +
        "block_m = " + std::to_string(tiles) + " at most 2^31 - 1");
  return {unsigned(tiles), unsigned(s[1]), unsigned(s[0])};
}

/// The current context's SM count (a persistent kernel's grid), cached per
/// context once the driver answered.
static int multiprocessorCount() {
  CudaDriver &cuda = CudaDriver::get();
  CUcontext context = nullptr;
  cuda.check(cuda.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  static std::mutex lock;
  static std::map<CUcontext, int> counts;
  {
    std::lock_guard<std::mutex> guard(lock);
    auto it = counts.find(context);
    if (context && it != counts.end())
      return it->second;
  }
  CUdevice device = cuda.currentDevice().first;
  int count = 0;
  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.
  cuda.check(cuda.cuDeviceGetAttribute(&count, 16, device),
             "cuDeviceGetAttribute");
  cuda.check(cuda.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  std::lock_guard<std::mutex> guard(lock);
  counts[context] = count;
  return count;
}

std::array<unsigned, 3>
KernelManifest::launchGrid(const std::vector<std::vector<int64_t>> &shapes,
                           int smCount) const {
  std::array<unsigned, 3> g = grid(shapes);
  if (!persistent)
    return g;
  if (smCount < 1)
    throw ManifestError(name +
                        ": a persistent kernel needs the device's SM count "
                        "(got " +
                        std::to_string(smCount) + ")");
  uint64_t tiles = uint64_t(g[0]) * g[1] * g[2];
  return {unsigned(std::min<uint64_t>(tiles, uint64_t(smCount))), 1, 1};
}

std::vector<int64_t> KernelManifest::blockMaskShape(
    const std::vector<std::vector<int64_t>> &shapes) const {
  if (blockMask.is_null())
    return {};
  const std::vector<int64_t> &q = shapes.at(find("q0") - params.data());
  const ParamInfo *key = find("k0");
  if (!key || blockM <= 0 || blockN <= 0)
    throw ManifestError(name + ": block mask without k0 or tile sizes");
  const std::vector<int64_t> &k = shapes.at(key - params.data());
  try {
    return {blockMask.at("batch").get<bool>() ? q.at(0) : 1,
            blockMask.at("heads").get<bool>() ? q.at(1) : 1,
            (q.at(2) + blockM - 1) / blockM, (k.at(2) + blockN - 1) / blockN};
  } catch (const json::exception &e) {
    throw ManifestError(name + ": bad block_mask: " + e.what());
  }
}

std::string flashlight::runtime::chooseArtifact(const KernelManifest &m,
                                                int cc) {
  return chooseArtifact(m.archs, "manifest " + m.name, cc);
}

std::string flashlight::runtime::chooseArtifact(const json &archs,
                                                const std::string &what,
                                                int cc) {
  std::string own = "sm_" + std::to_string(cc);
  for (const std::string &arch : {own + "a", own})
    if (archs.contains(arch) && archs[arch].contains("cubin"))
      return archs[arch]["cubin"];
  // PTX of the newest arch not newer than the device. Arch-specific PTX
  // (sm_90a: wgmma) runs on that arch only, never through the JIT on a
  // newer one.
  std::string best;
  int bestCC = -1;
  for (auto &[arch, info] : archs.items()) {
    if (arch.size() < 4 || arch.compare(0, 3, "sm_") != 0 ||
        !std::all_of(arch.begin() + 3, arch.end(), ::isdigit))
      continue;
    int archCC = std::stoi(arch.substr(3));
    if (archCC <= cc && archCC > bestCC && info.contains("ptx")) {
      best = info["ptx"];
      bestCC = archCC;
    }
  }
  if (best.empty())
    throw ManifestError(what + " has no artifact for sm_" + std::to_string(cc));
  return best;
}

CUmodule flashlight::runtime::loadModuleFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ManifestError("cannot read " + path);
  std::stringstream data;
  data << in.rdbuf();
  std::string image = data.str(); // PTX must be NUL-terminated: it is.
  CudaDriver &cuda = CudaDriver::get();
  CUmodule module = nullptr;
  cuda.check(cuda.cuModuleLoadData(&module, image.c_str()), "cuModuleLoadData");
  return module;
}

// `all` is every arch's manifest; the member `manifest` holds the loaded
// arch's geometry (the body reads only the member).
Kernel::Kernel(const KernelManifest &all, int computeCapability)
    : loaded(chooseArtifact(all, computeCapability)),
      manifest(all.forArtifact(loaded)) {
  module = loadModuleFile(manifest.directory + "/" + loaded);
  general = loadVariant(manifest);
  if (std::optional<KernelManifest> m = manifest.alignedVariant())
    aligned = loadVariant(*m);
}

Kernel::Variant Kernel::loadVariant(const KernelManifest &manifest) const {
  CudaDriver &cuda = CudaDriver::get();
  Variant v{manifest, nullptr, nullptr};
  CUfunction &function = v.function;
  cuda.check(
      cuda.cuModuleGetFunction(&function, module, manifest.kernel.c_str()),
      "cuModuleGetFunction");
  // Past 48 KB of static plus dynamic shared memory, the dynamic part must
  // be opted into; the kernel's static bytes (a 48 KB wgmma kernel has 1)
  // count too, so opt in for any dynamic shared memory.
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (no CUDA header here).
  constexpr int kMaxDynamicSharedSizeBytes = 8;
  if (manifest.dynamicSharedMemory > 0)
    cuda.check(cuda.cuFuncSetAttribute(function, kMaxDynamicSharedSizeBytes,
                                       int(manifest.dynamicSharedMemory)),
               "cuFuncSetAttribute");
  if (!manifest.blockMask.is_null())
    cuda.check(cuda.cuModuleGetFunction(
                   &v.maskFunction, module,
                   manifest.blockMask.value("kernel", "").c_str()),
               "cuModuleGetFunction (block mask)");
  return v;
}

Kernel::~Kernel() {
  if (maskBuffer)
    CudaDriver::get().cuMemFree(maskBuffer);
  if (counterBuffer)
    CudaDriver::get().cuMemFree(counterBuffer);
  if (module)
    CudaDriver::get().cuModuleUnload(module);
}

/// The element strides of a dense row-major tensor of `shape`.
static std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

/// `strides`, or a dense row-major tensor's where it is empty.
static std::vector<int64_t> stridesOr(const std::vector<int64_t> &strides,
                                      const std::vector<int64_t> &shape) {
  return strides.empty() ? rowMajorStrides(shape) : strides;
}

/// Appends the flattened memref descriptor of a buffer with element
/// `strides` (empty: dense row-major): allocated ptr, aligned ptr, offset,
/// sizes[rank], strides[rank].
static void appendDescriptor(std::vector<uint64_t> &words, CUdeviceptr pointer,
                             const std::vector<int64_t> &shape,
                             const std::vector<int64_t> &strides = {}) {
  words.push_back(pointer);
  words.push_back(pointer);
  words.push_back(0);
  for (int64_t d : shape)
    words.push_back(uint64_t(d));
  for (int64_t stride : stridesOr(strides, shape))
    words.push_back(uint64_t(stride));
}

/// Pointers to each word, as cuLaunchKernel takes its arguments.
static std::vector<void *> argumentsOf(std::vector<uint64_t> &words) {
  std::vector<void *> args;
  for (uint64_t &w : words)
    args.push_back(&w);
  return args;
}

void KernelManifest::checkLaunch(
    const std::vector<CUdeviceptr> &pointers,
    const std::vector<std::vector<int64_t>> &shapes) const {
  if (pointers.size() != params.size() || shapes.size() != params.size())
    throw ManifestError(name + " takes " + std::to_string(params.size()) +
                        " tensors, got " + std::to_string(pointers.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo &p = params[i];
    const std::vector<int64_t> &shape = shapes[i];
    if (shape.size() != p.shape.size())
      throw ManifestError(p.name + ": rank " + std::to_string(shape.size()) +
                          ", expected " + std::to_string(p.shape.size()));
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] < 0 || (p.shape[d] >= 0 && p.shape[d] != shape[d]))
        throw ManifestError(p.name + ": dim " + std::to_string(d) + " is " +
                            std::to_string(shape[d]) + ", expected " +
                            std::to_string(p.shape[d]));
    if (pointers[i] % dtypeSize(p.dtype) != 0)
      throw ManifestError(p.name + ": pointer not aligned to its " + p.dtype +
                          " elements");
    if (pointers[i] % std::max(1u, pointerAlignment) != 0)
      throw ManifestError(p.name + ": pointer not aligned to " +
                          std::to_string(pointerAlignment) +
                          " bytes, as this kernel's copies need");
  }
  bindExtents(shapes); // Throws where two dims of one extent differ.
}

void KernelManifest::checkStrides(
    const std::vector<std::vector<int64_t>> &shapes,
    const std::vector<std::vector<int64_t>> &strides) const {
  if (strides.size() != params.size())
    throw ManifestError(name + ": " + std::to_string(strides.size()) +
                        " stride lists for " + std::to_string(params.size()) +
                        " tensors");
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo &p = params[i];
    const std::vector<int64_t> &shape = shapes[i], &given = strides[i];
    if (given.empty() || given == rowMajorStrides(shape))
      continue;
    auto bad = [&](const std::string &why) {
      std::string text;
      for (int64_t s : given)
        text += (text.empty() ? "" : ", ") + std::to_string(s);
      throw ManifestError(p.name + ": strides (" + text + ") " + why);
    };
    if (given.size() != shape.size())
      bad("do not match its rank " + std::to_string(shape.size()));
    if (!runtimeStrides)
      bad("are not dense row-major, and this kernel was compiled with "
          "static strides");
    int64_t element = dtypeSize(p.dtype);
    for (size_t d = 0; d < shape.size(); ++d) {
      if (given[d] < 0)
        bad("are negative");
      if (shape[d] <= 1)
        continue;
      if (d + 1 == shape.size() && given[d] != 1)
        bad("leave the innermost dim strided (it must be contiguous)");
      if (d + 1 < shape.size() && (given[d] * element) % pointerAlignment)
        bad("are not multiples of " + std::to_string(pointerAlignment) +
            " bytes, as this kernel's copies need");
    }
    if (!p.output)
      continue;
    // Each dim's stride clears the extent of the finer ones: no element
    // written twice; with dense extents, a permutation of a dense tensor.
    std::vector<size_t> order(shape.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return given[a] < given[b]; });
    int64_t extent = 1;
    bool dense = true;
    for (size_t d : order) {
      if (shape[d] <= 1)
        continue;
      if (given[d] < extent)
        bad("make the output overlap itself");
      dense &= given[d] == extent;
      extent = given[d] * shape[d];
    }
    if (p.zero && !dense)
      bad("leave gaps in an output the kernel adds to (it zeroes the "
          "whole buffer first)");
  }
}

void Kernel::launch(const std::vector<CUdeviceptr> &pointers,
                    const std::vector<std::vector<int64_t>> &shapes,
                    CUstream stream) const {
  launch(pointers, shapes,
         std::vector<std::vector<int64_t>>(manifest.params.size()), stream);
}

void Kernel::launch(const std::vector<CUdeviceptr> &pointers,
                    const std::vector<std::vector<int64_t>> &shapes,
                    const std::vector<std::vector<int64_t>> &strides,
                    CUstream stream) const {
  manifest.checkLaunch(pointers, shapes);
  manifest.checkStrides(shapes, strides);
  // Runtime shapes: lengths whole tiles divide take the aligned kernel.
  const Variant &chosen =
      aligned && aligned->manifest.tilesDivide(shapes) ? *aligned : general;
  const KernelManifest &manifest = chosen.manifest;
  CUfunction function = chosen.function, maskFunction = chosen.maskFunction;
  // Each memref parameter is passed as its descriptor, flattened:
  // allocated ptr, aligned ptr, offset, sizes[rank], strides[rank].
  std::vector<uint64_t> words;
  for (size_t i = 0; i < manifest.params.size(); ++i)
    appendDescriptor(words, pointers[i], shapes[i], strides[i]);
  CudaDriver &cuda = CudaDriver::get();
  // Outputs the kernel adds to start at 0 (also where no block runs).
  for (size_t i = 0; i < manifest.params.size(); ++i)
    if (const ParamInfo &p = manifest.params[i]; p.zero)
      cuda.check(cuda.cuMemsetD8Async(
                     pointers[i], 0,
                     std::accumulate(shapes[i].begin(), shapes[i].end(),
                                     dtypeSize(p.dtype), std::multiplies<>()),
                     stream),
                 "cuMemsetD8Async");
  std::array<unsigned, 3> grid = manifest.launchGrid(
      shapes, manifest.persistent ? multiprocessorCount() : 0);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return; // No query rows, heads or batch: nothing to compute.
  if (maskFunction) {
    // The pre-kernel takes the inputs' descriptors, then the mask's; the
    // attention kernel takes the mask after its outputs.
    std::vector<int64_t> shape = manifest.blockMaskShape(shapes);
    size_t bytes = 1;
    for (int64_t d : shape)
      bytes *= size_t(d);
    if (shape[2] * shape[3] > 0x7fffffff || shape[0] > 65535 ||
        shape[1] > 65535)
      throw ManifestError("problem too large for the block mask");
    if (bytes > maskBytes) {
      if (maskBuffer)
        cuda.check(cuda.cuMemFree(maskBuffer), "cuMemFree");
      maskBuffer = 0;
      maskBytes = 0;
      cuda.check(cuda.cuMemAlloc(&maskBuffer, bytes), "cuMemAlloc");
      maskBytes = bytes;
    }
    std::vector<uint64_t> maskWords;
    for (size_t i = 0; i < manifest.params.size(); ++i)
      if (!manifest.params[i].output)
        appendDescriptor(maskWords, pointers[i], shapes[i], strides[i]);
    appendDescriptor(maskWords, maskBuffer, shape);
    appendDescriptor(words, maskBuffer, shape);
    std::vector<void *> maskArgs = argumentsOf(maskWords);
    const json &block = manifest.blockMask.at("block");
    // No keys: no tile to classify (and none the attention reads).
    if (bytes > 0)
      cuda.check(cuda.cuLaunchKernel(
                     maskFunction, unsigned(shape[2] * shape[3]),
                     unsigned(shape[1]), unsigned(shape[0]),
                     block.at(0).get<unsigned>(), block.at(1).get<unsigned>(),
                     block.at(2).get<unsigned>(), 0, stream, maskArgs.data(),
                     nullptr),
                 "cuLaunchKernel (block mask)");
  }
  if (manifest.tileCounter) {
    if (!counterBuffer) {
      constexpr size_t kCounterBytes = 8;
      cuda.check(cuda.cuMemAlloc(&counterBuffer, kCounterBytes), "cuMemAlloc");
      cuda.check(cuda.cuMemsetD8Async(counterBuffer, 0, kCounterBytes, stream),
                 "cuMemsetD8Async");
    }
    appendDescriptor(words, counterBuffer, {2});
  }
  std::vector<void *> args = argumentsOf(words);
  // TMA tensor maps, by value after the other parameters.
  std::vector<TensorMap> maps;
  maps.reserve(manifest.tensorMaps.size());
  for (const TensorMapInfo &t : manifest.tensorMaps) {
    const ParamInfo &p = manifest.params[t.param];
    maps.push_back(
        encodeTensorMap(t, p.name, p.dtype, pointers[t.param], shapes[t.param],
                        stridesOr(strides[t.param], shapes[t.param])));
  }
  for (TensorMap &map : maps)
    args.push_back(&map);
  cuda.check(cuda.cuLaunchKernel(
                 function, grid[0], grid[1], grid[2], manifest.block[0],
                 manifest.block[1], manifest.block[2],
                 manifest.dynamicSharedMemory, stream, args.data(), nullptr),
             "cuLaunchKernel");
}

HostKernels::HostKernels(const std::string &path)
    : module(loadModuleFile(path)) {}

HostKernels::~HostKernels() {
  if (module)
    CudaDriver::get().cuModuleUnload(module);
}

void HostKernels::launch(const std::string &name, int64_t grid, int64_t block,
                         const std::vector<CUdeviceptr> &pointers,
                         const std::vector<std::vector<int64_t>> &shapes,
                         CUstream stream) {
  if (pointers.size() != shapes.size())
    throw ManifestError("kernel " + name + ": " +
                        std::to_string(pointers.size()) + " buffers but " +
                        std::to_string(shapes.size()) + " shapes");
  CudaDriver &cuda = CudaDriver::get();
  CUfunction function = nullptr;
  {
    std::lock_guard<std::mutex> lock(functionsMutex);
    CUfunction &slot = functions[name];
    if (!slot)
      cuda.check(cuda.cuModuleGetFunction(&slot, module, name.c_str()),
                 "cuModuleGetFunction");
    function = slot;
  }
  if (grid <= 0 || grid > 0x7fffffff || block <= 0 || block > 1024)
    throw ManifestError("kernel " + name + ": grid " + std::to_string(grid) +
                        " or block " + std::to_string(block) + " out of range");
  std::vector<uint64_t> words;
  for (size_t i = 0; i < pointers.size(); ++i)
    appendDescriptor(words, pointers[i], shapes[i]);
  std::vector<void *> args = argumentsOf(words);
  cuda.check(cuda.cuLaunchKernel(function, unsigned(grid), 1, 1,
                                 unsigned(block), 1, 1, 0, stream, args.data(),
                                 nullptr),
             "cuLaunchKernel");
}
