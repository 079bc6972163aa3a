//===- AttnOps.h - attn dialect operations ----------------------*- C++ -*-===//

#ifndef FLASHLIGHT_DIALECT_ATTN_IR_ATTNOPS_H
#define FLASHLIGHT_DIALECT_ATTN_IR_ATTNOPS_H

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/ParallelCombiningOpInterface.h"
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

/// Where the accumulators `accState` ([B, Hq, BM, w_r] each) split `dv`
/// columns of V and of the output into blocks (attn.attention's
/// `value_columns`): each branch's first column. Empty where every
/// accumulator is `dv` wide (every branch takes all of V).
llvm::SmallVector<int64_t> valueColumnOffsets(mlir::ValueRange accState,
                                              int64_t dv);
} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_IR_ATTNOPS_H
