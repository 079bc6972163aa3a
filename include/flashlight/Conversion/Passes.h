//===- Passes.h - Flashlight conversion passes ------------------*- C++ -*-===//

#ifndef FLASHLIGHT_CONVERSION_PASSES_H
#define FLASHLIGHT_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <optional>
#include <string>

namespace flashlight {
namespace attn {
class AttentionOp;
} // namespace attn

#define GEN_PASS_DECL
#include "flashlight/Conversion/Passes.h.inc"

/// Why the tensor-core code generator cannot take an attention with these
/// keys (one per logit branch), value and score region, tiled block-m x
/// block-n, or nothing if it can.
std::optional<std::string>
tensorCoreIneligibility(mlir::ValueRange keys, mlir::Value value,
                        mlir::Region &score, int64_t blockM, int64_t blockN);

/// The tensor-core generator's tiles (block-m, block-n) for `op`, from its
/// structure and the generator (measured on an H100; docs/benchmarks):
/// - "lean" programs (no score region; mask none, causal or prefix-LM, whose
///   partial tiles are only on the diagonal): mma.sync 128 x 64 (two m16
///   tiles per warp, so every K/V fragment read from shared memory feeds two
///   mma); wgmma 128 x 128 at head dim 128 (two warpgroups; n128 halves the
///   per-tile overhead) and 128 x 64 below;
/// - block-masked programs (a data-dependent mask, no score region) on
///   wgmma: 128 x 128 (with `blockMask`; the tile vote keeps 64 x 64);
/// - otherwise 64 x 64, where per-element score code or a window's many
///   partial tiles lose with more rows or keys per tile (32-row warps spill
///   on mma.sync; on wgmma, 128-row and 128-key tiles measured slower).
/// - several logit branches at D <= 64 on wgmma: 128 x 128;
/// - one logit branch at D = 64 with a plain mask and score and static
///   lengths of at least 8192, on wgmma with `threeWarpgroups` (the
///   producer warpgroup's dense loop is on): 192 x 128;
/// `wgmma`: the sm_90a generator will take it (head dims 64 or 128).
std::pair<int64_t, int64_t> tensorCoreTiles(attn::AttentionOp op, bool wgmma,
                                            bool blockMask = true,
                                            bool threeWarpgroups = true);

#define GEN_PASS_REGISTRATION
#include "flashlight/Conversion/Passes.h.inc"

} // namespace flashlight

#endif // FLASHLIGHT_CONVERSION_PASSES_H
