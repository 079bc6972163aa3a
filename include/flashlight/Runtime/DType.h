//===- DType.h - Element encodings of kernel tensors ------------*- C++ -*-===//

#ifndef FLASHLIGHT_RUNTIME_DTYPE_H
#define FLASHLIGHT_RUNTIME_DTYPE_H

#include <string>

namespace flashlight::runtime {

/// Reads one element of `dtype` ("f16", "bf16", "f32", "i32", ...) as double.
double decodeElement(const void *p, const std::string &dtype);

/// Writes `value` as one element of `dtype`, rounding to nearest even.
void encodeElement(double value, void *p, const std::string &dtype);

/// `value` rounded to `dtype` and back (what the GPU sees of it).
double roundToDType(double value, const std::string &dtype);

} // namespace flashlight::runtime

#endif // FLASHLIGHT_RUNTIME_DTYPE_H
