//===- TensorMap.cpp - TMA tensor maps for the kernels' parameters --------===//

#include "flashlight/Runtime/TensorMap.h"

#include "flashlight/Runtime/Kernel.h"

using namespace flashlight::runtime;

namespace {

/// CUtensorMapDataType of a manifest dtype (cuda.h's enum values).
int tensorMapDataType(const std::string &dtype) {
  if (dtype == "f16")
    return 6;
  if (dtype == "f32")
    return 7;
  if (dtype == "bf16")
    return 9;
  return -1;
}

/// cuda.h: CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
/// CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
/// (elements outside the tensor read as zero).
constexpr int kInterleaveNone = 0, kSwizzleNone = 0, kSwizzle128B = 3,
              kL2Promotion256B = 3, kOutOfBoundsZero = 0;

} // namespace

TensorMap flashlight::runtime::encodeTensorMap(
    const TensorMapInfo &info, const std::string &name,
    const std::string &dtype, CUdeviceptr pointer,
    const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int dataType = tensorMapDataType(dtype);
  size_t rank = shape.size();
  if (dataType < 0 || rank < 2 || rank > 5 || strides.size() != rank)
    throw CudaError(name + ": no TMA tensor map for a " + dtype +
                    " tensor of rank " + std::to_string(rank));
  uint64_t element = dtypeSize(dtype);
  // Innermost dim first. An empty dim (no rows: the kernel copies none)
  // is described as one row, and a dim of one element gets the stride its
  // inner dims would give it: neither is ever stepped over.
  uint64_t dims[5], byteStrides[4];
  uint32_t box[5], elementStrides[5];
  uint64_t natural = element;
  for (size_t i = 0; i < rank; ++i) {
    size_t d = rank - 1 - i;
    dims[i] = uint64_t(std::max<int64_t>(shape[d], 1));
    box[i] = i == 0 ? info.boxColumns : i == 1 ? info.boxRows : 1;
    elementStrides[i] = 1;
    if (i > 0) {
      uint64_t stride = uint64_t(strides[d]) * element;
      byteStrides[i - 1] = shape[d] <= 1 ? (natural + 15) / 16 * 16 : stride;
    }
    natural *= dims[i];
  }
  CudaDriver &cuda = CudaDriver::get();
  if (!cuda.cuTensorMapEncodeTiled)
    throw CudaError(name + ": this driver has no cuTensorMapEncodeTiled "
                           "(CUDA 12 or later), which TMA kernels need");
  TensorMap map;
  CUresult result = cuda.cuTensorMapEncodeTiled(
      &map, dataType, unsigned(rank), reinterpret_cast<void *>(pointer), dims,
      byteStrides, box, elementStrides, kInterleaveNone,
      info.swizzled ? kSwizzle128B : kSwizzleNone, kL2Promotion256B,
      kOutOfBoundsZero);
  if (result != 0) {
    std::string text = "(";
    for (size_t d = 0; d < rank; ++d)
      text += (d ? ", " : "") + std::to_string(strides[d]);
    throw CudaError(name + ": the driver refused its TMA tensor map (error " +
                    std::to_string(result) + ", strides " + text +
                    ") in elements): strides and the pointer must be "
                    "multiples of 16 bytes");
  }
  return map;
}
