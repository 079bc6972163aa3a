//===- Passes.h - attn dialect passes ---------------------------*- C++ -*-===//

#ifndef FLASHLIGHT_DIALECT_ATTN_TRANSFORMS_PASSES_H
#define FLASHLIGHT_DIALECT_ATTN_TRANSFORMS_PASSES_H

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace flashlight::attn {

#define GEN_PASS_DECL
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"

} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_TRANSFORMS_PASSES_H
