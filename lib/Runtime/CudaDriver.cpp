//===- CudaDriver.cpp - The CUDA driver API, loaded at run time -----------===//

#include "flashlight/Runtime/CudaDriver.h"

#include <dlfcn.h>

using namespace flashlight::runtime;

namespace {

/// Resolves `symbol` from the driver library into `fn`.
template <typename Fn>
void resolve(void *lib, Fn &fn, const std::string &symbol) {
  void *sym = dlsym(lib, symbol.c_str());
  if (!sym)
    throw CudaError(std::string("libcuda.so.1 lacks ") + symbol);
  fn = reinterpret_cast<Fn>(sym);
}

} // namespace

std::string flashlight::runtime::driverSymbol(const std::string &name) {
  // The versions cuda.h maps these names to, whose signatures match the
  // declarations in CudaDriver.h. Every other entry point is its own name:
  // a `_v2` the driver also exports may take other parameters
  // (cuCtxSynchronize_v2 takes the context to synchronize), so it is never
  // guessed.
  static const std::pair<const char *, const char *> versioned[] = {
      {"cuMemAlloc", "cuMemAlloc_v2"},
      {"cuMemFree", "cuMemFree_v2"},
      {"cuMemcpyHtoD", "cuMemcpyHtoD_v2"},
      {"cuMemcpyDtoH", "cuMemcpyDtoH_v2"},
      {"cuMemsetD8", "cuMemsetD8_v2"},
      {"cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2"},
      {"cuMemcpy2DAsync", "cuMemcpy2DAsync_v2"},
      {"cuEventElapsedTime", "cuEventElapsedTime_v2"},
      {"cuEventDestroy", "cuEventDestroy_v2"},
  };
  for (const auto &[from, to] : versioned)
    if (name == from)
      return to;
  return name;
}

namespace {

CudaDriver load() {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    throw CudaError(std::string("no CUDA driver: cannot open libcuda.so.1 (") +
                    dlerror() + ")");
  CudaDriver d;
#define FL_RESOLVE(name) resolve(lib, d.name, driverSymbol(#name))
  FL_RESOLVE(cuInit);
  FL_RESOLVE(cuDeviceGet);
  FL_RESOLVE(cuDeviceGetAttribute);
  FL_RESOLVE(cuDeviceGetName);
  FL_RESOLVE(cuDevicePrimaryCtxRetain);
  FL_RESOLVE(cuCtxSetCurrent);
  FL_RESOLVE(cuCtxGetCurrent);
  FL_RESOLVE(cuCtxGetDevice);
  FL_RESOLVE(cuCtxSynchronize);
  FL_RESOLVE(cuModuleLoadData);
  FL_RESOLVE(cuModuleUnload);
  FL_RESOLVE(cuModuleGetFunction);
  FL_RESOLVE(cuFuncSetAttribute);
  FL_RESOLVE(cuMemAlloc);
  FL_RESOLVE(cuMemFree);
  FL_RESOLVE(cuMemcpyHtoD);
  FL_RESOLVE(cuMemcpyDtoH);
  FL_RESOLVE(cuMemsetD8);
  FL_RESOLVE(cuMemsetD8Async);
  FL_RESOLVE(cuMemcpyDtoDAsync);
  FL_RESOLVE(cuMemcpy2DAsync);
  FL_RESOLVE(cuLaunchKernel);
  FL_RESOLVE(cuEventCreate);
  FL_RESOLVE(cuEventRecord);
  FL_RESOLVE(cuEventSynchronize);
  FL_RESOLVE(cuEventElapsedTime);
  FL_RESOLVE(cuEventDestroy);
  FL_RESOLVE(cuGetErrorString);
#undef FL_RESOLVE
  d.cuTensorMapEncodeTiled =
      reinterpret_cast<decltype(d.cuTensorMapEncodeTiled)>(
          dlsym(lib, "cuTensorMapEncodeTiled"));
  return d;
}

} // namespace

CudaDriver &CudaDriver::get() {
  // A failed load is retried on the next call (and throws again).
  static CudaDriver *driver = nullptr;
  if (!driver)
    driver = new CudaDriver(load());
  return *driver;
}

void CudaDriver::check(CUresult result, const char *what) const {
  if (result == 0)
    return;
  const char *text = nullptr;
  if (cuGetErrorString)
    cuGetErrorString(result, &text);
  throw CudaError(std::string(what) + " failed: " +
                  (text ? text : "error " + std::to_string(result)));
}

std::pair<CUdevice, int> CudaDriver::currentDevice() {
  check(cuInit(0), "cuInit");
  CUcontext context = nullptr;
  check(cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  if (!context)
    initDevice();
  CUdevice device = 0;
  check(cuCtxGetDevice(&device), "cuCtxGetDevice");
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
  int major = 0, minor = 0;
  check(cuDeviceGetAttribute(&major, 75, device), "cuDeviceGetAttribute");
  check(cuDeviceGetAttribute(&minor, 76, device), "cuDeviceGetAttribute");
  return {device, major * 10 + minor};
}

int CudaDriver::initDevice() {
  check(cuInit(0), "cuInit");
  CUdevice device;
  check(cuDeviceGet(&device, 0), "cuDeviceGet");
  CUcontext context;
  check(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(context), "cuCtxSetCurrent");
  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR.
  int major = 0, minor = 0;
  check(cuDeviceGetAttribute(&major, 75, device), "cuDeviceGetAttribute");
  check(cuDeviceGetAttribute(&minor, 76, device), "cuDeviceGetAttribute");
  return major * 10 + minor;
}
