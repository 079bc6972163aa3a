//===- JaxFFI.cpp - Flashlight kernels as an XLA FFI custom call ---------===//
//
// `flashlight_call`: an XLA FFI handler that launches the attention kernel of
// a Flashlight manifest on XLA's stream, for `flashlight.jax` (jax.ffi
// custom calls inside jax.jit); `flashlight_host_kernel`: one kernel of the
// manifest entry's reference path (a step the entry runs around it). Operands
// and results are the kernel's parameters in manifest order (inputs, then
// outputs), row-major as XLA lays them out; the attributes `manifest` and
// `attention` are the manifest's path and which of the program's attention
// kernels to launch (0: the top level's), and `layouts` how each buffer is
// the kernel's tensor: per parameter, for each kernel dim the buffer dim it
// is (a permutation; `flashlight.jax` passes the caller's [B, N, H, D]
// arrays as the kernel's [B, H, N, D] this way, read and written in place
// through the kernel's runtime strides), all parameters' concatenated; empty
// where every buffer is its parameter as it is. Built as a shared library
// against jaxlib's FFI headers; no MLIR, no CUDA headers.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Runtime/CudaDriver.h"
#include "flashlight/Runtime/Kernel.h"

#include "xla/ffi/api/ffi.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ffi = xla::ffi;
using namespace flashlight::runtime;

namespace {

/// Loaded kernels by manifest path, attention and device: a manifest is
/// parsed and its module loaded once per process and device.
std::mutex cacheMutex;
std::map<std::tuple<std::string, int64_t, int>, std::unique_ptr<Kernel>>
    kernels;

/// The loaded kernel of attention `attention` of `path` on the current
/// context's device.
Kernel &kernelFor(const std::string &path, int64_t attention) {
  auto [device, capability] = CudaDriver::get().currentDevice();
  std::lock_guard<std::mutex> lock(cacheMutex);
  std::unique_ptr<Kernel> &slot = kernels[{path, attention, int(device)}];
  if (!slot)
    slot = std::make_unique<Kernel>(
        KernelManifest::load(path, size_t(attention)), capability);
  return *slot;
}

/// A buffer of dims `dims` (row-major) seen through `perm` (kernel dim d is
/// buffer dim perm[d]): the kernel tensor's shape and element strides.
/// False where `perm` is no permutation of the buffer's dims.
bool permuted(const std::vector<int64_t> &dims, ffi::Span<const int64_t> perm,
              std::vector<int64_t> &shape, std::vector<int64_t> &strides) {
  size_t rank = dims.size();
  std::vector<int64_t> rowMajor(rank);
  int64_t stride = 1;
  for (size_t d = rank; d-- > 0;) {
    rowMajor[d] = stride;
    stride *= dims[d];
  }
  std::vector<bool> seen(rank, false);
  shape.assign(rank, 0);
  strides.assign(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    int64_t from = perm[d];
    if (from < 0 || size_t(from) >= rank || seen[from])
      return false;
    seen[from] = true;
    shape[d] = dims[from];
    strides[d] = rowMajor[from];
  }
  return true;
}

ffi::Error call(CUstream stream, ffi::RemainingArgs args,
                ffi::RemainingRets rets, std::string_view manifest,
                int64_t attention, ffi::Span<const int64_t> layouts) {
  try {
    if (attention < 0)
      return ffi::Error::InvalidArgument("flashlight_call: negative "
                                         "attention index");
    std::vector<CUdeviceptr> pointers;
    std::vector<std::vector<int64_t>> shapes, strides;
    size_t used = 0;
    bool bad = false;
    auto add = [&](const ffi::AnyBuffer &buffer) {
      pointers.push_back(CUdeviceptr(buffer.untyped_data()));
      auto dims = buffer.dimensions();
      std::vector<int64_t> own(dims.begin(), dims.end());
      shapes.emplace_back();
      strides.emplace_back();
      if (layouts.size() == 0) {
        shapes.back() = own;
        return;
      }
      bad |=
          used + own.size() > layouts.size() ||
          !permuted(
              own, ffi::Span<const int64_t>(layouts.begin() + used, own.size()),
              shapes.back(), strides.back());
      used += own.size();
    };
    for (size_t i = 0; i < args.size(); ++i) {
      ffi::ErrorOr<ffi::AnyBuffer> arg = args.get<ffi::AnyBuffer>(i);
      if (arg.has_error())
        return arg.error();
      add(*arg);
    }
    for (size_t i = 0; i < rets.size(); ++i) {
      ffi::ErrorOr<ffi::Result<ffi::AnyBuffer>> ret =
          rets.get<ffi::AnyBuffer>(i);
      if (ret.has_error())
        return ret.error();
      add(**ret);
    }
    if (bad || used != layouts.size())
      return ffi::Error::InvalidArgument(
          "flashlight_call: `layouts` is not one permutation of each "
          "buffer's dims");
    kernelFor(std::string(manifest), attention)
        .launch(pointers, shapes, strides, stream);
    return ffi::Error::Success();
  } catch (const std::exception &e) {
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string("flashlight_call: ") + e.what());
  }
}

