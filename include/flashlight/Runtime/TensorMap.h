//===- TensorMap.h - TMA tensor maps for the kernels' parameters -*- C++
//-*-===//
//
// A kernel planned with `tma` takes, after its other parameters, one
// CUtensorMap (128 bytes, passed by value) per tensor it copies with TMA;
// the manifest lists them (`tensor_maps`: the parameter and the box). The
// launcher encodes each from the tensor's pointer, sizes and strides at
// every launch (a host call of about a microsecond, no device work).
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_RUNTIME_TENSORMAP_H
#define FLASHLIGHT_RUNTIME_TENSORMAP_H

#include "flashlight/Runtime/CudaDriver.h"

#include <cstdint>
#include <string>
#include <vector>

namespace flashlight::runtime {

/// One tensor map a kernel takes: of parameter `param`, boxes of
/// `boxColumns` (the innermost dim; with the 128-byte swizzle, at most 128
/// bytes) by `boxRows` (the next dim); the outer dims' boxes are 1.
/// `swizzled`: the 128-byte swizzle (the manifest's default), else none
/// (its `"swizzle": 0`).
struct TensorMapInfo {
  size_t param = 0;
  unsigned boxColumns = 0, boxRows = 0;
  bool swizzled = true;
};

/// A CUtensorMap's bytes, aligned as the driver requires.
struct alignas(128) TensorMap {
  uint64_t words[16];
};

/// Encodes the tensor map of `info` for the tensor of dtype `dtype` at
/// `pointer` with `shape` and element `strides` (row-major order, the
/// innermost stride 1), with the 128-byte swizzle and zero fill outside
/// the tensor. Throws CudaError naming `name` where the driver refuses it
/// (a stride or pointer off 16 bytes, an unsupported dtype).
TensorMap encodeTensorMap(const TensorMapInfo &info, const std::string &name,
                          const std::string &dtype, CUdeviceptr pointer,
                          const std::vector<int64_t> &shape,
                          const std::vector<int64_t> &strides);

} // namespace flashlight::runtime

#endif // FLASHLIGHT_RUNTIME_TENSORMAP_H
