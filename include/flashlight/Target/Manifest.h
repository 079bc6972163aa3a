//===- Manifest.h - Describe compiled kernels as JSON ------------*- C++
//-*-===//
//
// The manifest is the contract between the compiler and the runtimes: the
// kernel symbol, its parameters (role, dtype, shape, strides), the launch
// geometry, the per-arch artifacts, and the attention program itself in a
// small serialized form that the runtime's fp64 reference interpreter runs.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_TARGET_MANIFEST_H
#define FLASHLIGHT_TARGET_MANIFEST_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <nlohmann/json.hpp>

namespace flashlight {

/// Version of the manifest format; bump on incompatible changes.
constexpr int kManifestVersion = 1;

/// The parameters of the kernel generated from `func` (its arguments, then
/// its results), with their roles in the attention (`q0`, `k0`, `v`,
/// `sink0`, `capture0`, `out`, `lse0`; `argN` / `resultN` otherwise).
nlohmann::json describeParams(mlir::func::FuncOp func);

/// The attention in `func` serialized for the reference interpreter, or a
/// failure (with a diagnostic) if it uses an op the interpreter lacks.
mlir::FailureOr<nlohmann::json> exportProgram(mlir::func::FuncOp func);

} // namespace flashlight

#endif // FLASHLIGHT_TARGET_MANIFEST_H