/// Loaded reference-path modules by file path and device.
std::map<std::pair<std::string, int>, std::unique_ptr<HostKernels>> hostModules;

/// The loaded module at `path` on the current context's device.
HostKernels &hostModuleFor(const std::string &path) {
  CUdevice device = CudaDriver::get().currentDevice().first;
  std::lock_guard<std::mutex> lock(cacheMutex);
  std::unique_ptr<HostKernels> &slot = hostModules[{path, int(device)}];
  if (!slot)
    slot = std::make_unique<HostKernels>(path);
  return *slot;
}

/// One reference-path step: kernel `kernel` of module `module`, its
/// parameters the operands with the results at positions `results` (in
/// parameter order, as the manifest step's `args` list them).
ffi::Error hostCall(CUstream stream, ffi::RemainingArgs args,
                    ffi::RemainingRets rets, std::string_view module,
                    std::string_view kernel, int64_t grid, int64_t block,
                    ffi::Span<const int64_t> results) {
  try {
    size_t total = args.size() + rets.size();
    std::vector<CUdeviceptr> pointers(total);
    std::vector<std::vector<int64_t>> shapes(total);
    std::vector<bool> isResult(total, false);
    for (int64_t position : results) {
      if (position < 0 || size_t(position) >= total)
        return ffi::Error::InvalidArgument("flashlight_host_kernel: result "
                                           "position out of range");
      isResult[position] = true;
    }
    size_t nextArg = 0, nextRet = 0;
    for (size_t p = 0; p < total; ++p) {
      std::optional<ffi::AnyBuffer> buffer;
      if (isResult[p]) {
        auto ret = rets.get<ffi::AnyBuffer>(nextRet++);
        if (ret.has_error())
          return ret.error();
        buffer = **ret;
      } else {
        auto arg = args.get<ffi::AnyBuffer>(nextArg++);
        if (arg.has_error())
          return arg.error();
        buffer = *arg;
      }
      pointers[p] = CUdeviceptr(buffer->untyped_data());
      auto dims = buffer->dimensions();
      shapes[p].assign(dims.begin(), dims.end());
    }
    hostModuleFor(std::string(module))
        .launch(std::string(kernel), grid, block, pointers, shapes, stream);
    return ffi::Error::Success();
  } catch (const std::exception &e) {
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string("flashlight_host_kernel: ") + e.what());
  }
}

} // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlashlightHostKernel, hostCall,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<CUstream>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<std::string_view>("module")
                                  .Attr<std::string_view>("kernel")
                                  .Attr<int64_t>("grid")
                                  .Attr<int64_t>("block")
                                  .Attr<ffi::Span<const int64_t>>("results"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlashlightCall, call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<CUstream>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<std::string_view>("manifest")
                                  .Attr<int64_t>("attention")
                                  .Attr<ffi::Span<const int64_t>>("layouts"));
