//===- DType.cpp - Element encodings of kernel tensors --------------------===//

#include "flashlight/Runtime/DType.h"
#include "flashlight/Runtime/Kernel.h"

#include <cmath>
#include <cstdint>
#include <cstring>

using namespace flashlight::runtime;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t toBF16(float f) {
  uint32_t u = bitsOf(f);
  if (std::isnan(f))
    return uint16_t((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1); // round to nearest even
  return uint16_t(u >> 16);
}

float fromBF16(uint16_t h) { return floatOf(uint32_t(h) << 16); }

float fromF16(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f)
    return floatOf(sign | 0x7f800000 | (mant << 13));
  if (exp == 0)
    return (sign ? -1.0f : 1.0f) * std::ldexp(float(mant), -24);
  return floatOf(sign | (uint32_t(exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t toF16(float f) {
  uint16_t sign = (bitsOf(f) >> 16) & 0x8000;
  float a = std::fabs(f);
  if (std::isnan(f))
    return 0x7e00;
  if (a >= 65520.0f)
    return sign | 0x7c00;
  if (a < std::ldexp(1.0f, -14)) {
    // Subnormal: a multiple of 2^-24, rounded to nearest even.
    return sign | uint16_t(std::nearbyint(std::ldexp(a, 24)));
  }
  int e;
  float m = std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
  float scaled = std::nearbyint(std::ldexp(m, 11)); // 11 significant bits
  if (scaled >= 2048.0f) {
    scaled /= 2;
    ++e;
  }
  if (e - 1 + 15 >= 31)
    return sign | 0x7c00;
  return sign | uint16_t((e - 1 + 15) << 10) | (uint16_t(int(scaled)) & 0x3ff);
}

} // namespace

double flashlight::runtime::decodeElement(const void *p,
                                          const std::string &dtype) {
  if (dtype == "f32") {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (dtype == "f64") {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  if (dtype == "f16" || dtype == "bf16") {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return dtype == "f16" ? fromF16(h) : fromBF16(h);
  }
  if (dtype == "i1" || dtype == "i8")
    return *static_cast<const int8_t *>(p);
  if (dtype == "i16") {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  if (dtype == "i32") {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (dtype == "i64" || dtype == "index") {
    int64_t v;
    std::memcpy(&v, p, 8);
    return double(v);
  }
  throw ManifestError("unsupported dtype '" + dtype + "'");
}

void flashlight::runtime::encodeElement(double value, void *p,
                                        const std::string &dtype) {
  if (dtype == "f32") {
    float f = float(value);
    std::memcpy(p, &f, 4);
  } else if (dtype == "f64") {
    std::memcpy(p, &value, 8);
  } else if (dtype == "f16" || dtype == "bf16") {
    uint16_t h = dtype == "f16" ? toF16(float(value)) : toBF16(float(value));
    std::memcpy(p, &h, 2);
  } else if (dtype == "i1" || dtype == "i8") {
    *static_cast<int8_t *>(p) = int8_t(value);
  } else if (dtype == "i16") {
    int16_t v = int16_t(value);
    std::memcpy(p, &v, 2);
  } else if (dtype == "i32") {
    int32_t v = int32_t(value);
    std::memcpy(p, &v, 4);
  } else if (dtype == "i64" || dtype == "index") {
    int64_t v = int64_t(value);
    std::memcpy(p, &v, 8);
  } else {
    throw ManifestError("unsupported dtype '" + dtype + "'");
  }
}

double flashlight::runtime::roundToDType(double value,
                                         const std::string &dtype) {
  unsigned char buffer[8];
  encodeElement(value, buffer, dtype);
  return decodeElement(buffer, dtype);
}
