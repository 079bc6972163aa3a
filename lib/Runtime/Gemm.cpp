//===- Gemm.cpp - Contractions of the reference path on cuBLAS ------------===//

#include "flashlight/Runtime/Gemm.h"

#include <climits>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>

using namespace flashlight::runtime;

namespace {

/// A dim of a matrix view: its size and its stride in elements.
struct Extent {
  int64_t size = 1, stride = 0;
};

/// Which operands hold a letter: the roles of a batched matrix product.
enum Role { Batch, Rows, Cols, Contracted };

/// The merged extent of the letters of `role` in `operand` (row-major
/// `shape`), if they stand side by side there in the order `order` gives
/// them; size 1 where there are none.
std::optional<Extent> merged(const std::string &operand,
                             const std::vector<int64_t> &shape,
                             const std::string &order) {
  if (order.empty())
    return Extent{};
  size_t first = operand.find(order[0]);
  if (first == std::string::npos ||
      operand.compare(first, order.size(), order) != 0)
    return std::nullopt;
  Extent e{1, 1};
  for (size_t d = first + order.size(); d < shape.size(); ++d)
    e.stride *= shape[d];
  for (size_t d = first; d < first + order.size(); ++d)
    e.size *= shape[d];
  return e;
}

/// The batch extent of `operand`: its letters of `order` merged, or size 1
/// and stride 0 (the operand broadcast over the batch) where it holds none
/// of them; none where it holds some only.
std::optional<Extent> batchOf(const std::string &operand,
                              const std::vector<int64_t> &shape,
                              const std::string &order) {
  size_t held = 0;
  for (char c : order)
    held += operand.find(c) != std::string::npos;
  if (held == 0)
    return Extent{1, 0};
  if (held != order.size())
    return std::nullopt;
  return merged(operand, shape, order);
}

/// A matrix view (rows, cols) as cuBLAS's column-major operand: not
/// transposed with ld = the column stride where rows are unit-stride,
/// transposed with ld = the row stride where columns are; none otherwise.
std::optional<std::pair<bool, int64_t>> columnMajor(Extent rows, Extent cols) {
  if (rows.stride == 1 || rows.size == 1) {
    int64_t ld = cols.size == 1 ? std::max<int64_t>(rows.size, 1) : cols.stride;
    if (ld >= std::max<int64_t>(rows.size, 1))
      return std::make_pair(false, ld);
  }
  if (cols.stride == 1 || cols.size == 1) {
    int64_t ld = rows.size == 1 ? std::max<int64_t>(cols.size, 1) : rows.stride;
    if (ld >= std::max<int64_t>(cols.size, 1))
      return std::make_pair(true, ld);
  }
  return std::nullopt;
}

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

/// The GEMM of the einsum whose letters take the roles `order` lists
/// (batch, rows, columns, contracted, each in the order its operands hold
/// them); none where an operand does not hold a role's letters side by
/// side or the views are not column-major matrices.
std::optional<GemmPlan>
planRoles(const std::string &la, const std::string &lb, const std::string &lo,
          const std::vector<int64_t> &a, const std::vector<int64_t> &b,
          const std::vector<int64_t> &out, const std::string (&order)[4]) {
  std::optional<Extent> aBatch = batchOf(la, a, order[Batch]),
                        aRows = merged(la, a, order[Rows]),
                        aK = merged(la, a, order[Contracted]),
                        bBatch = batchOf(lb, b, order[Batch]),
                        bK = merged(lb, b, order[Contracted]),
                        bCols = merged(lb, b, order[Cols]),
                        oBatch = merged(lo, out, order[Batch]),
                        oRows = merged(lo, out, order[Rows]),
                        oCols = merged(lo, out, order[Cols]);
  for (const auto *e :
       {&aBatch, &aRows, &aK, &bBatch, &bK, &bCols, &oBatch, &oRows, &oCols})
    if (!*e)
      return std::nullopt;

  GemmPlan plan;
  plan.batch = oBatch->size;
  Extent first[2], second[2]; // (rows, cols) of op(A) and op(B).
  std::optional<std::pair<bool, int64_t>> c = columnMajor(*oRows, *oCols);
  if (c && !c->first) {
    // C = A B, C m x n column-major.
    plan.m = oRows->size, plan.n = oCols->size, plan.ldc = c->second;
    first[0] = *aRows, first[1] = *aK, second[0] = *bK, second[1] = *bCols;
    plan.strideA = aBatch->stride, plan.strideB = bBatch->stride;
  } else {
    // C^T = B^T A^T: the output's columns are unit-stride.
    c = columnMajor(*oCols, *oRows);
    if (!c || c->first)
      return std::nullopt;
    plan.swapped = true;
    plan.m = oCols->size, plan.n = oRows->size, plan.ldc = c->second;
    first[0] = *bCols, first[1] = *bK, second[0] = *aK, second[1] = *aRows;
    plan.strideA = bBatch->stride, plan.strideB = aBatch->stride;
  }
  plan.k = aK->size;
  plan.strideC = oBatch->stride;
  std::optional<std::pair<bool, int64_t>> opA = columnMajor(first[0], first[1]),
                                          opB =
                                              columnMajor(second[0], second[1]);
  if (!opA || !opB)
    return std::nullopt;
  plan.transA = opA->first, plan.lda = opA->second;
  plan.transB = opB->first, plan.ldb = opB->second;
  if (plan.batch == 1)
    plan.strideA = plan.strideB = plan.strideC = 0;
  for (int64_t v :
       {plan.m, plan.n, plan.k, plan.lda, plan.ldb, plan.ldc, plan.batch})
    if (!fitsInt(v))
      return std::nullopt;
  return plan;
}

} // namespace

