//===- Passes.h - Importer passes -------------------------------*- C++ -*-===//

#ifndef FLASHLIGHT_IMPORT_PASSES_H
#define FLASHLIGHT_IMPORT_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace flashlight {

#define GEN_PASS_DECL
#include "flashlight/Import/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flashlight/Import/Passes.h.inc"

} // namespace flashlight

#endif // FLASHLIGHT_IMPORT_PASSES_H
