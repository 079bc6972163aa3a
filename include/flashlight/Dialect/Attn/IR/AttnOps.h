//===- AttnOps.h - attn dialect operations ----------------------*- C++ -*-===//

#ifndef FLASHLIGHT_DIALECT_ATTN_IR_ATTNOPS_H
#define FLASHLIGHT_DIALECT_ATTN_IR_ATTNOPS_H

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "flashlight/Dialect/Attn/IR/AttnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "flashlight/Dialect/Attn/IR/AttnOps.h.inc"

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace flashlight::attn {
/// The module's one `attn.attention`, or null after an error at the module
/// that names `pass` (passes that take a whole program: attn-gradient,
/// attn-return-lse).
AttentionOp getSoleAttention(mlir::ModuleOp module, llvm::StringRef pass);
} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_IR_ATTNOPS_H
