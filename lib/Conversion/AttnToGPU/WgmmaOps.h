//===- WgmmaOps.h - Warpgroup MMA building blocks ---------------*- C++ -*-===//
//
// The wgmma layer of the sm_90a generator: shared-memory matrix
// descriptors, f32 accumulator structs, and the two product forms -- both
// operands from shared memory (SS, NVVM's op) and A from registers (RS,
// inline PTX: MLIR 22's NVVM op has no register-A form). Free functions of
// a builder and a location, so that any emitter (forward, and later
// backward kernels) issues products the same way. Private to AttnToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_WGMMAOPS_H
#define FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_WGMMAOPS_H

#include "mlir/IR/Builders.h"

namespace flashlight::attn_to_gpu::wgmma {

using namespace mlir;

/// The matrix descriptor of an operand at shared address `address` (i64):
/// start address, leading byte offset (K-major: unused; MN-major: between
/// atoms) and stride byte offset (between 8-row groups), each in 16-byte
/// units; 128-byte swizzle. The address goes through an opaque copy first:
/// otherwise LLVM computes every k-step's address at the top of the loop
/// body and keeps them live across the softmax, where they spill
/// (docs/decisions/002).
Value matrixDescriptor(OpBuilder &b, Location loc, Value address,
                       int64_t leading, int64_t stride);

/// `desc` advanced by `bytes` (a multiple of 16): the start address field
/// holds shared offsets >> 4 below 2^14, so the add cannot carry out.
Value advanceDescriptor(OpBuilder &b, Location loc, Value desc, int64_t bytes);

/// An accumulator struct of `n` f32.
Type accumulatorType(MLIRContext *context, int64_t n);

/// The first `n` f32 of accumulator struct `acc`.
SmallVector<Value> unpackAccumulator(OpBuilder &b, Location loc, Value acc,
                                     int64_t n);

/// Commits the warpgroup's wgmma ops and waits for all of them.
void commitAndWait(OpBuilder &b, Location loc);

/// An A-fragment register as i32: two 16-bit elements (i32 for bf16,
/// vector<2xf16> for f16) or their f32 bit pattern (loop-carried).
Value fragmentAsI32(OpBuilder &b, Location loc, Value reg);

/// One m64nNk16 product with A from registers (`a`: the 4 registers of a
/// k16 step) and B from `bDesc`, MN-major (B's rows are the contraction
/// dimension): acc + A B, uncommitted. `acc` is a struct of n / 2 f32;
/// `element` is the operands' f16 or bf16.
Value registerProduct(OpBuilder &b, Location loc, ArrayRef<Value> a,
                      Value bDesc, Value acc, int64_t n, Type element);

/// One m64nNk16 product with both operands from shared memory, K-major
/// (or, `transposed`, both MN-major: A stored [K, M] and B [K, N], M and N
/// contiguous): acc (or zero with `accumulate` false) + A B, uncommitted.
Value sharedProduct(OpBuilder &b, Location loc, Value aDesc, Value bDesc,
                    Value acc, int64_t n, Type element, bool accumulate,
                    bool transposed = false);

} // namespace flashlight::attn_to_gpu::wgmma

#endif // FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_WGMMAOPS_H
