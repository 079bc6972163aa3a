//===- HostSplitReductions.cpp - Split reductions with few results -------===//
//
// A reduction generic on the reference path runs one thread (or warp) per
// result. With few results and long loops that leaves the GPU idle, so such
// a reduction becomes a partial reduction over more, parallel, results and
// a final one combining them.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Conversion/HostToGPU.h"
#include "flashlight/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace flashlight {
#define GEN_PASS_DEF_HOSTSPLITREDUCTIONS
#include "flashlight/Conversion/Passes.h.inc"
} // namespace flashlight

using namespace mlir;

namespace {

/// What a split keeps apart: which loops of the generic become parallel in
/// the partial reduction.
struct Split {
  SmallVector<bool> parallelized;
  /// The partial reduction's result dims: the loops that are parallel in
  /// it, in loop order.
  SmallVector<int64_t> partialDims;
};

/// The loops to parallelize in `generic`, or none where it does not
/// qualify (see the pass description).
std::optional<Split> chooseSplit(linalg::GenericOp generic, int64_t minPoints,
                                 int64_t minIterations, int64_t maxPartial) {
  if (generic.getNumDpsInits() != 1 || generic.getNumReductionLoops() < 2 ||
      !generic.hasPureTensorSemantics() ||
      !generic.getIndexingMapsArray().back().isProjectedPermutation() ||
      !flashlight::reductionCombiners(generic))
    return std::nullopt;
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  SmallVector<utils::IteratorType> iters = generic.getIteratorTypesArray();
  int64_t points = 1, iterations = 1;
  SmallVector<int64_t> reductions;
  for (auto [d, it] : llvm::enumerate(iters)) {
    if (it == utils::IteratorType::parallel) {
      points *= ranges[d];
    } else {
      iterations *= ranges[d];
      reductions.push_back(d);
    }
  }
  if (points >= minPoints || iterations < minIterations)
    return std::nullopt;
  // Outer reduction loops first, until there are enough results; the
  // innermost stays a loop.
  Split split;
  split.parallelized.assign(ranges.size(), false);
  int64_t partial = points;
  for (int64_t d : ArrayRef<int64_t>(reductions).drop_back()) {
    if (partial >= minPoints || partial * ranges[d] > maxPartial)
      break;
    split.parallelized[d] = true;
    partial *= ranges[d];
  }
  if (partial == points)
    return std::nullopt;
  for (auto [d, it] : llvm::enumerate(iters))
    if (it == utils::IteratorType::parallel || split.parallelized[d])
      split.partialDims.push_back(d);
  return split;
}

/// Replaces `generic` by the partial reduction `split` describes, into
/// identity-initialized partials, and the reduction of those partials into
/// the generic's initial value.
void splitReduction(RewriterBase &rewriter, linalg::GenericOp generic,
                    const Split &split) {
  Location loc = generic.getLoc();
  MLIRContext *ctx = generic.getContext();
  Operation *combiner = flashlight::reductionCombiners(generic)->front();
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = generic.getIteratorTypesArray();
  int64_t numLoops = ranges.size();
  Type element = getElementTypeOrSelf(generic.getResult(0).getType());
  rewriter.setInsertionPoint(generic);

  // The partial reduction: the same body, more parallel loops.
  SmallVector<int64_t> partialShape;
  SmallVector<AffineExpr> partialExprs;
  for (int64_t d : split.partialDims) {
    partialShape.push_back(ranges[d]);
    partialExprs.push_back(getAffineDimExpr(d, ctx));
  }
  Value empty = tensor::EmptyOp::create(rewriter, loc, partialShape, element);
  Value identity = flashlight::combinerIdentity(rewriter, loc, combiner);
  Value init =
      linalg::FillOp::create(rewriter, loc, identity, empty).getResult(0);
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  maps.back() = AffineMap::get(numLoops, 0, partialExprs, ctx);
  SmallVector<utils::IteratorType> partialIters(iters);
  for (int64_t d = 0; d < numLoops; ++d)
    if (split.parallelized[d])
      partialIters[d] = utils::IteratorType::parallel;
  auto partial =
      linalg::GenericOp::create(rewriter, loc, init.getType(),
                                generic.getInputs(), init, maps, partialIters);
  rewriter.cloneRegionBefore(generic.getRegion(), partial.getRegion(),
                             partial.getRegion().end());

  // The final reduction over the parallelized loops, in the partials' dim
  // order; its result dims are the generic's.
  int64_t rank = split.partialDims.size();
  SmallVector<AffineExpr> resultExprs;
  for (AffineExpr e : generic.getIndexingMapsArray().back().getResults()) {
    int64_t d = cast<AffineDimExpr>(e).getPosition();
    resultExprs.push_back(getAffineDimExpr(
        llvm::find(split.partialDims, d) - split.partialDims.begin(), ctx));
  }
  SmallVector<utils::IteratorType> finalIters;
  for (int64_t d : split.partialDims)
    finalIters.push_back(split.parallelized[d] ? utils::IteratorType::reduction
                                               : utils::IteratorType::parallel);
  auto final = linalg::GenericOp::create(
      rewriter, loc, generic.getResultTypes(), partial.getResult(0),
      generic.getOutputs(),
      ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(rank, ctx),
                          AffineMap::get(rank, 0, resultExprs, ctx)},
      finalIters, [&](OpBuilder &b, Location l, ValueRange args) {
        OperationState state(l, combiner->getName());
        state.addOperands({args[1], args[0]});
        state.addTypes(element);
        state.addAttributes(combiner->getAttrs());
        linalg::YieldOp::create(b, l, b.create(state)->getResult(0));
      });
  rewriter.replaceOp(generic, final.getResults());
}

struct HostSplitReductionsPass
    : flashlight::impl::HostSplitReductionsBase<HostSplitReductionsPass> {
  using HostSplitReductionsBase::HostSplitReductionsBase;
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    for (func::FuncOp func : flashlight::hostFunctions(getOperation())) {
      // The final reductions may qualify again: until none does.
      for (bool changed = true; changed;) {
        changed = false;
        SmallVector<linalg::GenericOp> generics;
        func.walk([&](linalg::GenericOp g) { generics.push_back(g); });
        for (linalg::GenericOp g : generics)
          if (std::optional<Split> split =
                  chooseSplit(g, minPoints, minIterations, maxPartial)) {
            splitReduction(rewriter, g, *split);
            changed = true;
          }
      }
    }
  }
};

} // namespace