std::optional<GemmPlan> flashlight::runtime::planGemm(
    const std::string &einsum, const std::vector<int64_t> &a,
    const std::vector<int64_t> &b, const std::vector<int64_t> &out) {
  size_t comma = einsum.find(','), arrow = einsum.find("->");
  if (comma == std::string::npos || arrow == std::string::npos || arrow < comma)
    return std::nullopt;
  std::string la = einsum.substr(0, comma),
              lb = einsum.substr(comma + 1, arrow - comma - 1),
              lo = einsum.substr(arrow + 2);
  if (la.size() != a.size() || lb.size() != b.size() || lo.size() != out.size())
    return std::nullopt;
  for (const std::string *letters : {&la, &lb, &lo})
    for (size_t d = 0; d < letters->size(); ++d)
      if (letters->find((*letters)[d], d + 1) != std::string::npos)
        return std::nullopt; // A diagonal, not a product.
  // Each letter's size (consistent across operands) and role.
  std::map<char, int64_t> sizes;
  auto record = [&](const std::string &letters,
                    const std::vector<int64_t> &shape) {
    for (size_t d = 0; d < letters.size(); ++d) {
      auto [it, added] = sizes.emplace(letters[d], shape[d]);
      if (!added && it->second != shape[d])
        return false;
      if (shape[d] == 0)
        return false; // Empty products: the step's kernel handles them.
    }
    return true;
  };
  if (!record(la, a) || !record(lb, b) || !record(lo, out))
    return std::nullopt;
  // The letters of each role, in the order the first operand holding them
  // lists them (A for batch, rows and contracted, B for columns).
  std::string order[4];
  for (char c : la + lb) {
    bool inA = la.find(c) != std::string::npos,
         inB = lb.find(c) != std::string::npos,
         inO = lo.find(c) != std::string::npos;
    Role role = inA && inB ? (inO ? Batch : Contracted)
                : inO      ? (inA ? Rows : Cols)
                           : Role(-1);
    if (int(role) < 0)
      return std::nullopt; // Summed over one operand only.
    if (order[role].find(c) == std::string::npos)
      order[role] += c;
  }
  for (char c : lo)
    if (la.find(c) == std::string::npos && lb.find(c) == std::string::npos)
      return std::nullopt; // Broadcast into the output.
  if (std::optional<GemmPlan> plan = planRoles(la, lb, lo, a, b, out, order))
    return plan;
  // A group of row (column) letters split by another's in its operand
  // (Gemma's abfc,def->abcde): its leading letters become batch letters
  // that the other operand, which lacks them, broadcasts (stride 0).
  for (Role role : {Rows, Cols}) {
    const std::string &group = order[role];
    for (size_t lead = 1; lead < group.size(); ++lead) {
      std::string moved[4] = {order[0], order[1], order[2], order[3]};
      moved[Batch] += group.substr(0, lead);
      moved[role] = group.substr(lead);
      if (std::optional<GemmPlan> plan =
              planRoles(la, lb, lo, a, b, out, moved))
        return plan;
    }
  }
  return std::nullopt;
}

