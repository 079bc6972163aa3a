//===- CopyPipeline.h - Asynchronous copies and their barriers --*- C++ -*-===//
//
// The copy layer of the tensor-core generators: how tiles reach shared
// memory and how threads learn that they did: cp.async (16-byte copies
// from global memory, committed in groups and waited on by count), the
// proxy fence that shows them to wgmma, mbarriers (a full/empty pair per
// buffer, phases by parity), and bulk tensor copies (TMA), which complete
// on those mbarriers as transactions of bytes. Free functions of
// a builder and a location; the emitters decide what to copy and when.
// Private to AttnToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_COPYPIPELINE_H
#define FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_COPYPIPELINE_H

#include "mlir/IR/Builders.h"

namespace flashlight::attn_to_gpu::copies {

using namespace mlir;

/// One cp.async of `elements` elements from `src[srcIndices]` to
/// `dst[dstIndices]` (shared memory), bypassing L1; `copied` elements are
/// read (null: all; fewer zero-fill the rest, 0 skips the read). Its token.
Value asyncCopy(OpBuilder &b, Location loc, Value dst, ValueRange dstIndices,
                Value src, ValueRange srcIndices, int64_t elements,
                Value copied);

/// Commits this thread's cp.async copies since the last commit as one group
/// (`tokens`: those whose completion the group tracks).
Value commitGroup(OpBuilder &b, Location loc, ValueRange tokens);

/// Waits until at most `pending` of this thread's committed groups are in
/// flight (`group`: the newest one waited for).
void waitGroups(OpBuilder &b, Location loc, Value group, int32_t pending);

/// Orders this thread's shared-memory writes (the generic proxy: cp.async,
/// stores) before later reads by the async proxy (wgmma).
void fenceToAsyncProxy(OpBuilder &b, Location loc);

/// Initializes the mbarrier at `barrier` (a shared pointer) to expect
/// `count` arrivals per phase.
void initBarrier(OpBuilder &b, Location loc, Value barrier, Value count);

/// This thread arrives on `barrier`.
void arrive(OpBuilder &b, Location loc, Value barrier);

/// This thread arrives on `barrier` once its cp.async copies so far have
/// landed (without a pending-count increment: the arrival is one of the
/// phase's expected ones).
void arriveWhenCopiesLand(OpBuilder &b, Location loc, Value barrier);

/// One bulk tensor copy (TMA, sm_90): the box of the tensor map at
/// `tensorMap` (a generic pointer to a grid-constant parameter) whose first
/// element is at `coordinates` (innermost dim first, i32) into shared
/// memory at `dst` (a shared-window address, i64); its bytes complete as
/// transactions on `barrier`. Elements outside the tensor read as zero.
void tensorCopy(OpBuilder &b, Location loc, Value dst, Value tensorMap,
                ValueRange coordinates, Value barrier);

/// One bulk tensor reduction (TMA, sm_90): adds the box at `src` (a
/// shared-window address, i64, laid out as the tensor map's swizzle says)
/// into the tensor of `tensorMap` at `coordinates` (innermost dim first,
/// i32), element by element; parts of the box outside the tensor are not
/// written. Tracked by this thread's bulk async-groups (commitBulkGroup).
void tensorReduceAdd(OpBuilder &b, Location loc, Value src, Value tensorMap,
                     ValueRange coordinates);

/// Commits this thread's bulk operations since the last commit as one
/// bulk async-group.
void commitBulkGroup(OpBuilder &b, Location loc);

/// Waits until at most `pending` of this thread's bulk async-groups are in
/// flight; `reads` only until they have read their sources (which may
/// then be overwritten).
void waitBulkGroups(OpBuilder &b, Location loc, int32_t pending, bool reads);

/// This thread arrives on `barrier` and adds `bytes` to the transactions
/// its current phase waits for (the bulk copies that complete on it).
void arriveExpectingBytes(OpBuilder &b, Location loc, Value barrier,
                          int64_t bytes);

/// Waits until the phase of parity `parity` (i32) of `barrier` completed.
void waitPhase(OpBuilder &b, Location loc, Value barrier, Value parity);

} // namespace flashlight::attn_to_gpu::copies

#endif // FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_COPYPIPELINE_H
