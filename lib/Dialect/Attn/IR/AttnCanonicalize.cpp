//===- AttnCanonicalize.cpp - attn.attention canonicalization -------------===//
//
// Imported programs spell the same attention many ways; these patterns bring
// the op to one form so later passes and the analysis see trivial parts as
// absent: an all-true mask, an identity score or epilogue, a constant factor
// on the logit (moved into `scale`), and captures nobody reads.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// The attn.yield ending a non-empty region.
YieldOp getYield(Region &region) {
  return cast<YieldOp>(region.front().getTerminator());
}

/// Erases the only block of `region`, leaving it empty ("absent").
void clearRegion(PatternRewriter &rewriter, Region &region) {
  rewriter.eraseBlock(&region.front());
}

/// A mask that keeps everything is no mask: `yield true` -> empty region.
struct EraseAllTrueMask : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getMask().empty() ||
        !matchPattern(getYield(op.getMask()).getValues()[0], m_One()))
      return rewriter.notifyMatchFailure(op, "mask is not constant true");
    rewriter.modifyOpInPlace(op, [&] { clearRegion(rewriter, op.getMask()); });
    return success();
  }
};

/// A region that yields its leading arguments unchanged is the identity.
bool yieldsLeadingArgs(Region &region, unsigned count) {
  if (region.empty())
    return false;
  ValueRange yielded = getYield(region).getValues();
  for (unsigned i = 0; i < count; ++i)
    if (yielded[i] != region.front().getArgument(i))
      return false;
  return true;
}

/// Identity score (yields the logits) and, for one branch, identity epilogue
/// (yields o_0) are dropped.
struct EraseIdentityRegions : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    bool score = yieldsLeadingArgs(op.getScore(), op.getNumBranches());
    bool epilogue =
        op.getNumBranches() == 1 && yieldsLeadingArgs(op.getEpilogue(), 1);
    if (!score && !epilogue)
      return rewriter.notifyMatchFailure(op, "no identity region");
    rewriter.modifyOpInPlace(op, [&] {
      if (score)
        clearRegion(rewriter, op.getScore());
      if (epilogue)
        clearRegion(rewriter, op.getEpilogue());
    });
    return success();
  }
};

/// The value of `v` if it is a float constant, or a float constant rounded
/// by arith.truncf / arith.extf (exported programs spell `s * d ** -0.5` as
/// an f64 constant truncated to f32; arith does not fold an inexact
/// truncation).
std::optional<double> constantFactor(Value v) {
  FloatAttr factor;
  if (matchPattern(v, m_Constant(&factor)))
    return factor.getValueAsDouble();
  Operation *def = v.getDefiningOp();
  if (!def || !isa<arith::TruncFOp, arith::ExtFOp>(def) ||
      !matchPattern(def->getOperand(0), m_Constant(&factor)))
    return std::nullopt;
  APFloat value = factor.getValue();
  bool losesInfo;
  value.convert(cast<FloatType>(v.getType()).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &losesInfo);
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

/// `score(s) = f(s * c)` is `score = f(s)` with `scale * c`: the scale stays
/// visible to the lowering, which folds log2(e) into it for exp2.
struct FoldConstantFactorIntoScale : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getScore().empty())
      return rewriter.notifyMatchFailure(op, "no score region");
    Block &block = op.getScore().front();
    for (unsigned r = 0, e = op.getNumBranches(); r < e; ++r) {
      BlockArgument logit = block.getArgument(r);
      if (!logit.hasOneUse())
        continue;
      Operation *user = *logit.getUsers().begin();
      double multiplier;
      if (auto mul = dyn_cast<arith::MulFOp>(user)) {
        Value other = mul.getLhs() == logit ? mul.getRhs() : mul.getLhs();
        std::optional<double> factor = constantFactor(other);
        if (!factor)
          continue;
        multiplier = *factor;
      } else if (auto div = dyn_cast<arith::DivFOp>(user)) {
        std::optional<double> factor = constantFactor(div.getRhs());
        if (div.getLhs() != logit || !factor || *factor == 0.0)
          continue;
        multiplier = 1.0 / *factor;
      } else {
        continue;
      }
      SmallVector<double> scale(op.getScale());
      scale[r] *= multiplier;
      rewriter.modifyOpInPlace(op, [&] { op.setScale(scale); });
      rewriter.replaceOp(user, logit);
      return success();
    }
    return rewriter.notifyMatchFailure(op, "no constant factor on a logit");
  }
};

/// Captures that no region reads, and repeated captures, are removed.
struct DropUnusedCaptures : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &rewriter) const override {
    unsigned nb = op.getNumBranches();
    // Leading (non-capture) argument count of each region.
    std::pair<Region *, unsigned> regions[] = {{&op.getScore(), nb + 4},
                                               {&op.getMask(), 4},
                                               {&op.getEpilogue(), nb + 4}};
    OperandRange captures = op.getCaptures();
    llvm::BitVector drop(captures.size());
    SmallVector<int> firstOccurrence(captures.size(), -1);
    for (auto [i, capture] : llvm::enumerate(captures)) {
      for (unsigned j = 0; j < i; ++j)
        if (captures[j] == capture && firstOccurrence[j] < 0) {
          firstOccurrence[i] = j;
          break;
        }
      bool used = false;
      for (auto [region, lead] : regions)
        if (!region->empty() && !region->getArgument(lead + i).use_empty())
          used = true;
      if (!used || firstOccurrence[i] >= 0)
        drop.set(i);
    }
    if (drop.none())
      return rewriter.notifyMatchFailure(op, "every capture is used once");

    SmallVector<Value> kept;
    for (auto [i, capture] : llvm::enumerate(captures))
      if (!drop.test(i))
        kept.push_back(capture);
    rewriter.modifyOpInPlace(op, [&] {
      for (auto [region, lead] : regions) {
        if (region->empty())
          continue;
        Block &block = region->front();
        llvm::BitVector args(block.getNumArguments());
        for (unsigned i : drop.set_bits()) {
          if (firstOccurrence[i] >= 0)
            block.getArgument(lead + i).replaceAllUsesWith(
                block.getArgument(lead + firstOccurrence[i]));
          args.set(lead + i);
        }
        block.eraseArguments(args);
      }
      op.getCapturesMutable().assign(kept);
    });
    return success();
  }
};

} // namespace

void AttentionOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<EraseAllTrueMask, EraseIdentityRegions,
              FoldConstantFactorIntoScale, DropUnusedCaptures>(context);
}
