//===- RelativeTerms.cpp - Score terms of the relative position -----------===//
//
// A score region term that reads the query and key indices only through
// their difference j - i (T5's bucketed bias table, a relative-position
// gather) takes one of only block-n + rows - 1 values on a warp's tile of
// rows x block-n elements. The tensor-core generator then evaluates it once
// per relative position, spread over the warp's lanes, into shared memory,
// and each element reads it back: for T5 one shared load per element instead
// of the bucket's log, divisions and a global gather.
//
// Each value of the region gets a class: uniform (constants, batch, head,
// captures), the row (the query index, through exact integer casts), the
// column (the key index, likewise), relative (computed from uniform values
// and column - row) or general (anything else: the logits, a row or column
// used otherwise).
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/KernelFacts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace flashlight::attn;

namespace {

enum class Kind { Uniform, Row, Column, Relative, General };

/// Integer casts that keep an index's value (sequence positions are small).
bool keepsValue(Operation *op) {
  return isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
             arith::ExtUIOp>(op);
}

/// A region op the table may evaluate on behalf of every element: pure, no
/// regions. A gather (tensor.extract) reads a capture, which is read-only.
bool movable(Operation *op) {
  return op->getNumRegions() == 0 && op->getNumResults() == 1 &&
         (isa<tensor::ExtractOp>(op) || isMemoryEffectFree(op));
}

} // namespace

RelativeTerms flashlight::attn::relativeTerms(Region &score,
                                                     unsigned numLeading) {
  RelativeTerms result;
  if (score.empty())
    return result;
  Block &block = score.front();
  DenseMap<Value, Kind> kind;
  for (BlockArgument arg : block.getArguments()) {
    unsigned n = arg.getArgNumber();
    kind[arg] = n < numLeading        ? Kind::General
                : n == numLeading + 2 ? Kind::Row
                : n == numLeading + 3 ? Kind::Column
                                      : Kind::Uniform;
  }
  auto of = [&](Value v) { return kind.lookup(v); };
  for (Operation &op : block.without_terminator()) {
    Kind k = Kind::General;
    if (!movable(&op)) {
      // Stays General.
    } else if (keepsValue(&op) && (of(op.getOperand(0)) == Kind::Row ||
                                   of(op.getOperand(0)) == Kind::Column)) {
      k = of(op.getOperand(0));
    } else if (isa<arith::SubIOp>(op) &&
               of(op.getOperand(0)) != of(op.getOperand(1)) &&
               llvm::all_of(op.getOperands(), [&](Value v) {
                 return of(v) == Kind::Row || of(v) == Kind::Column;
               })) {
      k = Kind::Relative;
      result.differences[&op] = of(op.getOperand(0)) == Kind::Column ? 1 : -1;
    } else if (llvm::all_of(op.getOperands(), [&](Value v) {
                 return of(v) == Kind::Uniform || of(v) == Kind::Relative;
               })) {
      k = llvm::any_of(op.getOperands(),
                       [&](Value v) { return of(v) == Kind::Relative; })
              ? Kind::Relative
              : Kind::Uniform;
    }
    kind[op.getResult(0)] = k;
    if (k == Kind::Relative)
      result.ops.push_back(&op);
  }
  // The terms: relative values that a general op or the terminator reads.
  bool costly = false;
  for (Operation *op : result.ops) {
    Value v = op->getResult(0);
    if (llvm::any_of(v.getUsers(), [&](Operation *user) {
          return user->getNumResults() != 1 ||
                 of(user->getResult(0)) != Kind::Relative;
        }))
      result.terms.push_back(v);
    costly |= isa<tensor::ExtractOp>(op) ||
              isa_and_nonnull<math::MathDialect>(op->getDialect());
  }
  // Worth a table: a gather or a math-dialect function per element, or
  // enough arithmetic. (ALiBi's slope * (j - i) is cheaper per element than
  // the shared load.) The table holds f32.
  costly |= result.ops.size() >= 8;
  if (!costly || result.terms.size() > kMaxRelativeTerms ||
      llvm::any_of(result.terms, [](Value v) { return !v.getType().isF32(); }))
    return RelativeTerms();
  return result;
}

int64_t flashlight::attn::relativeTableBytes(Region &score,
                                                    unsigned numLeading,
                                                    int64_t blockM,
                                                    int64_t blockN) {
  RelativeTerms terms = relativeTerms(score, numLeading);
  if (!terms)
    return 0;
  // Per warp and buffer, block-n + rows - 1 positions; warps * rows is
  // block-m, and a warp has at least 16 rows (the most positions).
  return 2 * (blockM / 16) * (blockN + 15) * terms.terms.size() * 4;
}
