//===- OnlineSoftmax.cpp - attn.attention to the online form --------------===//
//
// The online form makes the state of a streaming softmax explicit so that
// tiling only has to slice tensors and thread the state through a loop.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNONLINESOFTMAX
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// A tensor of `shape` (dynamic sizes taken from `dynamicSizes` in order)
/// filled with `value`.
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                   ValueRange dynamicSizes, double value) {
  Value empty =
      tensor::EmptyOp::create(b, loc, shape, b.getF32Type(), dynamicSizes);
  Value scalar = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  return linalg::FillOp::create(b, loc, scalar, empty).getResult(0);
}

/// The dynamic sizes among `dims` of `source`'s dims `positions`.
SmallVector<Value> dynamicSizes(OpBuilder &b, Location loc,
                                ArrayRef<std::pair<Value, int64_t>> dims) {
  SmallVector<Value> sizes;
  for (auto [source, pos] : dims)
    if (cast<RankedTensorType>(source.getType()).isDynamicDim(pos))
      sizes.push_back(tensor::DimOp::create(b, loc, source, pos));
  return sizes;
}

/// Copies `from` (possibly empty) into the empty region `to`.
void cloneRegion(Region &from, Region &to) {
  IRMapping mapping;
  from.cloneInto(&to, mapping);
}

void rewrite(AttentionOp op) {
  IRRewriter b(op);
  Location loc = op.getLoc();
  unsigned nb = op.getNumBranches();
  bool softmax = op.getNormalizer() == Normalizer::softmax;

  // State shapes: [B, Hq, M] and [B, Hq, M, Dv].
  Value q = op.getQueries()[0], v = op.getValue();
  auto qType = cast<RankedTensorType>(q.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> rowShape(qType.getShape().take_front(3));
  SmallVector<int64_t> accShape = rowShape;
  accShape.push_back(vType.getDimSize(3));
  SmallVector<Value> rowSizes = dynamicSizes(b, loc, {{q, 0}, {q, 1}, {q, 2}});
  SmallVector<Value> accSizes =
      dynamicSizes(b, loc, {{q, 0}, {q, 1}, {q, 2}, {v, 3}});

  // Initial state: m = -inf, l = 0, acc = 0 per branch (value_columns:
  // each accumulator its branch's block of columns wide).
  SmallVector<Value> maxInit, sumInit, accInit;
  std::optional<ArrayRef<int64_t>> columns = op.getValueColumns();
  for (unsigned r = 0; r < nb; ++r) {
    if (softmax) {
      maxInit.push_back(filledTensor(b, loc, rowShape, rowSizes,
                                     -std::numeric_limits<double>::infinity()));
      sumInit.push_back(filledTensor(b, loc, rowShape, rowSizes, 0.0));
    }
    if (columns)
      accShape.back() = (*columns)[r];
    accInit.push_back(filledTensor(b, loc, accShape, accSizes, 0.0));
  }

  // The key-side product starts at 0 ([B, Hkv, N, Dqk_r]).
  Value keySideInit;
  if (std::optional<uint64_t> r = op.getKeySideBranch()) {
    Value k = op.getKeys()[*r];
    auto kType = cast<RankedTensorType>(k.getType());
    keySideInit = filledTensor(
        b, loc, kType.getShape(),
        dynamicSizes(b, loc,
                     {{k, 0}, {k, 1}, {k, 2}, {op.getQueries()[*r], 3}}),
        0.0);
  }

  // The terms start at 0 (every element adds to them).
  SmallVector<Value> termInits;
  ArrayAttr termDims = op.getTermDimsAttr();
  for (auto [term, dims] :
       llvm::zip(op.getTerms(),
                 termDims ? termDims.getValue() : ArrayRef<Attribute>())) {
    SmallVector<std::pair<Value, int64_t>> extents;
    for (int64_t d : cast<DenseI64ArrayAttr>(dims).asArrayRef())
      extents.push_back(d < 3 ? std::make_pair(q, d)
                              : std::make_pair(op.getKeys()[0], int64_t(2)));
    termInits.push_back(
        filledTensor(b, loc, cast<RankedTensorType>(term.getType()).getShape(),
                     dynamicSizes(b, loc, extents), 0.0));
  }

  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  auto step = OnlineStepOp::create(
      b, loc, op.getQueries(), op.getKeys(), v, maxInit, sumInit, accInit,
      keySideInit, termInits, zero, zero, zero, zero, op.getCaptures(),
      op.getScaleAttr(), op.getNormalizerAttr(), /*whole_keys=*/UnitAttr(),
      op.getKeySideBranchAttr(), op.getTermDimsAttr());
  cloneRegion(op.getScore(), step.getScore());
  cloneRegion(op.getMask(), step.getMask());

  // The step's results are the new state, in operand order.
  ValueRange state = step.getStateResults();
  unsigned stats = softmax ? nb : 0;
  SmallVector<Type> finalized = {op.getOutput().getType()};
  llvm::append_range(finalized, op.getLse().getTypes());
  auto finalize = OnlineFinalizeOp::create(
      b, loc, finalized, state.take_front(stats), state.slice(stats, stats),
      state.take_back(nb), op.getSinks(), zero, zero, zero, op.getCaptures(),
      op.getNormalizerAttr());
  cloneRegion(op.getEpilogue(), finalize.getEpilogue());
  // The kernel plan goes with the finalize, which attn-tile rewrites.
  if (Attribute plan = op->getAttr(kKernelPlanAttrName))
    finalize->setAttr(kKernelPlanAttrName, plan);
  SmallVector<Value> results(finalize.getResults());
  if (keySideInit)
    results.push_back(step.getNewState()[state.size()]);
  llvm::append_range(results, step.getTermResults());
  b.replaceOp(op, results);
}

struct AttnOnlineSoftmaxPass
    : flashlight::attn::impl::AttnOnlineSoftmaxBase<AttnOnlineSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation()->walk([&](AttentionOp op) { ops.push_back(op); });
    for (AttentionOp op : ops) {
      if (op.getMeanEmptyRows()) {
        op.emitError("an attention with 'mean_empty_rows' reaches code "
                     "generation (run attn-expand-empty-rows first)");
        return signalPassFailure();
      }
      rewrite(op);
    }
  }
};

} // namespace
