//===- AttnDialect.h - The attn dialect -------------------------*- C++ -*-===//
//
// The `attn` dialect, its enums and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_DIALECT_ATTN_IR_ATTNDIALECT_H
#define FLASHLIGHT_DIALECT_ATTN_IR_ATTNDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "flashlight/Dialect/Attn/IR/AttnDialect.h.inc"
#include "flashlight/Dialect/Attn/IR/AttnEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "flashlight/Dialect/Attn/IR/AttnAttrs.h.inc"

namespace flashlight::attn {
/// The attribute holding an attention's #attn.kernel_plan, from attn-plan
/// on: on the attn.attention, the online_finalize, the tiled loop nest and
/// the kernel.
constexpr llvm::StringLiteral kKernelPlanAttrName = "attn.kernel_plan";

/// Unit attribute of an `attn.attention` whose runtime lengths its caller
/// guarantees are multiples of the kernel's tiles (flashlight-compile's
/// aligned variant of a kernel with runtime shapes); attn-plan records it
/// as the plan's `aligned_lengths`.
constexpr llvm::StringLiteral kAlignedLengthsAttrName = "attn.aligned_lengths";
} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_IR_ATTNDIALECT_H
