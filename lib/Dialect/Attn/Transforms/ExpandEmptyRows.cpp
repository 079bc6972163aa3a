//===- ExpandEmptyRows.cpp - Fully masked rows as the program has them ----===//
//
// `mean_empty_rows` says a row whose keys are all masked yields the mean of
// V (a finite mask fill: the softmax of equal logits). The kernels give 0
// there; this pass drops the attribute where no row can be empty, and
// elsewhere selects the mean where the attention's LSE is -inf.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNEXPANDEMPTYROWS
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// The epilogue of `op` applied where every branch's output is `o` (f32),
/// at the generic's own indices (b, h, q_idx, d).
Value applyEpilogue(OpBuilder &b, Location loc, AttentionOp op, Value o) {
  Block &block = op.getEpilogue().front();
  IRMapping map;
  unsigned branches = op.getNumBranches();
  for (unsigned r = 0; r < branches; ++r)
    map.map(block.getArgument(r), o);
  for (unsigned d = 0; d < 4; ++d)
    map.map(block.getArgument(branches + d),
            linalg::IndexOp::create(b, loc, d));
  for (auto [arg, capture] : llvm::zip(
           block.getArguments().drop_front(branches + 4), op.getCaptures()))
    map.map(arg, capture);
  for (Operation &inner : block.without_terminator())
    b.clone(inner, map);
  return map.lookup(block.getTerminator()->getOperand(0));
}

/// `op`'s output with every fully masked row (LSE -inf) replaced by the
/// mean of V over all keys: a copy of `op` returns its LSE, the means
/// ([B, Hkv, Dv], f32) are a reduction over the keys.
Value meanOfValuesWhereEmpty(OpBuilder &b, Location loc, AttentionOp op) {
  MLIRContext *ctx = b.getContext();
  auto outType = cast<RankedTensorType>(op.getOutput().getType());
  auto vt = cast<RankedTensorType>(op.getValue().getType());
  int64_t B = outType.getDimSize(0), Hq = outType.getDimSize(1),
          M = outType.getDimSize(2), Dv = outType.getDimSize(3);
  int64_t Hkv = vt.getDimSize(1), N = vt.getDimSize(2);
  auto lseType = RankedTensorType::get({B, Hq, M}, b.getF32Type());
  auto withLse = AttentionOp::create(
      b, loc, outType, TypeRange{lseType}, /*key_side=*/Type(),
      /*terms=*/TypeRange{}, op.getQueries(), op.getKeys(), op.getValue(),
      op.getSinks(), op.getCaptures(), op.getScaleAttr(),
      op.getNormalizerAttr(), /*mean_empty_rows=*/UnitAttr(),
      /*value_columns=*/DenseI64ArrayAttr(),
      /*key_side_branch=*/IntegerAttr(), /*term_dims=*/ArrayAttr());
  withLse.getScore().takeBody(op.getScore());
  withLse.getMask().takeBody(op.getMask());
  withLse.getEpilogue().takeBody(op.getEpilogue());

  auto d = [&](unsigned k) { return getAffineDimExpr(k, ctx); };
  auto meanType = RankedTensorType::get({B, Hkv, Dv}, b.getF32Type());
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  Value init =
      linalg::FillOp::create(
          b, loc, zero,
          tensor::EmptyOp::create(b, loc, meanType.getShape(), b.getF32Type())
              .getResult())
          .getResult(0);
  using utils::IteratorType;
  Value sums =
      linalg::GenericOp::create(
          b, loc, meanType, op.getValue(), init,
          {AffineMap::get(4, 0, {d(0), d(1), d(2), d(3)}, ctx),
           AffineMap::get(4, 0, {d(0), d(1), d(3)}, ctx)},
          {IteratorType::parallel, IteratorType::parallel,
           IteratorType::reduction, IteratorType::parallel},
          [&](OpBuilder &nb, Location l, ValueRange args) {
            Value v = args[0];
            if (v.getType() != nb.getF32Type())
              v = arith::ExtFOp::create(nb, l, nb.getF32Type(), v);
            linalg::YieldOp::create(
                nb, l, ValueRange{arith::AddFOp::create(nb, l, args[1], v)});
          })
          .getResult(0);
  int64_t group = Hq / Hkv;
  return linalg::GenericOp::create(
             b, loc, outType,
             ValueRange{withLse.getOutput(), withLse.getLse()[0], sums},
             tensor::EmptyOp::create(b, loc, outType.getShape(),
                                     outType.getElementType())
                 .getResult(),
             {AffineMap::get(4, 0, {d(0), d(1), d(2), d(3)}, ctx),
              AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx),
              AffineMap::get(4, 0, {d(0), d(1).floorDiv(group), d(3)}, ctx),
              AffineMap::get(4, 0, {d(0), d(1), d(2), d(3)}, ctx)},
             SmallVector<IteratorType>(4, IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value ninf = arith::ConstantOp::create(
                   nb, l, nb.getF32FloatAttr(-INFINITY));
               Value empty = arith::CmpFOp::create(
                   nb, l, arith::CmpFPredicate::OEQ, args[1], ninf);
               Value mean = arith::DivFOp::create(
                   nb, l, args[2],
                   arith::ConstantOp::create(nb, l,
                                             nb.getF32FloatAttr(double(N))));
               // Every branch of an empty row is the mean; the epilogue
               // (a gate, a query-length mask) still applies to it.
               if (!withLse.getEpilogue().empty())
                 mean = applyEpilogue(nb, l, withLse, mean);
               if (mean.getType() != args[0].getType())
                 mean = arith::TruncFOp::create(nb, l, args[0].getType(), mean);
               linalg::YieldOp::create(nb, l,
                                       ValueRange{arith::SelectOp::create(
                                           nb, l, empty, mean, args[0])});
             })
      .getResult(0);
}

struct AttnExpandEmptyRowsPass
    : flashlight::attn::impl::AttnExpandEmptyRowsBase<AttnExpandEmptyRowsPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation()->walk([&](AttentionOp op) {
      if (op.getMeanEmptyRows())
        ops.push_back(op);
    });
    for (AttentionOp op : ops) {
      op.setMeanEmptyRows(false);
      if (MaskScoreAnalysis(op).rowsNeverEmpty())
        continue;
      OpBuilder b(op);
      Value out = meanOfValuesWhereEmpty(b, op.getLoc(), op);
      op.getOutput().replaceAllUsesWith(out);
      for (Value lse : op.getLse())
        if (!lse.use_empty()) {
          op.emitError("attn-expand-empty-rows: an attention with "
                       "'mean_empty_rows' whose LSE is used");
          return signalPassFailure();
        }
      op.erase();
    }
  }
};

} // namespace
