//===- CudaDriver.h - The CUDA driver API, loaded at run time ---*- C++ -*-===//
//
// libcuda.so.1 is opened with dlopen, so Flashlight builds and its tests run
// on machines without a GPU driver; using the driver there is a clear error.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_RUNTIME_CUDADRIVER_H
#define FLASHLIGHT_RUNTIME_CUDADRIVER_H

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace flashlight::runtime {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUevent = void *;

/// The driver library's symbol for entry point `name`: the version cuda.h
/// maps it to (cuMemAlloc -> cuMemAlloc_v2, ...), else `name` itself.
std::string driverSymbol(const std::string &name);

/// A failed driver call or a missing driver.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// cuda.h's CUDA_MEMCPY2D (the _v2 layout): a pitched 2-D copy.
struct CudaMemcpy2D {
  size_t srcXInBytes = 0, srcY = 0;
  int srcMemoryType = 0;
  const void *srcHost = nullptr;
  CUdeviceptr srcDevice = 0;
  void *srcArray = nullptr;
  size_t srcPitch = 0;
  size_t dstXInBytes = 0, dstY = 0;
  int dstMemoryType = 0;
  void *dstHost = nullptr;
  CUdeviceptr dstDevice = 0;
  void *dstArray = nullptr;
  size_t dstPitch = 0;
  size_t WidthInBytes = 0, Height = 0;
};
static_assert(sizeof(CudaMemcpy2D) == 128, "CUDA_MEMCPY2D's layout");
/// CU_MEMORYTYPE_DEVICE.
constexpr int kDeviceMemory = 2;

/// The driver entry points Flashlight uses.
struct CudaDriver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxGetDevice)(CUdevice *);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpy2DAsync)(const CudaMemcpy2D *, CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  /// CUDA 12 and later (null where the driver lacks it): TMA tensor maps.
  CUresult (*cuTensorMapEncodeTiled)(void *, int, unsigned, void *,
                                     const uint64_t *, const uint64_t *,
                                     const uint32_t *, const uint32_t *, int,
                                     int, int, int) = nullptr;

  /// The driver, loaded once; throws CudaError if libcuda cannot be opened.
  static CudaDriver &get();

  /// Throws CudaError naming `what` if `result` is not CUDA_SUCCESS.
  void check(CUresult result, const char *what) const;

  /// Makes device 0's primary context current; returns its compute
  /// capability as major * 10 + minor.
  int initDevice();
  /// The device of the current context (device 0's primary context, made
  /// current, if none is) and its compute capability.
  std::pair<CUdevice, int> currentDevice();
};

} // namespace flashlight::runtime

#endif // FLASHLIGHT_RUNTIME_CUDADRIVER_H
