//===- ReturnLse.cpp - Return an attention's log-sum-exp ------------------===//
//
// A training forward keeps what its backward needs: the attention's output
// (the function returns it, through its layouts) and its log-sum-exp, which
// the program does not return. This pass adds the log-sum-exp to the
// attention's results and to its function's, so that the gradient program
// with saved statistics (attn-gradient{saved-statistics}) need not compute
// the forward again.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNRETURNLSE
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Why `op`'s saved statistics would not be its output and log-sum-exp
/// alone, or success.
LogicalResult checkSavable(AttentionOp op) {
  auto fail = [&](const Twine &why) {
    return op.emitError("attn-return-lse: ") << why;
  };
  if (op.getNormalizer() != Normalizer::softmax)
    return fail("only a softmax has a log-sum-exp");
  if (op.getNumBranches() != 1 || !op.getEpilogue().empty())
    return fail("several branches or an epilogue: the backward needs each "
                "branch's own output, which the program does not return");
  if (op.getKeySide() || op.getNumTerms())
    return fail("a key side or terms: not a forward program's attention");
  if (op.getMeanEmptyRows() && !MaskScoreAnalysis(op).rowsNeverEmpty())
    return fail("rows whose keys are all masked take the mean of V here; "
                "their gradient is not derived");
  if (!isa<func::ReturnOp>(op->getParentOp()->getRegion(0).front().back()))
    return fail("the attention's function does not end in a return");
  return success();
}

/// `op` with a log-sum-exp result (itself if it has one).
AttentionOp withLse(AttentionOp op) {
  if (!op.getLse().empty())
    return op;
  OpBuilder b(op);
  auto out = cast<RankedTensorType>(op.getOutput().getType());
  auto lse = RankedTensorType::get(out.getShape().drop_back(), b.getF32Type());
  auto fresh = AttentionOp::create(
      b, op.getLoc(), out, TypeRange{lse}, /*key_side=*/Type(),
      /*terms=*/TypeRange{}, op.getQueries(), op.getKeys(), op.getValue(),
      op.getSinks(), op.getCaptures(), op.getScaleAttr(),
      op.getNormalizerAttr(),
      /*mean_empty_rows=*/UnitAttr(),
      /*value_columns=*/DenseI64ArrayAttr(),
      /*key_side_branch=*/IntegerAttr(), /*term_dims=*/ArrayAttr());
  fresh.setMeanEmptyRows(op.getMeanEmptyRows());
  if (std::optional<ArrayRef<int64_t>> columns = op.getValueColumns())
    fresh.setValueColumns(*columns);
  fresh->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  for (auto [from, to] : llvm::zip(op->getRegions(), fresh->getRegions()))
    to.takeBody(from);
  op.getOutput().replaceAllUsesWith(fresh.getOutput());
  op.erase();
  return fresh;
}

struct AttnReturnLsePass
    : flashlight::attn::impl::AttnReturnLseBase<AttnReturnLsePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    AttentionOp sole = getSoleAttention(module, getArgument());
    if (!sole)
      return signalPassFailure();
    auto func = dyn_cast<func::FuncOp>(sole->getParentOp());
    if (!func) {
      sole.emitError("attn-return-lse: the attention is not in a "
                     "function's body");
      return signalPassFailure();
    }
    if (failed(checkSavable(sole)))
      return signalPassFailure();
    // Its callers would see a result more than they take.
    if (!SymbolTable::symbolKnownUseEmpty(func, module)) {
      sole.emitError("attn-return-lse: the attention's function is "
                     "called; only an entry function can return more");
      return signalPassFailure();
    }
    AttentionOp op = withLse(sole);
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    ret.getOperandsMutable().append(op.getLse()[0]);
    func.setType(FunctionType::get(&getContext(), func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    // The manifest's entry says which result it is.
    func->setAttr("attn.lse_result",
                  IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                   ret.getNumOperands() - 1));
  }
};

} // namespace
