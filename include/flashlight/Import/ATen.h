//===- ATen.h - Lowering ATen operator calls to linalg on tensors -*- C++
//-*-===//
//
// The PyTorch importers (the flashlight-graph JSON of torch.export, and
// torch-mlir's `torch` dialect) read the same ATen operators. Both hand each
// call to this lowering, its arguments encoded as the JSON graph encodes them
// (docs/json-graph.md: `{"ref": name}` for tensors, numbers, lists, null),
// so one handler per operator serves both.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_IMPORT_ATEN_H
#define FLASHLIGHT_IMPORT_ATEN_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include <memory>
#include <nlohmann/json_fwd.hpp>

namespace flashlight {

/// An error at `loc`, starting with "node '<label>': " when `label` is not
/// empty: how both PyTorch importers locate what is wrong.
mlir::InFlightDiagnostic emitNodeError(mlir::Location loc,
                                       llvm::StringRef label);

/// Lowers ATen calls one at a time into linalg/tensor/arith/math on tensors,
/// at `builder()`'s insertion point.
class ATenLowering {
public:
  explicit ATenLowering(mlir::MLIRContext *ctx);
  ~ATenLowering();

  /// Where lowered operations are inserted.
  mlir::OpBuilder &builder();

  /// Names `results` for later `{"ref": name}` arguments (`"index": k` picks
  /// result k). Fails, with a diagnostic at `loc`, if `name` is taken.
  mlir::LogicalResult define(llvm::StringRef name,
                             llvm::ArrayRef<mlir::Value> results,
                             mlir::Location loc);

  /// Lowers a call of `target` (`aten.<op>.<overload>`) whose arguments are
  /// `call`'s `"args"` (a list) and `"kwargs"` (an object, optional), with
  /// results declared `outs`. Returns one value per declared result; a
  /// result the lowering does not compute (max.dim's indices) is null.
  /// Diagnostics are located at `loc` and, if `label` is not empty, start
  /// with "node '<label>': ".
  mlir::FailureOr<llvm::SmallVector<mlir::Value, 1>>
  lower(llvm::StringRef target, const nlohmann::json &call,
        llvm::ArrayRef<mlir::RankedTensorType> outs, mlir::Location loc,
        llvm::StringRef label = "");

  /// The value a reference argument names, or a diagnostic at `loc`.
  mlir::FailureOr<mlir::Value> resolve(const nlohmann::json &ref,
                                       mlir::Location loc,
                                       llvm::StringRef label = "");

  class Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace flashlight

#endif // FLASHLIGHT_IMPORT_ATEN_H