namespace {

/// cudaDataType of a manifest dtype; -1 for none cuBLAS takes here.
int cudaDataType(const std::string &dtype) {
  return dtype == "f32"    ? 0
         : dtype == "f64"  ? 1
         : dtype == "f16"  ? 2
         : dtype == "bf16" ? 14
                           : -1;
}

} // namespace

bool Cublas::supports(const std::string &ab, const std::string &c) {
  if (ab == "bf16" || ab == "f16")
    return c == ab || c == "f32";
  return (ab == "f32" || ab == "f64") && c == ab;
}

Cublas *Cublas::get(std::string *why) {
  static std::mutex mutex;
  static Cublas *cublas = nullptr;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (!cublas && failure.empty()) {
    std::vector<std::string> names;
    if (const char *path = std::getenv("FLASHLIGHT_CUBLAS"))
      names.push_back(path);
    for (const char *name :
         {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
          "/usr/local/cuda/lib64/libcublas.so"})
      names.push_back(name);
    void *lib = nullptr;
    for (const std::string &name : names)
      if ((lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
    int (*create)(void **) = nullptr;
    auto *c = new Cublas();
    if (lib) {
      create =
          reinterpret_cast<int (*)(void **)>(dlsym(lib, "cublasCreate_v2"));
      c->setStream = reinterpret_cast<decltype(c->setStream)>(
          dlsym(lib, "cublasSetStream_v2"));
      c->gemmStridedBatchedEx =
          reinterpret_cast<decltype(c->gemmStridedBatchedEx)>(
              dlsym(lib, "cublasGemmStridedBatchedEx"));
    }
    if (!lib)
      failure = "cannot open libcublas (set FLASHLIGHT_CUBLAS to its path)";
    else if (!create || !c->setStream || !c->gemmStridedBatchedEx)
      failure = "libcublas lacks cublasCreate_v2, cublasSetStream_v2 or "
                "cublasGemmStridedBatchedEx";
    else if (int status = create(&c->handle))
      failure = "cublasCreate failed (status " + std::to_string(status) + ")";
    if (failure.empty())
      cublas = c;
    else
      delete c;
  }
  if (!cublas && why)
    *why = failure;
  return cublas;
}

void Cublas::gemm(const GemmPlan &plan, const std::string &abType,
                  const std::string &cType, CUdeviceptr a, CUdeviceptr b,
                  CUdeviceptr c, CUstream stream) {
  if (!supports(abType, cType))
    throw CudaError("cuBLAS GEMM: no " + abType + " x " + abType + " -> " +
                    cType);
  if (int status = setStream(handle, stream))
    throw CudaError("cublasSetStream failed (status " + std::to_string(status) +
                    ")");
  bool f64 = abType == "f64";
  float one32 = 1.0f;
  double one64 = 1.0;
  const void *one = f64 ? static_cast<const void *>(&one64)
                        : static_cast<const void *>(&one32);
  // CUBLAS_COMPUTE_32F / _64F, CUBLAS_GEMM_DEFAULT.
  int compute = f64 ? 70 : 68;
  CUdeviceptr first = plan.swapped ? b : a, second = plan.swapped ? a : b;
  int status = gemmStridedBatchedEx(
      handle, plan.transA, plan.transB, int(plan.m), int(plan.n), int(plan.k),
      one, reinterpret_cast<const void *>(first), cudaDataType(abType),
      int(plan.lda), plan.strideA, reinterpret_cast<const void *>(second),
      cudaDataType(abType), int(plan.ldb), plan.strideB, one,
      reinterpret_cast<void *>(c), cudaDataType(cType), int(plan.ldc),
      plan.strideC, int(plan.batch), compute, -1);
  if (status)
    throw CudaError("cublasGemmStridedBatchedEx failed (status " +
                    std::to_string(status) + ")");
}
