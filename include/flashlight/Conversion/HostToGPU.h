//===- HostToGPU.h - The reference path's kernel interface -------*- C++
//-*-===//
//
// flashlight-host-to-gpu turns each linalg.generic of a host function into
// a kernel; flashlight-compile then describes the function as steps. Both
// must agree on a kernel's parameters: this is where they are defined.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_CONVERSION_HOSTTOGPU_H
#define FLASHLIGHT_CONVERSION_HOSTTOGPU_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

namespace flashlight {

/// Threads per block of the reference path's kernels.
constexpr int64_t kHostBlockSize = 256;

/// The tensors defined outside `generic` that its body reads (through
/// `tensor.extract`, directly or as the source of an extracted scalar
/// captured from the function), in first-use order: the kernel's last
/// parameters.
llvm::SmallVector<mlir::Value>
hostKernelCaptures(mlir::linalg::GenericOp generic);

/// All of the kernel's parameters: inputs, initial values, results, then
/// the captures.
llvm::SmallVector<mlir::Value>
hostKernelParams(mlir::linalg::GenericOp generic);

/// Clones scalar `op` into a kernel body through `map`, with the fixes the
/// NVVM lowering needs: `math.fpowi` with an exponent wider than i32 gets
/// it narrowed (libdevice's `__nv_powif` takes an i32, and upstream's
/// lowering passes a wider one as it is, which reads garbage).
void cloneForKernel(mlir::OpBuilder &b, mlir::Operation &op,
                    mlir::IRMapping &map);

/// The reference path's functions of `module`: those with a body and no
/// `attn` operation (the host passes work on these only).
llvm::SmallVector<mlir::func::FuncOp> hostFunctions(mlir::ModuleOp module);

/// How the accumulators of `generic` combine, when each yields
/// `combine(acc, term)` with an associative f32 `combine` (add, mul, max,
/// min) and a term that reads no accumulator (a sum of squares, a row max,
/// a table's gradient): the combining ops, in accumulator order; none
/// otherwise. Such a reduction may run in any order and be split.
std::optional<llvm::SmallVector<mlir::Operation *>>
reductionCombiners(mlir::linalg::GenericOp generic);

/// The identity of a combining op of reductionCombiners (0, 1, -inf, inf).
mlir::Value combinerIdentity(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Operation *combiner);

} // namespace flashlight

#endif // FLASHLIGHT_CONVERSION_HOSTTOGPU_H
