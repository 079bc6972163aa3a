//===- TensorBuilders.h - Building linalg on tensors for importers -*- C++
//-*-===//
//
// The few constructions every importer needs to express a framework op in
// linalg/tensor/arith on tensors: scalar conversions with the frameworks'
// semantics, elementwise and layout generics, reshapes.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_IMPORT_TENSORBUILDERS_H
#define FLASHLIGHT_IMPORT_TENSORBUILDERS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"

namespace flashlight::import {

/// A scalar constant of int or float `type`.
mlir::Value constantOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                       double value);

/// Converts scalar `x` to element type `to` as frameworks do: floats round,
/// float -> int truncates, anything -> i1 is `!= 0`, i1 -> int is 0 / 1.
mlir::Value castScalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                       mlir::Type to);

/// `tensor.empty` of `type`.
mlir::Value emptyLike(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::RankedTensorType type);

/// `rank` parallel iterators.
llvm::SmallVector<mlir::utils::IteratorType> parallelIterators(int64_t rank);

/// A `linalg.generic` computing `result` elementwise from `operands`, each
/// read through its map in `maps` (maps over the result's dims), with the
/// scalar `body`.
mlir::Value
mapElements(mlir::OpBuilder &b, mlir::Location loc,
            mlir::RankedTensorType result, mlir::ValueRange operands,
            llvm::ArrayRef<mlir::AffineMap> maps,
            llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                           mlir::ValueRange)>
                body);

/// `input` read through `map` into `result` (a layout copy: transposes,
/// broadcasts).
mlir::Value copyThroughMap(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value input, mlir::AffineMap map,
                           mlir::RankedTensorType result);

/// `input` with the same elements in `result`'s shape: collapse/expand by
/// the reassociation when there is one, else through one dimension.
mlir::Value reshapeTensor(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value input, mlir::RankedTensorType result);

/// `x` padded by `low[d]` / `high[d]` elements per dim (negative amounts
/// crop): per padded dim, a `tensor.concat` of `x` with the pieces
/// `filled(pieceType)` builds, a form attn-raise reads piece by piece.
/// Fails (null) when a crop takes more than a dim holds.
mlir::Value
padWithPieces(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
              llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high,
              llvm::function_ref<mlir::Value(mlir::RankedTensorType)> filled);

/// `result[out] = sum over the remaining loops of lhs[lhsMap] * rhs[rhsMap]`:
/// loops are `result`'s dims (in `outMap`) followed by the contracted ones.
/// f16/bf16 products accumulate in f32 from zero, then round to `result`'s
/// element type, as the frameworks' matmuls do.
mlir::Value contract(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
                     mlir::Value rhs, mlir::AffineMap lhsMap,
                     mlir::AffineMap rhsMap, mlir::AffineMap outMap,
                     mlir::RankedTensorType result);

} // namespace flashlight::import

#endif // FLASHLIGHT_IMPORT_TENSORBUILDERS_H
