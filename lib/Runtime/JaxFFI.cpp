//===- JaxFFI.cpp - Flashlight kernels as an XLA FFI custom call ---------===//
//
// `flashlight_call`: an XLA FFI handler that launches the attention kernel of
// a Flashlight manifest on XLA's stream, for `flashlight.jax` (jax.ffi
// custom calls inside jax.jit). Operands and results are the kernel's
// parameters in manifest order (inputs, then outputs), row-major as XLA
// lays them out; the attribute `manifest` is the manifest's path. Built as
// a shared library against jaxlib's FFI headers; no MLIR, no CUDA headers.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Runtime/CudaDriver.h"
#include "flashlight/Runtime/Kernel.h"

#include "xla/ffi/api/ffi.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ffi = xla::ffi;
using namespace flashlight::runtime;

namespace {

/// Loaded kernels by manifest path and device: a manifest is parsed and its
/// module loaded once per process and device.
std::mutex cacheMutex;
std::map<std::pair<std::string, int>, std::unique_ptr<Kernel>> kernels;

/// The loaded kernel of `path` on the current context's device (XLA's; the
/// primary context of device 0 if none is current).
Kernel &kernelFor(const std::string &path) {
  CudaDriver &cuda = CudaDriver::get();
  cuda.check(cuda.cuInit(0), "cuInit");
  CUcontext context = nullptr;
  cuda.check(cuda.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  if (!context)
    cuda.initDevice();
  CUdevice device = 0;
  cuda.check(cuda.cuCtxGetDevice(&device), "cuCtxGetDevice");
  int major = 0, minor = 0;
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
  cuda.check(cuda.cuDeviceGetAttribute(&major, 75, device),
             "cuDeviceGetAttribute");
  cuda.check(cuda.cuDeviceGetAttribute(&minor, 76, device),
             "cuDeviceGetAttribute");
  std::lock_guard<std::mutex> lock(cacheMutex);
  std::unique_ptr<Kernel> &slot = kernels[{path, int(device)}];
  if (!slot)
    slot = std::make_unique<Kernel>(KernelManifest::load(path),
                                    major * 10 + minor);
  return *slot;
}

ffi::Error call(CUstream stream, ffi::RemainingArgs args,
                ffi::RemainingRets rets, std::string_view manifest) {
  try {
    std::vector<CUdeviceptr> pointers;
    std::vector<std::vector<int64_t>> shapes;
    auto add = [&](const ffi::AnyBuffer &buffer) {
      pointers.push_back(CUdeviceptr(buffer.untyped_data()));
      auto dims = buffer.dimensions();
      shapes.emplace_back(dims.begin(), dims.end());
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
    kernelFor(std::string(manifest)).launch(pointers, shapes, stream);
    return ffi::Error::Success();
  } catch (const std::exception &e) {
    return ffi::Error(ffi::ErrorCode::kInternal,
                      std::string("flashlight_call: ") + e.what());
  }
}

} // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(FlashlightCall, call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<CUstream>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<std::string_view>("manifest"));
