//===- Gemm.h - Contractions of the reference path on cuBLAS ----*- C++ -*-===//
//
// A manifest entry's contraction steps (projections, matmuls) carry their
// einsum ("abd,cd->abc"). Where the einsum is a batched matrix product of
// the step's dense row-major buffers, it runs as one strided-batched cuBLAS
// GEMM; cuBLAS is opened at run time like the driver, so nothing here needs
// CUDA headers or a GPU to build.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_RUNTIME_GEMM_H
#define FLASHLIGHT_RUNTIME_GEMM_H

#include "flashlight/Runtime/CudaDriver.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flashlight::runtime {

/// One column-major strided-batched GEMM, as cuBLAS takes it:
/// C = op(A) op(B) (+ C), C m x n; `swapped` when A is the einsum's second
/// operand (the output's columns are its rows).
struct GemmPlan {
  bool transA = false, transB = false, swapped = false;
  int64_t m = 1, n = 1, k = 1;
  int64_t lda = 1, ldb = 1, ldc = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0, batch = 1;
};

/// The GEMM computing `einsum` (two operands, one result; each letter a
/// batch, row, column or contracted dim) over dense row-major tensors of
/// the given shapes. Row (column) letters split by another's in their
/// operand, as Gemma's `abfc,def->abcde`, batch over their leading letters,
/// which the other operand broadcasts (batch stride 0) where it holds no
/// batch letters. None where the einsum is no such product (a letter in one
/// operand only, a group of letters no batching reunites) or a size exceeds
/// cuBLAS's 32-bit arguments.
std::optional<GemmPlan> planGemm(const std::string &einsum,
                                 const std::vector<int64_t> &a,
                                 const std::vector<int64_t> &b,
                                 const std::vector<int64_t> &out);

/// cuBLAS, opened at run time: FLASHLIGHT_CUBLAS if set, else
/// libcublas.so.13 / .12 / .so on the library path or in
/// /usr/local/cuda/lib64.
class Cublas {
public:
  /// The library, loaded once, with a handle on the current context; null
  /// where it cannot be opened, with the reason in `why`.
  static Cublas *get(std::string *why = nullptr);

  /// Whether gemm() takes these manifest dtypes: A and B alike, bf16 / f16
  /// with a result of their type or f32, or f32 or f64 throughout.
  static bool supports(const std::string &ab, const std::string &c);

  /// C += A B as `plan` says, on `stream`; throws CudaError on failure.
  void gemm(const GemmPlan &plan, const std::string &abType,
            const std::string &cType, CUdeviceptr a, CUdeviceptr b,
            CUdeviceptr c, CUstream stream);

private:
  Cublas() = default;
  void *handle = nullptr;
  int (*setStream)(void *, CUstream) = nullptr;
  int (*gemmStridedBatchedEx)(void *, int, int, int, int, int, const void *,
                              const void *, int, int, long long, const void *,
                              int, int, long long, const void *, void *, int,
                              int, long long, int, int, int) = nullptr;
};

} // namespace flashlight::runtime

#endif // FLASHLIGHT_RUNTIME_GEMM_H
