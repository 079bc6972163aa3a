//===- MmaSyncOps.h - mma.sync building blocks ------------------*- C++ -*-===//
//
// The mma.sync layer of the tensor-core generator: ldmatrix loads of
// 8x8 tiles from shared memory into A/B fragments, f32 pairs packed into
// 16-bit operand registers, and one m16n8k16 product with an f32
// accumulator. Free functions of a builder and a location, shared by every
// emitter that multiplies on mma.sync. Private to AttnToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_MMASYNCOPS_H
#define FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_MMASYNCOPS_H

#include "mlir/IR/Builders.h"

namespace flashlight::attn_to_gpu::mma_sync {

using namespace mlir;

/// A pair of 16-bit elements as mma.sync's operand register: f16 stays
/// vector<2xf16>, bf16 becomes an i32 (NVVM's bf16 operands).
Value asOperand(OpBuilder &b, Location loc, Value pair);

/// f32 `lo`, `hi` rounded to `element` and packed into an operand register.
Value pack(OpBuilder &b, Location loc, Value lo, Value hi, Type element);

/// ldmatrix of `tiles` 8x8 tiles of `element`s at (`row`, `col`) of the
/// shared `tile` (this lane's row address), transposed or not: one operand
/// register per tile.
SmallVector<Value> ldmatrix(OpBuilder &b, Location loc, Value tile, Value row,
                            Value col, int tiles, bool transpose, Type element);

/// One m16n8k16 product d = a b + c (row-major A, column-major B): `a` 4
/// and `bFrag` 2 operand registers, `c` 4 f32; returns d's 4 f32.
SmallVector<Value> product(OpBuilder &b, Location loc, ArrayRef<Value> a,
                           ArrayRef<Value> bFrag, ArrayRef<Value> c,
                           Type element);

} // namespace flashlight::attn_to_gpu::mma_sync

#endif // FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_MMASYNCOPS_H
