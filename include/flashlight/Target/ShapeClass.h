//===- ShapeClass.h - Kernels that take runtime extents ---------*- C++ -*-===//
//
// A kernel with runtime shapes serves every batch size and sequence length
// of a shape class. Exported programs are static, so the class is found by
// comparing the program with the same program exported at other shapes (a
// probe): where the two differ only in the extents of tensors, those
// extents become dynamic; where anything else differs (a constant, an op,
// a captured tensor's contents), the program depends on its shape and is
// refused. Each dynamic dim is named by a symbol (`B`, `M`, `N`, ...)
// carried as the argument and result attribute `flashlight.extents`; dims
// with one symbol are equal at run time.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_TARGET_SHAPECLASS_H
#define FLASHLIGHT_TARGET_SHAPECLASS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace flashlight {

/// Name of the argument / result attribute holding a tensor's extent
/// symbols: an array of strings, "" for a static dim.
constexpr llvm::StringLiteral kExtentsAttrName = "flashlight.extents";

/// Makes dynamic the extents in which `program`'s functions (after
/// attn-outline) differ from `probe`'s (the same source exported at other
/// shapes, after the same passes), and names them: a kernel's batch `B`,
/// query length `M`, key length `N` (then `M1`, `N1`, ... for further
/// attentions). The kernel functions are retyped; the host function, which
/// the manifest only describes, gets its signature retyped. Fails, with a
/// diagnostic located in `program`, where the two differ otherwise or where
/// an extent that differs is neither a batch nor a sequence length, or
/// where a captured constant (a file beside the program, in `programDir` and
/// `probeDir`) differs.
mlir::LogicalResult generalizeShapes(mlir::ModuleOp program,
                                     mlir::ModuleOp probe,
                                     llvm::StringRef programDir,
                                     llvm::StringRef probeDir);

/// Names the dynamic dims of an attention kernel function written with
/// `?` extents (attn IR): Q, K, V and the outputs by their roles; captures
/// must carry `flashlight.extents`. Fails, with a diagnostic, on a dynamic
/// head count, head dim, or an unnamed capture dim.
mlir::LogicalResult nameDynamicExtents(mlir::func::FuncOp func);

/// The extent symbols of `func`'s argument (or, past the arguments, result)
/// `index`: one per dim, "" where static.
std::vector<std::string> extentSymbols(mlir::func::FuncOp func, unsigned index);

} // namespace flashlight

#endif // FLASHLIGHT_TARGET_SHAPECLASS_H
