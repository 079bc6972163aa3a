//===- Gradient.cpp - The gradient program of an attention ----------------===//
//
// Builds, from a module's attention, the program computing its gradient
// with respect to Q, K and V, as attentions the code generators already
// take. With s = scale * Q K^T, t = score(s), P the normalized weights
// (softmax: exp(t - L) with L the log-sum-exp; sigmoid(t); t itself for
// `none`), masked entries excluded, and dO the output's gradient:
//
//   dP = dO V^T                dT = P (dP - Delta)   (softmax; Delta =
//   rowsum(dO O))
//                                 = dP P (1 - P)     (sigmoid)
//                                 = dP               (none)
//   dS = dT * score'(s)        dQ = scale dS K,  dK = scale dS^T Q,  dV = P^T
//   dO
//
// Each of dQ, dK, dV is an attention with normalizer `none` whose score
// region computes dS (or P) per element from two logit branches (S and
// dP): dQ attends from Q to K with K as its value; dK and dV attend from
// the keys to the queries (Q, dO seen as [B, Hkv, g M, D] for GQA, the g
// query heads of a KV head side by side), with Q and dO as values. The mask
// and score regions are the forward's, their indices mapped; score'(s) is
// the forward-mode derivative of the score region's ops (chain rule over
// arith and math; compares, selects' conditions and index math are not
// differentiated). The forward is recomputed for L and O (softmax).
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"
#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNGRADIENT
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

Value floatConst(OpBuilder &b, Location loc, Type type, double v) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
}

/// A zero-filled f32 tensor of `shape` (a reduction's initial value).
Value zerosF32(OpBuilder &b, Location loc, ArrayRef<int64_t> shape) {
  Value zero = floatConst(b, loc, b.getF32Type(), 0.0);
  Value empty = tensor::EmptyOp::create(b, loc, shape, b.getF32Type());
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

/// `v` in f32 (extended from f16/bf16).
Value widen(OpBuilder &b, Location loc, Value v) {
  return v.getType() == b.getF32Type()
             ? v
             : arith::ExtFOp::create(b, loc, b.getF32Type(), v).getResult();
}

/// Maps an epilogue's arguments inside a linalg.generic over (b, h, q_idx,
/// d): the branch outputs to `outs` (widened), the indices to the loop's,
/// the captures to `captures`.
void mapEpilogue(OpBuilder &b, Location loc, Block &epilogue, ValueRange outs,
                 ValueRange captures, IRMapping &map) {
  unsigned branches = outs.size();
  for (unsigned r = 0; r < branches; ++r)
    map.map(epilogue.getArgument(r), widen(b, loc, outs[r]));
  for (unsigned d = 0; d < 4; ++d)
    map.map(epilogue.getArgument(branches + d),
            linalg::IndexOp::create(b, loc, d));
  for (auto [arg, capture] :
       llvm::zip(epilogue.getArguments().drop_front(branches + 4), captures))
    map.map(arg, capture);
}

//===----------------------------------------------------------------------===//
// Forward-mode derivative of a score region
//===----------------------------------------------------------------------===//

/// Whether the derivative rules of ScoreDerivative cover `op` (the cases
/// of its `rule`: change both).
bool hasDerivativeRule(Operation *op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             arith::NegFOp, arith::ExtFOp, arith::TruncFOp, arith::MaximumFOp,
             arith::MaxNumFOp, arith::MinimumFOp, arith::MinNumFOp,
             arith::SelectOp, math::TanhOp, math::ExpOp, math::Exp2Op,
             math::LogOp, math::SqrtOp, math::AbsFOp, math::FmaOp>(op);
}

/// Whether every float op of `block` that a derivative with respect to
/// `seed` flows through has a rule (checked before building anything, so
/// that a capture nobody needs the gradient of is skipped, not an error).
bool differentiableFrom(Block &block, Value seed) {
  DenseSet<Value> carrying = {seed};
  for (Operation &op : block.without_terminator()) {
    if (op.getNumResults() != 1 ||
        !llvm::any_of(op.getOperands(),
                      [&](Value v) { return carrying.contains(v); }) ||
        !isa<FloatType>(op.getResult(0).getType()))
      continue;
    if (!hasDerivativeRule(&op))
      return false;
    carrying.insert(op.getResult(0));
  }
  return true;
}

/// Clones a region's ops into `b` (its arguments mapped by `map`) and
/// propagates the derivative with respect to argument `seed`: returns
/// (t, dt/dx) for the region's result `result`. Fails at an op that carries
/// the derivative and has no rule.
class ScoreDerivative {
public:
  ScoreDerivative(OpBuilder &b, Location loc, StringRef region = "score")
      : b(b), loc(loc), region(region) {}

  FailureOr<std::pair<Value, Value>>
  emit(Block &block, IRMapping &map, unsigned seed = 0, unsigned result = 0) {
    return emit(block, map, block.getArgument(seed), result);
  }

  /// The same with respect to `seed`, an argument of the block or the
  /// result of one of its ops (a captured element it reads).
  FailureOr<std::pair<Value, Value>> emit(Block &block, IRMapping &map,
                                          Value seed, unsigned result) {
    if (isa<BlockArgument>(seed))
      tangents[seed] = floatConst(b, loc, seed.getType(), 1.0);
    for (Operation &op : block.without_terminator()) {
      Operation *clone = b.clone(op, map);
      if (op.getNumResults() == 1 && op.getResult(0) == seed) {
        tangents[seed] = floatConst(b, loc, seed.getType(), 1.0);
        continue;
      }
      if (op.getNumResults() != 1 ||
          !llvm::any_of(op.getOperands(),
                        [&](Value v) { return tangents.count(v); }))
        continue;
      if (!isa<FloatType>(op.getResult(0).getType()))
        continue; // Compares, casts to integers: no derivative flows.
      Value t = rule(op, *clone, map);
      if (!t)
        return op.emitError("attn-gradient: cannot differentiate '")
               << op.getName() << "' in the " << region << " region";
      tangents[op.getResult(0)] = t;
    }
    Value yielded = block.getTerminator()->getOperand(result);
    Value t = map.lookupOrDefault(yielded);
    Value dt = tangents.lookup(yielded);
    if (!dt)
      dt = floatConst(b, loc, t.getType(), 0.0);
    return std::make_pair(t, dt);
  }

private:
  // Derivatives are null where none flows (a constant, a capture): the
  // helpers treat null as zero and emit nothing for it.
  Value d(Value v) { return tangents.lookup(v); }
  Value orZero(Value t, Type type) {
    return t ? t : floatConst(b, loc, type, 0.0);
  }
  Value add(Value x, Value y) {
    if (!x || !y)
      return x ? x : y;
    return arith::AddFOp::create(b, loc, x, y);
  }
  Value neg(Value x) {
    return x ? arith::NegFOp::create(b, loc, x).getResult() : Value();
  }
  Value sub(Value x, Value y) { return add(x, neg(y)); }
  Value mul(Value t, Value x) {
    return t ? arith::MulFOp::create(b, loc, t, x).getResult() : Value();
  }
  Value div(Value t, Value x) {
    return t ? arith::DivFOp::create(b, loc, t, x).getResult() : Value();
  }

  /// The derivative of `op`'s result; its clone's operands and result are
  /// the values to differentiate at. Null for an op without a rule (the
  /// ops with one are those `hasDerivativeRule` lists: change both).
  Value rule(Operation &op, Operation &clone, IRMapping &map) {
    auto x = [&](unsigned i) { return clone.getOperand(i); };
    auto dx = [&](unsigned i) { return d(op.getOperand(i)); };
    Value r = clone.getResult(0);
    Type type = r.getType();
    auto constant = [&](double v) { return floatConst(b, loc, type, v); };
    auto pick = [&](arith::CmpFPredicate p, unsigned a, unsigned c) {
      Value cond = arith::CmpFOp::create(b, loc, p, x(0), x(1));
      return arith::SelectOp::create(b, loc, cond, orZero(dx(a), type),
                                     orZero(dx(c), type))
          .getResult();
    };
    return TypeSwitch<Operation *, Value>(&op)
        .Case([&](arith::AddFOp) { return add(dx(0), dx(1)); })
        .Case([&](arith::SubFOp) { return sub(dx(0), dx(1)); })
        .Case([&](arith::MulFOp) {
          return add(mul(dx(0), x(1)), mul(dx(1), x(0)));
        })
        .Case([&](arith::DivFOp) { // (a' - r b') / b
          return div(sub(dx(0), mul(dx(1), r)), x(1));
        })
        .Case([&](arith::NegFOp) { return neg(dx(0)); })
        .Case([&](arith::ExtFOp) {
          return arith::ExtFOp::create(b, loc, type, dx(0)).getResult();
        })
        .Case([&](arith::TruncFOp) {
          return arith::TruncFOp::create(b, loc, type, dx(0)).getResult();
        })
        .Case<arith::MaximumFOp, arith::MaxNumFOp>(
            [&](Operation *) { return pick(arith::CmpFPredicate::OGE, 0, 1); })
        .Case<arith::MinimumFOp, arith::MinNumFOp>(
            [&](Operation *) { return pick(arith::CmpFPredicate::OLE, 0, 1); })
        .Case([&](arith::SelectOp) {
          return arith::SelectOp::create(b, loc, x(0), orZero(dx(1), type),
                                         orZero(dx(2), type))
              .getResult();
        })
        .Case([&](math::TanhOp) {
          return mul(dx(0), arith::SubFOp::create(
                                b, loc, constant(1.0),
                                arith::MulFOp::create(b, loc, r, r)));
        })
        .Case([&](math::ExpOp) { return mul(dx(0), r); })
        .Case([&](math::Exp2Op) {
          return mul(dx(0), arith::MulFOp::create(b, loc, r, constant(M_LN2)));
        })
        .Case([&](math::LogOp) { return div(dx(0), x(0)); })
        .Case([&](math::SqrtOp) { return div(mul(dx(0), constant(0.5)), r); })
        .Case([&](math::AbsFOp) {
          Value negative = arith::CmpFOp::create(
              b, loc, arith::CmpFPredicate::OLT, x(0), constant(0.0));
          return arith::SelectOp::create(b, loc, negative, neg(dx(0)), dx(0))
              .getResult();
        })
        .Case([&](math::FmaOp) {
          return add(add(mul(dx(0), x(1)), mul(dx(1), x(0))), dx(2));
        })
        .Default([](Operation *) { return Value(); });
  }

  OpBuilder &b;
  Location loc;
  StringRef region;
  /// Derivatives with respect to the logit, by original value.
  DenseMap<Value, Value> tangents;
};

//===----------------------------------------------------------------------===//
// The gradient attentions
//===----------------------------------------------------------------------===//

/// The forward attention's facts the gradient attentions are built from.
struct Forward {
  /// Mutable: MLIR's op accessors are not const.
  mutable AttentionOp op;
  int64_t group = 1; // Query heads per KV head.
  int64_t m = 0;     // Query length.
  Normalizer normalizer = Normalizer::softmax;
  double scale = 1.0;
  /// The logit branch differentiated, of how many.
  unsigned branch = 0, branches = 1;
  /// Whether dK and dV attend per query head (K and V repeated) rather
  /// than along grouped rows (GQA): see branchGradient.
  bool perHeadKeyValue = false;
};

/// Maps a forward score region's arguments for branch `f.branch` alone:
/// its logit to `s`, the other branches' to zero (they do not reach its
/// result: checkDifferentiable), indices to `idx`, captures to `caps`.
void mapScoreArgs(OpBuilder &b, Location loc, const Forward &f, Block &src,
                  Value s, ValueRange idx, ValueRange caps, IRMapping &map) {
  for (unsigned r = 0; r < f.branches; ++r)
    map.map(src.getArgument(r),
            r == f.branch ? s : floatConst(b, loc, b.getF32Type(), 0.0));
  for (unsigned d = 0; d < 4; ++d)
    map.map(src.getArgument(f.branches + d), idx[d]);
  for (auto [arg, cap] :
       llvm::zip(src.getArguments().drop_front(f.branches + 4), caps))
    map.map(arg, cap);
}

/// Where the gradient attention's indices (b, h, q_idx, kv_idx) are the
/// forward's (`transposed`: the gradient attends from keys to queries,
/// kv_idx runs over the g query heads of a KV head times M).
SmallVector<Value> forwardIndices(OpBuilder &b, Location loc, const Forward &f,
                                  ValueRange idx, bool transposed) {
  if (!transposed)
    return {idx[0], idx[1], idx[2], idx[3]};
  Value batch = idx[0], kvHead = idx[1], key = idx[2], row = idx[3];
  if (f.group == 1)
    return {batch, kvHead, row, key};
  Value m = arith::ConstantIndexOp::create(b, loc, f.m);
  Value g = arith::ConstantIndexOp::create(b, loc, f.group);
  Value head =
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, kvHead, g),
                            arith::DivUIOp::create(b, loc, row, m));
  return {batch, head, arith::RemUIOp::create(b, loc, row, m), key};
}

/// A new entry block of `region` with arguments `types`.
Block *newBlock(OpBuilder &b, Region &region, TypeRange types, Location loc) {
  SmallVector<Location> locs(types.size(), loc);
  return b.createBlock(&region, {}, types, locs);
}

/// The region signature (logits, 4 indices, captures) of an op reading
/// `captures`.
SmallVector<Type> regionTypes(OpBuilder &b, unsigned logits,
                              ValueRange captures) {
  SmallVector<Type> types(logits, b.getF32Type());
  types.append(4, b.getIndexType());
  llvm::append_range(types, captures.getTypes());
  return types;
}

/// Clones the forward mask into `op`'s mask region (indices mapped).
void cloneMask(OpBuilder &b, const Forward &f, AttentionOp op,
               ValueRange captures, bool transposed) {
  Region &fwd = f.op.getMask();
  if (fwd.empty())
    return;
  OpBuilder::InsertionGuard guard(b);
  Location loc = f.op.getLoc();
  Block *block = newBlock(b, op.getMask(), regionTypes(b, 0, captures), loc);
  SmallVector<Value> idx =
      forwardIndices(b, loc, f, block->getArguments(), transposed);
  IRMapping map;
  Block &src = fwd.front();
  for (unsigned d = 0; d < 4; ++d)
    map.map(src.getArgument(d), idx[d]);
  for (auto [from, to] : llvm::zip(src.getArguments().drop_front(4),
                                   block->getArguments().drop_front(4)))
    map.map(from, to);
  for (Operation &inner : src)
    b.clone(inner, map);
}

/// Where a region reads capture argument `arg` once (a float tensor, at
/// any indices: the score's may compute them, as a table's bucket): that
/// read; else null.
tensor::ExtractOp singleRead(BlockArgument arg) {
  if (!arg.hasOneUse())
    return nullptr;
  auto read = dyn_cast<tensor::ExtractOp>(*arg.getUsers().begin());
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  if (!read || !type || !isa<FloatType>(type.getElementType()))
    return nullptr;
  return read;
}

/// Where a region (the epilogue) reads capture argument `arg` once, at
/// indices that are its own (b, h, q_idx, d) arguments or 0 on a unit dim:
/// that read; else null (the capture's gradient is not derived).
tensor::ExtractOp ownIndicesRead(Block &region, BlockArgument arg,
                                 unsigned branches) {
  tensor::ExtractOp read = singleRead(arg);
  if (!read)
    return nullptr;
  auto type = cast<RankedTensorType>(arg.getType());
  llvm::SmallBitVector seen(4);
  for (auto [dim, index] : llvm::enumerate(read.getIndices())) {
    auto from = dyn_cast<BlockArgument>(index);
    if (from && from.getOwner() == &region && from.getArgNumber() >= branches &&
        from.getArgNumber() < branches + 4) {
      unsigned d = from.getArgNumber() - branches;
      if (seen.test(d))
        return nullptr;
      seen.set(d);
      continue;
    }
    if (!matchPattern(index, m_Zero()) || type.getDimSize(dim) != 1)
      return nullptr;
  }
  return read;
}

/// The dims of a capture that a region reads at its own indices
/// (`ownIndicesRead`): the read's loop expressions over the region's four
/// indices, their sizes, and the reassociation that adds back its unit
/// dims.
struct ReadDims {
  SmallVector<AffineExpr> exprs;
  SmallVector<int64_t> shape;
  SmallVector<ReassociationIndices> groups;
  /// The capture dims whose index the region computes (loops 4, 5, ..).
  SmallVector<unsigned> computed;
};

ReadDims readDims(tensor::ExtractOp read, unsigned branches) {
  auto type = cast<RankedTensorType>(read.getTensor().getType());
  ReadDims dims;
  for (auto [dim, index] : llvm::enumerate(read.getIndices())) {
    auto from = dyn_cast<BlockArgument>(index);
    bool own = from && from.getOwner() == read->getBlock() &&
               from.getArgNumber() >= branches &&
               from.getArgNumber() < branches + 4;
    bool unitZero = matchPattern(index, m_Zero()) && type.getDimSize(dim) == 1;
    if (own || !unitZero) {
      // Unit dims before the first indexed one join its group.
      if (!dims.shape.empty() || dims.groups.empty())
        dims.groups.emplace_back();
      // An index the region computes (a table's bucket) is a loop of its
      // own after the four, compared with the computed value.
      unsigned loop =
          own ? from.getArgNumber() - branches : 4 + dims.computed.size();
      if (!own)
        dims.computed.push_back(dim);
      dims.exprs.push_back(getAffineDimExpr(loop, read.getContext()));
      dims.shape.push_back(type.getDimSize(dim));
    }
    if (dims.groups.empty())
      dims.groups.emplace_back();
    dims.groups.back().push_back(dim);
  }
  // Unit dims after the last indexed one join its group; with none
  // indexed, the result is a scalar expanded to the unit shape.
  if (dims.shape.empty())
    dims.groups.clear();
  return dims;
}

/// How the attention computing dS gives a capture read's gradient: as
/// terms of it (attn.attention's `terms`), or not.
enum class TermForm {
  /// From materialized S and dP (reads at computed indices, as a table's
  /// bucket, or at kv_idx without q_idx).
  None,
  /// dT * d score / d element per element, [B, Hq, M, N], summed
  /// afterwards over the dims the read does not take: a read at q_idx and
  /// kv_idx (an N x N pair bias).
  Elements,
  /// Row sums over the keys, [B, Hq, M] each: a read that takes no kv_idx
  /// (per-head slopes, per-query values). For softmax, three of them: sum_j
  /// P dP g, sum_j P g and sum_j P dP (g = d score / d element), combined
  /// per row as the first minus the third times the second. That is sum_j
  /// dS g with Delta = sum_j P dP from the kernel's f32 P and dP: the Delta
  /// from the 16-bit output would weigh its rounding by each row's key
  /// distances (up to N) in a slope's gradient.
  Rows,
};

TermForm termFormOf(tensor::ExtractOp read, unsigned branches) {
  ReadDims dims = readDims(read, branches);
  auto takes = [&](unsigned d) {
    return llvm::any_of(dims.exprs, [&](AffineExpr e) {
      return cast<AffineDimExpr>(e).getPosition() == d;
    });
  };
  if (!dims.computed.empty())
    return TermForm::None;
  if (!takes(3))
    return TermForm::Rows;
  return takes(2) ? TermForm::Elements : TermForm::None;
}

/// How many terms a read of form `termFormOf(read)` takes.
unsigned termCount(tensor::ExtractOp read, unsigned branches,
                   Normalizer normalizer) {
  return termFormOf(read, branches) == TermForm::Rows &&
                 normalizer == Normalizer::softmax
             ? 3
             : 1;
}

/// What a gradient attention's score region yields per element.
enum class Weights {
  /// dS, and 0 for the dP branch (dQ; dK where dV is apart).
  ScoreGradient,
  /// P alone, one branch (dV apart).
  Probabilities,
  /// scale dS and P, each weighing its own block of the value's columns
  /// (dK and dV in one attention, value_columns).
  KeyAndValue,
};

/// The score region of a gradient attention: from the logit branches (S,
/// and dP unless it yields P alone) and the row statistics (L, Delta: the
/// last two captures for softmax), yields what `weights` says.
LogicalResult buildScore(OpBuilder &b, const Forward &f, AttentionOp op,
                         ValueRange captures, bool transposed, Weights weights,
                         ArrayRef<tensor::ExtractOp> termReads = {}) {
  OpBuilder::InsertionGuard guard(b);
  Location loc = f.op.getLoc();
  bool weightsOnly = weights == Weights::Probabilities;
  unsigned logits = weightsOnly ? 1 : 2;
  Block *block =
      newBlock(b, op.getScore(), regionTypes(b, logits, captures), loc);
  ValueRange args = block->getArguments();
  Value s = args[0];
  SmallVector<Value> idx =
      forwardIndices(b, loc, f, args.slice(logits, 4), transposed);
  unsigned numFwdCaptures = f.op.getCaptures().size();
  ValueRange caps = args.drop_front(logits + 4);
  // t = score(s) and dt/ds.
  Value t = s, dt = floatConst(b, loc, b.getF32Type(), 1.0);
  if (!f.op.getScore().empty()) {
    Block &src = f.op.getScore().front();
    IRMapping map;
    mapScoreArgs(b, loc, f, src, s, idx, caps.take_front(numFwdCaptures), map);
    FailureOr<std::pair<Value, Value>> derived =
        ScoreDerivative(b, loc).emit(src, map, f.branch, f.branch);
    if (failed(derived))
      return failure();
    std::tie(t, dt) = *derived;
  }
  // The row statistics at this element's query row (the gradient
  // attention's own indices: its key index for the transposed ones).
  auto rowStat = [&](unsigned k) {
    SmallVector<Value> at = {args[logits], args[logits + 1],
                             args[logits + (transposed ? 3 : 2)]};
    return tensor::ExtractOp::create(b, loc, caps[numFwdCaptures + k], at)
        .getResult();
  };
  Value one = floatConst(b, loc, b.getF32Type(), 1.0);
  Value p;
  switch (f.normalizer) {
  case Normalizer::softmax: {
    // exp(t - L) as 2^(t log2 e - L log2 e): the kernels fold log2 e into
    // the logit's scale and the row's term, one FMA and one ex2 per element.
    Value log2e = floatConst(b, loc, b.getF32Type(), M_LOG2E);
    auto timesLog2e = [&](Value x) {
      return arith::MulFOp::create(b, loc, x, log2e);
    };
    p = math::Exp2Op::create(
        b, loc,
        arith::SubFOp::create(b, loc, timesLog2e(t), timesLog2e(rowStat(0))));
    break;
  }
  case Normalizer::sigmoid:
    p = arith::DivFOp::create(
        b, loc, one,
        arith::AddFOp::create(
            b, loc, one,
            math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, t))));
    break;
  case Normalizer::none:
    p = t;
    break;
  }
  if (weightsOnly) {
    YieldOp::create(b, loc, ValueRange{p});
    return success();
  }
  // KeyAndValue weighs Q's columns by scale dS: the scale comes with dP's
  // logit (its branch scale, folded into an FMA with Delta's subtraction;
  // Delta scaled once per row statistic) rather than as one more multiply
  // per element.
  bool scaledDp = weights == Weights::KeyAndValue;
  Value dp = args[1], dT;
  switch (f.normalizer) {
  case Normalizer::softmax: {
    Value delta = rowStat(1);
    if (scaledDp)
      delta = arith::MulFOp::create(
          b, loc, delta, floatConst(b, loc, b.getF32Type(), f.scale));
    dT = arith::MulFOp::create(b, loc, p,
                               arith::SubFOp::create(b, loc, dp, delta));
    break;
  }
  case Normalizer::sigmoid:
    dT = arith::MulFOp::create(
        b, loc, dp,
        arith::MulFOp::create(b, loc, p,
                              arith::SubFOp::create(b, loc, one, p)));
    break;
  case Normalizer::none:
    dT = dp;
    break;
  }
  Value dS = arith::MulFOp::create(b, loc, dT, dt);
  if (weights == Weights::KeyAndValue) {
    // dK = scale dS^T Q: the weight is scale dS (no epilogue).
    YieldOp::create(b, loc, ValueRange{dS, p});
    return success();
  }
  SmallVector<Value> yields = {dS, floatConst(b, loc, b.getF32Type(), 0.0)};
  // The terms: dT times the score's derivative with respect to the element
  // each capture read reads (the forward's score region again, seeded
  // there).
  for (tensor::ExtractOp read : termReads) {
    Block &src = f.op.getScore().front();
    IRMapping map;
    mapScoreArgs(b, loc, f, src, s, idx, caps.take_front(numFwdCaptures), map);
    FailureOr<std::pair<Value, Value>> derived =
        ScoreDerivative(b, loc).emit(src, map, read.getResult(), f.branch);
    if (failed(derived))
      return failure();
    Value g = derived->second;
    if (termCount(read, f.branches, f.normalizer) == 1) {
      yields.push_back(arith::MulFOp::create(b, loc, dT, g));
      continue;
    }
    // Softmax's row sums (TermForm::Rows): P dP g, P g, P dP.
    Value pdp = arith::MulFOp::create(b, loc, p, dp);
    yields.push_back(arith::MulFOp::create(b, loc, pdp, g));
    yields.push_back(arith::MulFOp::create(b, loc, p, g));
    yields.push_back(pdp);
  }
  YieldOp::create(b, loc, yields);
  return success();
}

/// `scale * o_0`: the epilogue of a two-branch gradient attention (the dP
/// branch's output is zero).
void buildEpilogue(OpBuilder &b, const Forward &f, AttentionOp op,
                   ValueRange captures) {
  OpBuilder::InsertionGuard guard(b);
  Location loc = f.op.getLoc();
  Block *block =
      newBlock(b, op.getEpilogue(), regionTypes(b, 2, captures), loc);
  Value scaled =
      arith::MulFOp::create(b, loc, block->getArgument(0),
                            floatConst(b, loc, b.getF32Type(), f.scale));
  YieldOp::create(b, loc, ValueRange{scaled});
}

/// `x` [B, Hq, M, ...] seen as [B, Hkv, g M, ...]: the query heads of each
/// KV head side by side along the rows.
Value groupRows(OpBuilder &b, Location loc, const Forward &f, Value x) {
  if (f.group == 1)
    return x;
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  SmallVector<int64_t> split = {shape[0], shape[1] / f.group, f.group};
  llvm::append_range(split, ArrayRef<int64_t>(shape).drop_front(2));
  SmallVector<ReassociationIndices> expand = {{0}, {1, 2}};
  for (int64_t d = 3; d < int64_t(split.size()); ++d)
    expand.push_back({d});
  Value expanded = tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(split, type.getElementType()), x, expand);
  SmallVector<ReassociationIndices> collapse = {{0}, {1}, {2, 3}};
  for (int64_t d = 4; d < int64_t(split.size()); ++d)
    collapse.push_back({d});
  return tensor::CollapseShapeOp::create(b, loc, expanded, collapse);
}

/// In a transposed gradient attention (rows are keys), a capture whose
/// every read takes the forward's query row, then its key last, as a pair
/// bias [.., M, N] does: the capture with its last two dims swapped,
/// read with its last two indices swapped. The attention's consecutive
/// columns (query rows) then read consecutive elements, where the capture
/// as it is had them N elements apart; the copy is one pass over it.
void transposeKeyMajorReads(OpBuilder &b, AttentionOp op) {
  unsigned branches = op.getNumBranches(),
           numCaptures = op.getCaptures().size();
  for (unsigned c = 0; c < numCaptures; ++c) {
    auto type = cast<RankedTensorType>(op.getCaptures()[c].getType());
    int64_t rank = type.getRank();
    if (rank < 2 || !type.hasStaticShape())
      continue;
    // The capture's block argument and its reads, in every region.
    SmallVector<BlockArgument> args;
    SmallVector<tensor::ExtractOp> reads;
    bool keyMajor = true, read = false;
    for (Region *region : {&op.getScore(), &op.getMask(), &op.getEpilogue()}) {
      if (region->empty())
        continue;
      Block &block = region->front();
      unsigned leading = region == &op.getMask() ? 0 : branches;
      BlockArgument arg = block.getArgument(leading + 4 + c);
      args.push_back(arg);
      // The forward's (q_idx, kv_idx) last: this attention's row index
      // (kv_idx, or its remainder by M with GQA), then its q_idx.
      Value row = block.getArgument(leading + 3);
      auto fromRow = [&](Value v) {
        Operation *def = v.getDefiningOp();
        return v == row || (def && llvm::is_contained(def->getOperands(), row));
      };
      for (Operation *user : arg.getUsers()) {
        auto extract = dyn_cast<tensor::ExtractOp>(user);
        keyMajor &=
            region != &op.getEpilogue() && extract &&
            extract.getIndices().back() == block.getArgument(leading + 2) &&
            fromRow(extract.getIndices()[rank - 2]);
        if (extract)
          reads.push_back(extract);
        read = true;
      }
    }
    if (!read || !keyMajor)
      continue;
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 1], perm[rank - 2]);
    SmallVector<int64_t> shape(type.getShape());
    std::swap(shape[rank - 1], shape[rank - 2]);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(op);
    Value init =
        tensor::EmptyOp::create(b, op.getLoc(), shape, type.getElementType());
    Value swapped = linalg::TransposeOp::create(b, op.getLoc(),
                                                op.getCaptures()[c], init, perm)
                        .getResult()[0];
    op.getCapturesMutable()[c].set(swapped);
    for (BlockArgument arg : args)
      arg.setType(swapped.getType());
    for (tensor::ExtractOp extract : reads) {
      SmallVector<Value> indices(extract.getIndices());
      std::swap(indices[rank - 1], indices[rank - 2]);
      extract.getIndicesMutable().assign(indices);
    }
  }
}

/// A gradient attention: `queries`/`keys` the logit branches, `value` what
/// the weights multiply (KeyAndValue: each branch its block of
/// `valueColumns`), `captures` the forward's plus the row statistics. With
/// `keySide`, the S branch's key-side product too (its weights, transposed,
/// times its queries: with KeyAndValue's scale dS^T, dQ), stored there.
FailureOr<Value>
gradientAttention(OpBuilder &b, const Forward &f, ValueRange queries,
                  ValueRange keys, Value value, ValueRange captures,
                  Type resultElement, bool transposed, Weights weights,
                  ArrayRef<int64_t> valueColumns = {}, Value *keySide = nullptr,
                  ArrayRef<tensor::ExtractOp> termReads = {},
                  SmallVectorImpl<Value> *terms = nullptr) {
  Location loc = f.op.getLoc();
  auto qType = cast<RankedTensorType>(queries[0].getType());
  auto kType = cast<RankedTensorType>(keys[0].getType());
  auto vType = cast<RankedTensorType>(value.getType());
  auto outType =
      RankedTensorType::get({qType.getDimSize(0), qType.getDimSize(1),
                             qType.getDimSize(2), vType.getDimSize(3)},
                            resultElement);
  Type keySideType;
  if (keySide)
    keySideType =
        RankedTensorType::get({kType.getDimSize(0), kType.getDimSize(1),
                               kType.getDimSize(2), qType.getDimSize(3)},
                              b.getF32Type());
  // Each read's terms: [B, Hq, M, N] per element, or [B, Hq, M] row sums.
  SmallVector<Type> termTypes;
  SmallVector<Attribute> termDims;
  for (tensor::ExtractOp read : termReads) {
    SmallVector<int64_t> shape = {qType.getDimSize(0), qType.getDimSize(1),
                                  qType.getDimSize(2)};
    SmallVector<int64_t> dims = {0, 1, 2};
    if (termFormOf(read, f.branches) == TermForm::Elements) {
      shape.push_back(kType.getDimSize(2));
      dims.push_back(3);
    }
    unsigned count = termCount(read, f.branches, f.normalizer);
    termTypes.append(count, RankedTensorType::get(shape, b.getF32Type()));
    termDims.append(count, b.getDenseI64ArrayAttr(dims));
  }
  // (KeyAndValue's dP logit carries the scale of its weight scale dS: see
  // buildScore.)
  SmallVector<double> scales = {
      f.scale, weights == Weights::KeyAndValue ? f.scale : 1.0};
  scales.resize(queries.size());
  auto op = AttentionOp::create(
      b, loc, outType, TypeRange{}, keySideType, termTypes, queries, keys,
      value, ValueRange{}, captures, b.getDenseF64ArrayAttr(scales),
      NormalizerAttr::get(b.getContext(), Normalizer::none),
      /*mean_empty_rows=*/UnitAttr(), /*value_columns=*/DenseI64ArrayAttr(),
      /*key_side_branch=*/keySide ? b.getI64IntegerAttr(0) : IntegerAttr(),
      termDims.empty() ? ArrayAttr() : b.getArrayAttr(termDims));
  if (weights == Weights::KeyAndValue)
    op.setValueColumns(valueColumns);
  if (failed(buildScore(b, f, op, captures, transposed, weights, termReads)))
    return failure();
  if (terms)
    llvm::append_range(*terms, op.getTerms());
  cloneMask(b, f, op, captures, transposed);
  if (weights == Weights::ScoreGradient)
    buildEpilogue(b, f, op, captures);
  if (transposed)
    transposeKeyMajorReads(b, op);
  if (keySide)
    *keySide = op.getKeySide();
  return op.getOutput();
}

/// `x` [B, Hkv, g M, ...] (f32) as [B, Hq, M, ...] in `element`: groupRows'
/// inverse, then rounded.
Value ungroupRows(OpBuilder &b, Location loc, const Forward &f, Value x,
                  Type element) {
  auto type = cast<RankedTensorType>(x.getType());
  if (f.group != 1) {
    SmallVector<int64_t> shape(type.getShape());
    SmallVector<int64_t> split = {shape[0], shape[1], f.group,
                                  shape[2] / f.group};
    llvm::append_range(split, ArrayRef<int64_t>(shape).drop_front(3));
    SmallVector<ReassociationIndices> expand = {{0}, {1}, {2, 3}};
    for (int64_t d = 4; d < int64_t(split.size()); ++d)
      expand.push_back({d});
    Value expanded = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(split, type.getElementType()), x, expand);
    SmallVector<ReassociationIndices> collapse = {{0}, {1, 2}, {3}};
    for (int64_t d = 4; d < int64_t(split.size()); ++d)
      collapse.push_back({d});
    x = tensor::CollapseShapeOp::create(b, loc, expanded, collapse);
    type = cast<RankedTensorType>(x.getType());
  }
  if (type.getElementType() == element)
    return x;
  AffineMap all = b.getMultiDimIdentityMap(type.getRank());
  return linalg::GenericOp::create(
             b, loc, type.clone(element), x,
             tensor::EmptyOp::create(b, loc, type.getShape(), element)
                 .getResult(),
             {all, all},
             SmallVector<utils::IteratorType>(type.getRank(),
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               linalg::YieldOp::create(
                   nb, l,
                   ValueRange{arith::TruncFOp::create(nb, l, element, args[0])
                                  .getResult()});
             })
      .getResult(0);
}

/// Whether the forward's mask reads q_idx or kv_idx (causal, windows,
/// documents): bounds of the kept tiles that grouped rows (`groupRows`,
/// where the forward's query row is the column mod M) would turn into a
/// block mask.
bool masksPositions(AttentionOp op) {
  if (op.getMask().empty())
    return false;
  Block &mask = op.getMask().front();
  return !mask.getArgument(2).use_empty() || !mask.getArgument(3).use_empty();
}

/// `x` [B, Hkv, N, D] repeated for each of the g query heads of a KV head:
/// [B, Hq, N, D].
Value repeatHeads(OpBuilder &b, Location loc, const Forward &f, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] *= f.group;
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, h, n, d;
  bindDims(ctx, bb, h, n, d);
  SmallVector<AffineMap> maps = {
      AffineMap::get(4, 0, {bb, h.floorDiv(f.group), n, d}, ctx),
      b.getMultiDimIdentityMap(4)};
  return linalg::GenericOp::create(
             b, loc, type.clone(shape), x,
             tensor::EmptyOp::create(b, loc, shape, type.getElementType())
                 .getResult(),
             maps,
             SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
             [](OpBuilder &nb, Location l, ValueRange args) {
               linalg::YieldOp::create(nb, l, args[0]);
             })
      .getResult(0);
}

/// `x` [B, Hq, N, D] summed over the g query heads of each KV head (in
/// f32): [B, Hkv, N, D] in x's element type. repeatHeads' adjoint: one
/// elementwise pass reading the group's g heads (x once per head, at head
/// h g + m), so no zero fill and no second pass for the rounding.
Value sumGroups(OpBuilder &b, Location loc, const Forward &f, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] /= f.group;
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, h, n, d;
  bindDims(ctx, bb, h, n, d);
  SmallVector<AffineMap> maps;
  for (int64_t m = 0; m < f.group; ++m)
    maps.push_back(AffineMap::get(4, 0, {bb, h * f.group + m, n, d}, ctx));
  maps.push_back(b.getMultiDimIdentityMap(4));
  Type element = type.getElementType();
  return linalg::GenericOp::create(
             b, loc, type.clone(shape), SmallVector<Value>(f.group, x),
             tensor::EmptyOp::create(b, loc, shape, element).getResult(), maps,
             SmallVector<utils::IteratorType>(4, utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value total = widen(nb, l, args[0]);
               for (Value x : args.drop_front().drop_back())
                 total = arith::AddFOp::create(nb, l, total, widen(nb, l, x));
               if (total.getType() != element)
                 total = arith::TruncFOp::create(nb, l, element, total);
               linalg::YieldOp::create(nb, l, total);
             })
      .getResult(0);
}

/// Columns [first, first + width) of `x` [.., D].
Value columnsOf(OpBuilder &b, Location loc, Value x, int64_t first,
                int64_t width) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, x);
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  offsets.back() = b.getIndexAttr(first);
  sizes.back() = b.getIndexAttr(width);
  return tensor::ExtractSliceOp::create(b, loc, x, offsets, sizes, strides);
}

/// Whether dK and dV of one branch can be one attention: one element type
/// (one output holds both) and Q's head dim whole 64-column swizzle atoms
/// (wgmma starts the second block's P V at an atom).
bool fusesKeyValue(Value k, Value v, Value rowsQ, Value rowsDout) {
  auto typeOf = [](Value x) { return cast<RankedTensorType>(x.getType()); };
  Type element = typeOf(k).getElementType();
  int64_t dqk = typeOf(rowsQ).getDimSize(3),
          dv = typeOf(rowsDout).getDimSize(3);
  return llvm::all_of(
             ValueRange{v, rowsQ, rowsDout},
             [&](Value x) { return typeOf(x).getElementType() == element; }) &&
         !ShapedType::isDynamic(dqk) && !ShapedType::isDynamic(dv) &&
         dqk % ArchInfo::atomElements(element.getIntOrFloatBitWidth()) == 0;
}

/// dK and dV of one branch in one attention from K and V to the queries of
/// their group (where fusesKeyValue): the weights scale dS and P weigh Q's
/// and dO's columns of one value [Q | dO] (value_columns), so S = K Q^T and
/// P are computed once for both, where dK and dV apart compute them twice.
/// `sumHeads` (per-head dK and dV): what [dK | dV] becomes before the slices.
FailureOr<std::pair<Value, Value>>
keyValueGradients(OpBuilder &b, const Forward &f, Value k, Value v, Value rowsQ,
                  Value rowsDout, ValueRange captures, Value *keySide = nullptr,
                  function_ref<Value(Value)> sumHeads = nullptr) {
  auto typeOf = [](Value x) { return cast<RankedTensorType>(x.getType()); };
  Type element = typeOf(k).getElementType();
  int64_t dqk = typeOf(rowsQ).getDimSize(3),
          dv = typeOf(rowsDout).getDimSize(3);
  Location loc = f.op.getLoc();
  Value value =
      tensor::ConcatOp::create(b, loc, /*dim=*/3, ValueRange{rowsQ, rowsDout});
  FailureOr<Value> out = gradientAttention(
      b, f, {k, v}, {rowsQ, rowsDout}, value, captures, element,
      /*transposed=*/true, Weights::KeyAndValue, {dqk, dv}, keySide);
  if (failed(out))
    return failure();
  // Per query head, [dK | dV] summed over the groups whole (one pass, and
  // the slices then of the KV heads' sums, not copies of every head's).
  Value all = sumHeads ? sumHeads(*out) : *out;
  Value dk = columnsOf(b, loc, all, 0, dqk);
  return std::pair(dk, columnsOf(b, loc, all, dqk, dv));
}

/// Delta = rowsum(dO * O) in f32, [B, Hq, M].
Value rowDot(OpBuilder &b, Location loc, Value dout, Value out) {
  MLIRContext *ctx = b.getContext();
  auto type = cast<RankedTensorType>(out.getType());
  auto rowType =
      RankedTensorType::get(type.getShape().drop_back(), b.getF32Type());
  Value init = zerosF32(b, loc, rowType.getShape());
  auto d = [&](unsigned k) { return getAffineDimExpr(k, ctx); };
  AffineMap all = AffineMap::get(4, 0, {d(0), d(1), d(2), d(3)}, ctx);
  using utils::IteratorType;
  return linalg::GenericOp::create(
             b, loc, rowType, ValueRange{dout, out}, init,
             {all, all, AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
             {IteratorType::parallel, IteratorType::parallel,
              IteratorType::parallel, IteratorType::reduction},
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value prod = arith::MulFOp::create(nb, l, widen(nb, l, args[0]),
                                                  widen(nb, l, args[1]));
               linalg::YieldOp::create(
                   nb, l,
                   ValueRange{arith::AddFOp::create(nb, l, args[2], prod)});
             })
      .getResult(0);
}

/// dO through the epilogue to branch `branch`: `dout * d epilogue / d o_r`
/// per element (`outs` the branches' own outputs, recomputed), in dO's
/// type.
FailureOr<Value> throughEpilogue(OpBuilder &b, Location loc, AttentionOp op,
                                 ValueRange outs, Value dout,
                                 ValueRange captures, unsigned branch) {
  auto type = cast<RankedTensorType>(dout.getType());
  AffineMap all = b.getMultiDimIdentityMap(4);
  using utils::IteratorType;
  LogicalResult result = success();
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  SmallVector<Value> ins(outs);
  ins.push_back(dout);
  unsigned branches = outs.size();
  auto generic = linalg::GenericOp::create(
      b, loc, type, ins, init, SmallVector<AffineMap>(branches + 2, all),
      SmallVector<IteratorType>(4, IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Block &src = op.getEpilogue().front();
        IRMapping map;
        mapEpilogue(nb, l, src, args.take_front(branches), captures, map);
        FailureOr<std::pair<Value, Value>> derived =
            ScoreDerivative(nb, l, "epilogue").emit(src, map, branch);
        Value grad = floatConst(nb, l, nb.getF32Type(), 0.0);
        if (succeeded(derived))
          grad = arith::MulFOp::create(nb, l, derived->second,
                                       widen(nb, l, args[branches]));
        else
          result = failure();
        if (grad.getType() != type.getElementType())
          grad = arith::TruncFOp::create(nb, l, type.getElementType(), grad);
        linalg::YieldOp::create(nb, l, ValueRange{grad});
      });
  if (failed(result))
    return failure();
  return generic.getResult(0);
}

/// The sink's gradient: dsink[h] = -sum_{b,i} exp(sink[h] - L) Delta, in
/// the sink's type.
Value sinkGradient(OpBuilder &b, Location loc, Value sink, Value lse,
                   Value delta) {
  MLIRContext *ctx = b.getContext();
  auto sinkType = cast<RankedTensorType>(sink.getType());
  auto f32 = RankedTensorType::get(sinkType.getShape(), b.getF32Type());
  Value init = zerosF32(b, loc, f32.getShape());
  auto d = [&](unsigned k) { return getAffineDimExpr(k, ctx); };
  AffineMap rows = AffineMap::get(3, 0, {d(0), d(1), d(2)}, ctx);
  AffineMap head = AffineMap::get(3, 0, {d(1)}, ctx);
  using utils::IteratorType;
  Value sum =
      linalg::GenericOp::create(
          b, loc, f32, ValueRange{sink, lse, delta}, init,
          {head, rows, rows, head},
          {IteratorType::reduction, IteratorType::parallel,
           IteratorType::reduction},
          [&](OpBuilder &nb, Location l, ValueRange args) {
            Value s = widen(nb, l, args[0]);
            Value p = math::ExpOp::create(
                nb, l, arith::SubFOp::create(nb, l, s, args[1]));
            Value term = arith::MulFOp::create(nb, l, p, args[2]);
            linalg::YieldOp::create(
                nb, l, ValueRange{arith::SubFOp::create(nb, l, args[3], term)});
          })
          .getResult(0);
  if (sinkType.getElementType() == b.getF32Type())
    return sum;
  AffineMap id = b.getMultiDimIdentityMap(1);
  return linalg::GenericOp::create(
             b, loc, sinkType, sum,
             tensor::EmptyOp::create(b, loc, sinkType.getShape(),
                                     sinkType.getElementType())
                 .getResult(),
             {id, id}, {IteratorType::parallel},
             [&](OpBuilder &nb, Location l, ValueRange args) {
               linalg::YieldOp::create(
                   nb, l,
                   ValueRange{arith::TruncFOp::create(
                       nb, l, sinkType.getElementType(), args[0])});
             })
      .getResult(0);
}

/// A generic over the loops of `inMaps` (b, h, q_idx and d or kv_idx)
/// summing what `term` gives per element into the dims `dims` indexes
/// (f32, zeros first): parallel over those, reduced over the others.
Value sumInto(OpBuilder &b, Location loc, const ReadDims &dims, ValueRange ins,
              ArrayRef<AffineMap> inMaps,
              function_ref<Value(OpBuilder &, Location, ValueRange)> term) {
  auto f32 = RankedTensorType::get(dims.shape, b.getF32Type());
  unsigned loops = inMaps.front().getNumDims();
  SmallVector<AffineMap> maps(inMaps);
  maps.push_back(AffineMap::get(loops, 0, dims.exprs, b.getContext()));
  SmallVector<utils::IteratorType> iterators(loops,
                                             utils::IteratorType::reduction);
  for (AffineExpr e : dims.exprs)
    iterators[cast<AffineDimExpr>(e).getPosition()] =
        utils::IteratorType::parallel;
  return linalg::GenericOp::create(
             b, loc, f32, ins, zerosF32(b, loc, dims.shape), maps, iterators,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value t = term(nb, l, args.drop_back());
               linalg::YieldOp::create(
                   nb, l,
                   ValueRange{arith::AddFOp::create(nb, l, args.back(), t)});
             })
      .getResult(0);
}

/// `grad` (f32, over the dims a read indexes) in the capture's shape
/// `type` and element type.
Value inCaptureType(OpBuilder &b, Location loc, Value grad,
                    RankedTensorType type, const ReadDims &dims) {
  if (dims.shape.size() != size_t(type.getRank()))
    grad = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(type.getShape(), b.getF32Type()), grad,
        dims.groups);
  Type element = type.getElementType();
  if (element == b.getF32Type())
    return grad;
  bool wider = element.getIntOrFloatBitWidth() > 32;
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  return linalg::GenericOp::create(
             b, loc, type, grad,
             tensor::EmptyOp::create(b, loc, type.getShape(),
                                     type.getElementType())
                 .getResult(),
             {id, id},
             SmallVector<utils::IteratorType>(type.getRank(),
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value x = wider
                             ? arith::ExtFOp::create(nb, l, element, args[0])
                                   .getResult()
                             : arith::TruncFOp::create(nb, l, element, args[0])
                                   .getResult();
               linalg::YieldOp::create(nb, l, ValueRange{x});
             })
      .getResult(0);
}

/// The most term elements `sumTermsElementwise` adds per result element.
constexpr int64_t kMaxUnrolledTermSum = 32;

/// Element terms (each [B, Hq, M, N] f32, one per branch) summed over the
/// dims the read does not take and converted to the capture's type in one
/// elementwise pass over the read's dims (each term read once per index of
/// those dims: constants in its indexing map), so that the reference path
/// runs one kernel where a reduction into a zero-filled f32 accumulator and
/// a conversion of it took three (at B = 2, N = 8k a pair bias's gradient
/// moved ~56 GB a call that way, ~21 GB this one). Null where the dims
/// summed over are dynamic or hold more than kMaxUnrolledTermSum elements
/// in all.
Value sumTermsElementwise(OpBuilder &b, Location loc, ValueRange terms,
                          const ReadDims &dims, RankedTensorType type) {
  auto termType = cast<RankedTensorType>(terms.front().getType());
  if (termType.getRank() != 4 || !dims.computed.empty())
    return Value();
  // Each term dim's loop in the result (the read's order), or -1 where the
  // read does not take it and the sum runs over it.
  SmallVector<int64_t> loopOf(4, -1);
  for (auto [k, e] : llvm::enumerate(dims.exprs))
    loopOf[cast<AffineDimExpr>(e).getPosition()] = k;
  SmallVector<int64_t> summed;
  int64_t count = 1;
  for (int64_t d = 0; d < 4; ++d) {
    if (loopOf[d] >= 0)
      continue;
    if (termType.isDynamicDim(d))
      return Value();
    summed.push_back(d);
    count *= termType.getDimSize(d);
  }
  if (count * int64_t(terms.size()) > kMaxUnrolledTermSum)
    return Value();
  unsigned loops = dims.exprs.size();
  SmallVector<Value> ins;
  SmallVector<AffineMap> maps;
  for (Value term : terms)
    for (int64_t i = 0; i < count; ++i) {
      // Index i in the summed dims, the last fastest.
      SmallVector<int64_t> at(4, 0);
      int64_t rest = i;
      for (int64_t d : llvm::reverse(summed)) {
        at[d] = rest % termType.getDimSize(d);
        rest /= termType.getDimSize(d);
      }
      SmallVector<AffineExpr> exprs;
      for (int64_t d = 0; d < 4; ++d)
        exprs.push_back(loopOf[d] >= 0 ? b.getAffineDimExpr(loopOf[d])
                                       : b.getAffineConstantExpr(at[d]));
      ins.push_back(term);
      maps.push_back(AffineMap::get(loops, 0, exprs, b.getContext()));
    }
  maps.push_back(b.getMultiDimIdentityMap(loops));
  Type element = type.getElementType();
  auto resultType = RankedTensorType::get(dims.shape, element);
  Value result =
      linalg::GenericOp::create(
          b, loc, resultType, ins,
          tensor::EmptyOp::create(b, loc, dims.shape, element).getResult(),
          maps,
          SmallVector<utils::IteratorType>(loops,
                                           utils::IteratorType::parallel),
          [&](OpBuilder &nb, Location l, ValueRange args) {
            Value total = args.front();
            for (Value x : args.drop_back().drop_front())
              total = arith::AddFOp::create(nb, l, total, x);
            if (element.getIntOrFloatBitWidth() > 32)
              total = arith::ExtFOp::create(nb, l, element, total);
            else if (element.getIntOrFloatBitWidth() < 32)
              total = arith::TruncFOp::create(nb, l, element, total);
            linalg::YieldOp::create(nb, l, ValueRange{total});
          })
          .getResult(0);
  if (dims.shape.size() != size_t(type.getRank()))
    result = tensor::ExpandShapeOp::create(b, loc, type, result, dims.groups);
  return result;
}

/// The gradient of a capture the epilogue reads once (`read`): dO times
/// the epilogue's derivative with respect to the element read, summed over
/// the (b, h, q_idx, d) the read does not index, in the capture's shape and
/// type.
FailureOr<Value> epilogueCaptureGradient(OpBuilder &b, Location loc,
                                         AttentionOp op, tensor::ExtractOp read,
                                         ValueRange outs, Value dout,
                                         ValueRange captures) {
  unsigned branches = outs.size();
  ReadDims dims = readDims(read, branches);
  SmallVector<Value> ins(outs);
  ins.push_back(dout);
  SmallVector<AffineMap> maps(branches + 1, b.getMultiDimIdentityMap(4));
  LogicalResult result = success();
  Value grad = sumInto(
      b, loc, dims, ins, maps,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Block &src = op.getEpilogue().front();
        IRMapping map;
        mapEpilogue(nb, l, src, args.take_front(branches), captures, map);
        FailureOr<std::pair<Value, Value>> derived =
            ScoreDerivative(nb, l, "epilogue")
                .emit(src, map, read.getResult(), 0);
        if (failed(derived)) {
          result = failure();
          return floatConst(nb, l, nb.getF32Type(), 0.0);
        }
        return arith::MulFOp::create(nb, l, widen(nb, l, derived->second),
                                     widen(nb, l, args[branches]));
      });
  if (failed(result))
    return failure();
  return inCaptureType(
      b, loc, grad, cast<RankedTensorType>(read.getTensor().getType()), dims);
}

/// sum_c x[b, h, i, c] y[b, h / g, j, c] in f32, [B, Hq, M, N]: a branch's
/// unscaled logits (Q, K) or dP (dO, V), materialized for the gradients of
/// captures the score reads.
Value rowProducts(OpBuilder &b, Location loc, Value x, Value y, int64_t group) {
  auto xt = cast<RankedTensorType>(x.getType()),
       yt = cast<RankedTensorType>(y.getType());
  SmallVector<int64_t> shape = {xt.getDimSize(0), xt.getDimSize(1),
                                xt.getDimSize(2), yt.getDimSize(2)};
  MLIRContext *ctx = b.getContext();
  AffineExpr bb, h, i, j, c;
  bindDims(ctx, bb, h, i, j, c);
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {bb, h, i, c}, ctx),
      AffineMap::get(5, 0, {bb, group == 1 ? h : h.floorDiv(group), j, c}, ctx),
      AffineMap::get(5, 0, {bb, h, i, j}, ctx)};
  SmallVector<utils::IteratorType> iterators(4, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, RankedTensorType::get(shape, b.getF32Type()),
             ValueRange{x, y}, zerosF32(b, loc, shape), maps, iterators,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value product = arith::MulFOp::create(
                   nb, l, widen(nb, l, args[0]), widen(nb, l, args[1]));
               linalg::YieldOp::create(
                   nb, l,
                   ValueRange{arith::AddFOp::create(nb, l, args[2], product)});
             })
      .getResult(0);
}

/// A branch's score at one element of the materialized logits, for the
/// gradients of captures the score reads: t, dt / d (the element `read`
/// reads), and whether the mask keeps it.
struct ElementScore {
  Value t, dt, keep;
  /// Whether the element read is the one at the loops 4, 5, .. (the
  /// capture's computed dims); null without any.
  Value hit;
};

FailureOr<ElementScore> elementScore(OpBuilder &b, Location loc,
                                     const Forward &f, tensor::ExtractOp read,
                                     ArrayRef<unsigned> computed, Value logit,
                                     ValueRange captures) {
  SmallVector<Value> idx;
  for (unsigned d = 0; d < 4; ++d)
    idx.push_back(linalg::IndexOp::create(b, loc, d));
  Value s = arith::MulFOp::create(b, loc, logit,
                                  floatConst(b, loc, b.getF32Type(), f.scale));
  Block &src = f.op.getScore().front();
  IRMapping map;
  mapScoreArgs(b, loc, f, src, s, idx, captures, map);
  FailureOr<std::pair<Value, Value>> derived =
      ScoreDerivative(b, loc).emit(src, map, read.getResult(), f.branch);
  if (failed(derived))
    return failure();
  ElementScore e{derived->first, derived->second, Value(), Value()};
  for (auto [k, dim] : llvm::enumerate(computed)) {
    Value at = map.lookup(read.getIndices()[dim]);
    Value same = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, at,
                                       linalg::IndexOp::create(b, loc, 4 + k));
    e.hit = e.hit ? arith::AndIOp::create(b, loc, e.hit, same) : same;
  }
  if (f.op.getMask().empty()) {
    e.keep = arith::ConstantIntOp::create(b, loc, 1, 1);
    return e;
  }
  Block &mask = f.op.getMask().front();
  IRMapping maskMap;
  for (unsigned d = 0; d < 4; ++d)
    maskMap.map(mask.getArgument(d), idx[d]);
  for (auto [arg, cap] : llvm::zip(mask.getArguments().drop_front(4), captures))
    maskMap.map(arg, cap);
  for (Operation &op : mask.without_terminator())
    b.clone(op, maskMap);
  e.keep = maskMap.lookup(mask.getTerminator()->getOperand(0));
  return e;
}

/// What one branch gives a capture the score reads once: dS * d score / d
/// element, summed over the (b, h, q_idx, kv_idx) the read does not index
/// and, for indices the score computes (a table's bucket), over the
/// elements that read that entry (f32), from the materialized logits and
/// dP, masked elements zero. Softmax's dS = P (dP - Delta) takes Delta = sum_j
/// P dP from the same f32 P and dP (`lse` the branch's log-sum-exp), not from
/// the bf16 output: a slope's gradient weighs each row's error in Delta by
/// its key distances, up to N.
FailureOr<Value> scoreCaptureTerm(OpBuilder &b, const Forward &f,
                                  tensor::ExtractOp read, Value q, Value k,
                                  Value v, Value dout, Value lse,
                                  ValueRange captures) {
  Location loc = f.op.getLoc();
  SmallVector<Value> ins = {rowProducts(b, loc, q, k, f.group),
                            rowProducts(b, loc, dout, v, f.group)};
  AffineMap all = b.getMultiDimIdentityMap(4);
  SmallVector<AffineMap> maps = {all, all};
  LogicalResult result = success();
  ReadDims dims = readDims(read, f.branches);
  // Per element: the weight's part of dS (P, sigmoid's P (1 - P), or 1),
  // dt / d element, and whether the element counts: kept by the mask and,
  // for a table, reading the loops' entry. Whole terms of the others are
  // zeroed (their t, P and dt may be anything, infinities included).
  struct Weighed {
    Value w, dt, counted;
  };
  auto weigh = [&](OpBuilder &nb, Location l, ValueRange args,
                   bool withDerivative) -> Weighed {
    Value zero = floatConst(nb, l, nb.getF32Type(), 0.0),
          one = floatConst(nb, l, nb.getF32Type(), 1.0);
    FailureOr<ElementScore> e =
        elementScore(nb, l, f, read,
                     withDerivative ? ArrayRef<unsigned>(dims.computed)
                                    : ArrayRef<unsigned>(),
                     args[0], captures);
    if (failed(e)) {
      result = failure();
      return {zero, zero, arith::ConstantIntOp::create(nb, l, 0, 1)};
    }
    Value w = one;
    switch (f.normalizer) {
    case Normalizer::softmax:
      w = math::ExpOp::create(nb, l,
                              arith::SubFOp::create(nb, l, e->t, args[2]));
      break;
    case Normalizer::sigmoid: {
      Value p = arith::DivFOp::create(
          nb, l, one,
          arith::AddFOp::create(
              nb, l, one,
              math::ExpOp::create(nb, l, arith::NegFOp::create(nb, l, e->t))));
      w = arith::MulFOp::create(nb, l, p, arith::SubFOp::create(nb, l, one, p));
      break;
    }
    case Normalizer::none:
      break;
    }
    Value counted =
        e->hit ? arith::AndIOp::create(nb, l, e->keep, e->hit) : e->keep;
    return {w, withDerivative ? e->dt : Value(), counted};
  };
  auto counted = [](OpBuilder &nb, Location l, const Weighed &x, Value term) {
    return arith::SelectOp::create(nb, l, x.counted, term,
                                   floatConst(nb, l, nb.getF32Type(), 0.0))
        .getResult();
  };
  if (f.normalizer == Normalizer::softmax) {
    ins.push_back(lse);
    maps.push_back(all.getMajorSubMap(3));
    ReadDims rows;
    for (unsigned d = 0; d < 3; ++d)
      rows.exprs.push_back(b.getAffineDimExpr(d));
    llvm::append_range(rows.shape,
                       cast<RankedTensorType>(lse.getType()).getShape());
    Value delta = sumInto(
        b, loc, rows, ins, maps,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          Weighed x = weigh(nb, l, args, false);
          return counted(nb, l, x, arith::MulFOp::create(nb, l, x.w, args[1]));
        });
    ins.push_back(delta);
    maps.push_back(all.getMajorSubMap(3));
  }
  // A read that does not index the key sums each row first, then the
  // rows: a slope's N^2 terms per head in one f32 chain lose ~1e-2.
  ReadDims rows;
  bool byRows =
      dims.computed.empty() && llvm::none_of(dims.exprs, [](AffineExpr e) {
        return e.isFunctionOfDim(3);
      });
  // A table read at computed indices: one loop more per such dim, every
  // element compared with its loops (work N^2 times the table's extent).
  unsigned loops = 4 + dims.computed.size();
  for (AffineMap &map : maps)
    map = AffineMap::get(loops, 0, map.getResults(), b.getContext());
  if (byRows) {
    for (unsigned d = 0; d < 3; ++d)
      rows.exprs.push_back(b.getAffineDimExpr(d));
    llvm::append_range(
        rows.shape,
        ArrayRef<int64_t>(
            cast<RankedTensorType>(ins.front().getType()).getShape())
            .take_front(3));
  }
  Value grad = sumInto(
      b, loc, byRows ? rows : dims, ins, maps,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Weighed x = weigh(nb, l, args, true);
        Value dp = args[1];
        if (f.normalizer == Normalizer::softmax)
          dp = arith::SubFOp::create(nb, l, dp, args[3]);
        return counted(nb, l, x,
                       arith::MulFOp::create(
                           nb, l, arith::MulFOp::create(nb, l, x.w, dp), x.dt));
      });
  if (failed(result))
    return failure();
  if (byRows)
    grad =
        sumInto(b, loc, dims, grad, b.getMultiDimIdentityMap(3),
                [](OpBuilder &, Location, ValueRange args) { return args[0]; });
  return grad;
}

/// Whether the score region's result for branch `r` reads another
/// branch's logit (the gradient treats each branch's softmax alone).
bool readsOtherLogits(Block &score, unsigned r, unsigned branches) {
  SmallVector<Value> work = {score.getTerminator()->getOperand(r)};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() == &score && arg.getArgNumber() < branches &&
          arg.getArgNumber() != r)
        return true;
      continue;
    }
    if (Operation *def = v.getDefiningOp())
      llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// Why `op` has no gradient program here, or success.
LogicalResult checkDifferentiable(AttentionOp op) {
  auto fail = [&](const Twine &why) {
    return op.emitError("attn-gradient: ") << why;
  };
  unsigned branches = op.getNumBranches();
  if (!op.getScore().empty())
    for (unsigned r = 0; r < branches; ++r)
      if (readsOtherLogits(op.getScore().front(), r, branches))
        return fail("the score of branch " + Twine(r) +
                    " reads another branch's logit; its gradient is not "
                    "derived yet");
  if (op.getMeanEmptyRows() && !MaskScoreAnalysis(op).rowsNeverEmpty())
    return fail("rows whose keys are all masked take the mean of V here "
                "(a finite mask fill); their gradient is not derived yet");
  for (Value v : op->getOperands())
    if (!cast<RankedTensorType>(v.getType()).hasStaticShape())
      return fail("runtime shapes have no gradient program yet");
  return success();
}

/// Branch `r`'s own output (before the epilogue): [B, Hq, M, Dv] in the
/// attention's output type.
RankedTensorType branchOutputType(AttentionOp op, unsigned r) {
  auto q = cast<RankedTensorType>(op.getQueries()[r].getType());
  auto v = cast<RankedTensorType>(op.getValue().getType());
  return RankedTensorType::get(
      {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
      cast<RankedTensorType>(op.getOutput().getType()).getElementType());
}

/// Branch `r`'s log-sum-exp: f32 [B, Hq, M].
RankedTensorType lseType(AttentionOp op, unsigned r) {
  return RankedTensorType::get(branchOutputType(op, r).getShape().drop_back(),
                               Float32Type::get(op.getContext()));
}

/// Branch `f.branch` of the forward alone, again: its own output (no
/// epilogue) and, for softmax, its log-sum-exp.
AttentionOp branchForward(OpBuilder &b, const Forward &f, Value q, Value k,
                          Value v, ValueRange sinks, ValueRange captures) {
  Location loc = f.op.getLoc();
  SmallVector<Type> lseTypes;
  if (f.normalizer == Normalizer::softmax)
    lseTypes.push_back(lseType(f.op, f.branch));
  auto forward = AttentionOp::create(
      b, loc, branchOutputType(f.op, f.branch), lseTypes, /*key_side=*/Type(),
      /*terms=*/TypeRange{}, q, k, v, sinks, captures,
      b.getDenseF64ArrayAttr({f.scale}), f.op.getNormalizerAttr(),
      /*mean_empty_rows=*/UnitAttr(), /*value_columns=*/DenseI64ArrayAttr(),
      /*key_side_branch=*/IntegerAttr(), /*term_dims=*/ArrayAttr());
  // A fresh mapping per clone: a mapped block argument is dropped from the
  // clone (Region::cloneInto), and the region is isolated from above.
  IRMapping fresh;
  f.op.getMask().cloneInto(&forward.getMask(), fresh);
  if (!f.op.getScore().empty()) {
    OpBuilder::InsertionGuard guard(b);
    Block *block =
        newBlock(b, forward.getScore(), regionTypes(b, 1, captures), loc);
    Block &src = f.op.getScore().front();
    IRMapping map;
    mapScoreArgs(b, loc, f, src, block->getArgument(0),
                 block->getArguments().slice(1, 4),
                 block->getArguments().drop_front(5), map);
    for (Operation &op : src.without_terminator())
      b.clone(op, map);
    YieldOp::create(
        b, loc, map.lookupOrDefault(src.getTerminator()->getOperand(f.branch)));
  }
  return forward;
}

/// The elementwise sum of `xs` (f32 accumulation), in their type.
Value sum(OpBuilder &b, Location loc, ValueRange xs) {
  if (xs.size() == 1)
    return xs.front();
  auto type = cast<RankedTensorType>(xs.front().getType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<AffineMap> maps(xs.size() + 1, id);
  return linalg::GenericOp::create(
             b, loc, type, xs,
             tensor::EmptyOp::create(b, loc, type.getShape(),
                                     type.getElementType())
                 .getResult(),
             maps,
             SmallVector<utils::IteratorType>(type.getRank(),
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location l, ValueRange args) {
               Value total;
               for (Value x : args.drop_back()) {
                 x = widen(nb, l, x);
                 total =
                     total ? arith::AddFOp::create(nb, l, total, x).getResult()
                           : x;
               }
               if (total.getType() != type.getElementType())
                 total = arith::TruncFOp::create(nb, l, type.getElementType(),
                                                 total);
               linalg::YieldOp::create(nb, l, ValueRange{total});
             })
      .getResult(0);
}

/// One branch's dQ, dK, dV (and its sink's gradient) from its dO, own
/// output and row statistics.
struct BranchGradient {
  Value dq, dk, dv, dsink;
  /// The terms of `termReads` (branchGradient's; f32, termCount of them
  /// per read, in order).
  SmallVector<Value> terms;
};

FailureOr<BranchGradient>
branchGradient(OpBuilder &b, const Forward &f, Value q, Value k, Value v,
               Value sink, Value dout, ArrayRef<Value> rowStats,
               ValueRange captures, bool fuseKeyValue, bool fuseQuery,
               ArrayRef<tensor::ExtractOp> termReads) {
  Location loc = f.op.getLoc();
  auto elementOf = [](Value x) {
    return cast<RankedTensorType>(x.getType()).getElementType();
  };
  BranchGradient g;
  // (Q's and dO's element types and head dims are their rows'.)
  bool fused = fuseKeyValue && fusesKeyValue(k, v, q, dout);
  // dQ: from Q (and dO) to K (and V), K the value; or (fuseQuery) the
  // key-side product of the one attention computing dK and dV.
  if (!fused || !fuseQuery) {
    SmallVector<Value> dqCaptures(captures);
    llvm::append_range(dqCaptures, rowStats);
    FailureOr<Value> dq =
        gradientAttention(b, f, {q, dout}, {k, v}, k, dqCaptures, elementOf(q),
                          /*transposed=*/false, Weights::ScoreGradient, {},
                          nullptr, termReads, &g.terms);
    if (failed(dq))
      return failure(); // Said once: dK and dV clone the same region.
    g.dq = *dq;
  }
  // dK, dV: from K (and V) to the queries of its group, in one attention
  // where they can share it. With GQA, the g query heads of a KV head side
  // by side along its rows (`groupRows`); but where the mask reads
  // positions, whose kept tiles a bound describes, those rows would turn
  // the bound into a block mask (the query row is the column mod M): there,
  // from per-head-key-value-from (f.perHeadKeyValue), K and V are repeated
  // per query head instead (`fk`: no groups), and each query head's dK and
  // dV summed over its group afterwards, as
  // FlashAttention-2's GQA backward does.
  bool perHead = f.perHeadKeyValue;
  Forward fk = f;
  if (perHead)
    fk.group = 1;
  Value keysK = perHead ? repeatHeads(b, loc, f, k) : k;
  Value keysV = perHead ? repeatHeads(b, loc, f, v) : v;
  SmallVector<Value> kvCaptures(captures);
  for (Value s : rowStats)
    kvCaptures.push_back(groupRows(b, loc, fk, s));
  Value rowsQ = groupRows(b, loc, fk, q),
        rowsDout = groupRows(b, loc, fk, dout);
  if (fused) {
    Value keySide;
    auto sumOverGroups = [&](Value x) { return sumGroups(b, loc, f, x); };
    FailureOr<std::pair<Value, Value>> kv = keyValueGradients(
        b, fk, keysK, keysV, rowsQ, rowsDout, kvCaptures,
        fuseQuery ? &keySide : nullptr,
        perHead ? function_ref<Value(Value)>(sumOverGroups) : nullptr);
    if (failed(kv))
      return failure();
    std::tie(g.dk, g.dv) = *kv;
    if (fuseQuery)
      g.dq = ungroupRows(b, loc, fk, keySide, elementOf(q));
  } else {
    FailureOr<Value> dk = gradientAttention(
        b, fk, {keysK, keysV}, {rowsQ, rowsDout}, rowsQ, kvCaptures,
        elementOf(k), /*transposed=*/true, Weights::ScoreGradient);
    SmallVector<Value> dvCaptures(captures);
    if (!rowStats.empty())
      dvCaptures.push_back(kvCaptures[captures.size()]);
    FailureOr<Value> dv = gradientAttention(
        b, fk, {keysK}, {rowsQ}, rowsDout, dvCaptures, elementOf(v),
        /*transposed=*/true, Weights::Probabilities);
    if (failed(dk) || failed(dv))
      return failure();
    g.dk = *dk, g.dv = *dv;
    if (perHead) {
      g.dk = sumGroups(b, loc, f, g.dk);
      g.dv = sumGroups(b, loc, f, g.dv);
    }
  }
  if (sink)
    g.dsink = sinkGradient(b, loc, sink, rowStats[0], rowStats[1]);
  return g;
}

/// Each branch's own output (through whose epilogue derivative dO reaches
/// it; Delta) and, for softmax, its log-sum-exp: `statistics` (the
/// function's arguments after dO) when `saved`, else the branch's forward
/// again (`recompute`).
void branchStatistics(AttentionOp op, bool saved, ValueRange statistics,
                      function_ref<AttentionOp(unsigned)> recompute,
                      SmallVectorImpl<Value> &outs,
                      SmallVectorImpl<Value> &lses) {
  bool softmax = op.getNormalizer() == Normalizer::softmax;
  if (!softmax && op.getEpilogue().empty())
    return;
  for (unsigned r = 0; r < op.getNumBranches(); ++r) {
    if (saved) {
      outs.push_back(statistics.front());
      statistics = statistics.drop_front();
      if (softmax) {
        lses.push_back(statistics.front());
        statistics = statistics.drop_front();
      }
      continue;
    }
    AttentionOp forward = recompute(r);
    outs.push_back(forward.getOutput());
    if (softmax)
      lses.push_back(forward.getLse()[0]);
  }
}

/// Whether `region` (of `op`, whose captures come last in its arguments)
/// reads capture `c`.
bool readsCapture(Region &region, unsigned c, unsigned numCaptures) {
  if (region.empty())
    return false;
  Block &block = region.front();
  return !block.getArgument(block.getNumArguments() - numCaptures + c)
              .use_empty();
}

/// What the gradients of the captures are built from: the forward's
/// operands in the gradient function, each branch's output, log-sum-exp
/// (softmax) and dO on its way back, and each branch's facts.
struct GradientParts {
  AttentionOp op;
  ArrayRef<Value> queries, keys;
  Value v;
  ArrayRef<Value> captures, outs, lses;
  Value dout;
  ArrayRef<Value> branchDouts;
  function_ref<Forward(unsigned)> forwardOf;
  /// Each branch's gradients, and the captures whose gradients are their
  /// terms (in the terms' order).
  ArrayRef<BranchGradient> grads;
  ArrayRef<unsigned> termCaptures;
  ArrayRef<tensor::ExtractOp> termReads;
};

/// Where the score alone reads capture `c` once, differentiably, at
/// indices whose gradient terms of the attention computing dS can give
/// (`termFormOf`): that read; else null.
tensor::ExtractOp scoreTermRead(AttentionOp op, unsigned c) {
  unsigned branches = op.getNumBranches(),
           numCaptures = op.getCaptures().size();
  if (!readsCapture(op.getScore(), c, numCaptures) ||
      readsCapture(op.getEpilogue(), c, numCaptures))
    return nullptr;
  Block &score = op.getScore().front();
  tensor::ExtractOp read = singleRead(score.getArgument(branches + 4 + c));
  if (!read || !differentiableFrom(score, read.getResult()) ||
      termFormOf(read, branches) == TermForm::None)
    return nullptr;
  return read;
}

/// A row read's gradient (TermForm::Rows) from each branch's terms
/// `first`, .. (termCount of them, [B, Hq, M]): per row, sum_j P dP g -
/// (sum_j P dP) (sum_j P g) for softmax, else sum_j dT g; summed over the
/// branches and the rows' dims the read does not take (f32).
Value rowTermsGradient(OpBuilder &b, Location loc,
                       ArrayRef<BranchGradient> grads, unsigned first,
                       const ReadDims &dims, Normalizer normalizer) {
  unsigned count = normalizer == Normalizer::softmax ? 3 : 1;
  SmallVector<Value> ins;
  for (const BranchGradient &g : grads)
    llvm::append_range(ins, ArrayRef<Value>(g.terms).slice(first, count));
  return sumInto(
      b, loc, dims, ins,
      SmallVector<AffineMap>(ins.size(), b.getMultiDimIdentityMap(3)),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value total;
        for (unsigned r = 0; r < grads.size(); ++r) {
          ValueRange t = args.slice(r * count, count);
          Value x = t[0];
          if (count == 3)
            x = arith::SubFOp::create(nb, l, x,
                                      arith::MulFOp::create(nb, l, t[2], t[1]));
          total =
              total ? arith::AddFOp::create(nb, l, total, x).getResult() : x;
        }
        return total;
      });
}

/// The gradient of capture `c`, or null where none is derived: a capture
/// the epilogue alone reads at its own indices (a gate, lambda) and, with
/// `scoreCaptures`, one the score alone reads once (each branch's term,
/// summed).
FailureOr<Value> captureGradient(OpBuilder &b, const GradientParts &p,
                                 unsigned c, bool scoreCaptures) {
  AttentionOp op = p.op;
  Location loc = op.getLoc();
  unsigned branches = op.getNumBranches(), numCaptures = p.captures.size();
  bool inScore = readsCapture(op.getScore(), c, numCaptures),
       inMask = readsCapture(op.getMask(), c, numCaptures),
       inEpilogue = readsCapture(op.getEpilogue(), c, numCaptures);
  if (inEpilogue && !inScore && !inMask) {
    Block &block = op.getEpilogue().front();
    tensor::ExtractOp read =
        ownIndicesRead(block, block.getArgument(branches + 4 + c), branches);
    if (!read)
      return Value();
    return epilogueCaptureGradient(b, loc, op, read, p.outs, p.dout,
                                   p.captures);
  }
  if (!inScore || inEpilogue || !scoreCaptures)
    return Value();
  Block &score = op.getScore().front();
  // A term of each branch's dQ attention.
  if (const unsigned *t = llvm::find(p.termCaptures, c);
      t != p.termCaptures.end()) {
    unsigned k = t - p.termCaptures.begin(), first = 0;
    Normalizer normalizer = op.getNormalizer();
    for (tensor::ExtractOp before : p.termReads.take_front(k))
      first += termCount(before, branches, normalizer);
    tensor::ExtractOp read = p.termReads[k];
    ReadDims dims = readDims(read, branches);
    auto type = cast<RankedTensorType>(read.getTensor().getType());
    if (termFormOf(read, branches) == TermForm::Rows)
      return inCaptureType(
          b, loc, rowTermsGradient(b, loc, p.grads, first, dims, normalizer),
          type, dims);
    SmallVector<Value> terms = llvm::to_vector(llvm::map_range(
        p.grads, [&](const BranchGradient &g) { return g.terms[first]; }));
    // Summed over the branches and the dims the read does not take (a
    // bias broadcast over the batch), in the read's dim order.
    bool whole =
        terms.size() == 1 && dims.exprs.size() == 4 &&
        llvm::all_of(llvm::enumerate(dims.exprs), [](auto e) {
          return cast<AffineDimExpr>(e.value()).getPosition() == e.index();
        });
    if (whole)
      return inCaptureType(b, loc, terms.front(), type, dims);
    if (Value summed = sumTermsElementwise(b, loc, terms, dims, type))
      return summed;
    Value grad = sumInto(
        b, loc, dims, terms,
        SmallVector<AffineMap>(terms.size(), b.getMultiDimIdentityMap(4)),
        [&](OpBuilder &nb, Location l, ValueRange args) {
          Value total = args.front();
          for (Value x : args.drop_front())
            total = arith::AddFOp::create(nb, l, total, x);
          return total;
        });
    return inCaptureType(b, loc, grad, type, dims);
  }
  tensor::ExtractOp read = singleRead(score.getArgument(branches + 4 + c));
  if (!read || !differentiableFrom(score, read.getResult()))
    return Value();
  SmallVector<Value> terms;
  for (unsigned r = 0; r < branches; ++r) {
    FailureOr<Value> term = scoreCaptureTerm(
        b, p.forwardOf(r), read, p.queries[r], p.keys[r], p.v, p.branchDouts[r],
        p.lses.empty() ? Value() : p.lses[r], p.captures);
    if (failed(term))
      return failure();
    terms.push_back(*term);
  }
  return inCaptureType(b, loc, sum(b, loc, terms),
                       cast<RankedTensorType>(read.getTensor().getType()),
                       readDims(read, branches));
}

/// Builds `@gradient(queries..., keys..., v, sinks..., captures..., dout
/// [, (output, lse) per branch with `saved`]) -> (dqueries..., dkeys...,
/// dv, dsinks...)` for `op`; `fuseKeyValue`: dK and dV in one attention
/// where they can share it.
LogicalResult buildGradient(ModuleOp module, AttentionOp op, bool saved,
                            bool scoreCaptures, bool captureTerms,
                            bool fuseKeyValue, bool fuseQuery,
                            bool perHeadKeyValue) {
  if (failed(checkDifferentiable(op)))
    return failure();
  Location loc = op.getLoc();
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToEnd(module.getBody());
  unsigned branches = op.getNumBranches();
  bool softmax = op.getNormalizer() == Normalizer::softmax;
  bool epilogue = !op.getEpilogue().empty();
  SmallVector<Type> argTypes(op->getOperandTypes());
  argTypes.push_back(op.getOutput().getType());
  // Saved statistics: each branch's own output where dO's way back needs
  // it (Delta, the epilogue's derivative), and its log-sum-exp.
  if (saved)
    for (unsigned r = 0; r < branches; ++r) {
      if (softmax || epilogue)
        argTypes.push_back(branchOutputType(op, r));
      if (softmax)
        argTypes.push_back(lseType(op, r));
    }
  SmallVector<Type> results(op.getQueries().getTypes());
  llvm::append_range(results, op.getKeys().getTypes());
  results.push_back(op.getValue().getType());
  llvm::append_range(results, op.getSinks().getTypes());
  auto func = func::FuncOp::create(b, loc, "gradient",
                                   b.getFunctionType(argTypes, results));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  // The function's arguments in the forward's operand order, then dO.
  IRMapping args;
  for (auto [operand, arg] : llvm::zip(op->getOperands(), body->getArguments()))
    args.map(operand, arg);
  auto mapped = [&](ValueRange values) {
    return llvm::to_vector(
        llvm::map_range(values, [&](Value x) { return args.lookup(x); }));
  };
  SmallVector<Value> queries = mapped(op.getQueries()),
                     keys = mapped(op.getKeys()), sinks = mapped(op.getSinks()),
                     captures = mapped(op.getCaptures());
  Value v = args.lookup(op.getValue());
  Value dout = body->getArgument(op->getNumOperands());
  auto forwardOf = [&](unsigned r) {
    Forward f;
    f.op = op;
    f.normalizer = op.getNormalizer();
    f.scale = op.getScale()[r];
    f.branch = r, f.branches = branches;
    auto qType = cast<RankedTensorType>(queries[r].getType());
    f.m = qType.getDimSize(2);
    f.group = qType.getDimSize(1) /
              cast<RankedTensorType>(keys[r].getType()).getDimSize(1);
    f.perHeadKeyValue = perHeadKeyValue && f.group > 1;
    return f;
  };

  SmallVector<Value> outs, lses;
  branchStatistics(
      op, saved, body->getArguments().drop_front(op->getNumOperands() + 1),
      [&](unsigned r) {
        return branchForward(
            b, forwardOf(r), queries[r], keys[r], v,
            sinks.empty() ? ValueRange() : ValueRange(sinks[r]), captures);
      },
      outs, lses);
  // Captures the score alone reads once at indices terms can give
  // (termFormOf): their gradients come out of each branch's dQ attention.
  SmallVector<unsigned> termCaptures;
  SmallVector<tensor::ExtractOp> termReads;
  for (unsigned c = 0;
       c < captures.size() && scoreCaptures && captureTerms && !fuseQuery; ++c)
    if (tensor::ExtractOp read = scoreTermRead(op, c)) {
      termCaptures.push_back(c);
      termReads.push_back(read);
    }
  SmallVector<BranchGradient> grads;
  SmallVector<Value> branchDouts;
  for (unsigned r = 0; r < branches; ++r) {
    Value branchDout = dout;
    if (epilogue) {
      FailureOr<Value> through =
          throughEpilogue(b, loc, op, outs, dout, captures, r);
      if (failed(through))
        return failure();
      branchDout = *through;
    }
    SmallVector<Value> rowStats;
    if (softmax)
      rowStats = {lses[r], rowDot(b, loc, branchDout, outs[r])};
    FailureOr<BranchGradient> g =
        branchGradient(b, forwardOf(r), queries[r], keys[r], v,
                       sinks.empty() ? Value() : sinks[r], branchDout, rowStats,
                       captures, fuseKeyValue, fuseQuery, termReads);
    if (failed(g))
      return failure();
    grads.push_back(*g);
    branchDouts.push_back(branchDout);
  }
  // Results in operand order: queries, keys, V, sinks, then the captures
  // the epilogue alone reads (gates, differential attention's lambda) and,
  // with `scoreCaptures`, those the score alone reads at its own indices.
  SmallVector<Value> returned;
  SmallVector<int64_t> gradientOf;
  unsigned operand = 0;
  auto give = [&](Value grad) {
    if (grad) {
      returned.push_back(grad);
      gradientOf.push_back(operand);
    }
    ++operand;
  };
  for (const BranchGradient &g : grads)
    give(g.dq);
  for (const BranchGradient &g : grads)
    give(g.dk);
  give(sum(b, loc, llvm::to_vector(llvm::map_range(grads, [](auto &g) {
             return g.dv;
           }))));
  if (!sinks.empty())
    for (const BranchGradient &g : grads)
      give(g.dsink);
  GradientParts parts{op,    queries,      keys,     v,           captures,
                      outs,  lses,         dout,     branchDouts, forwardOf,
                      grads, termCaptures, termReads};
  for (unsigned c = 0; c < captures.size(); ++c) {
    FailureOr<Value> grad = captureGradient(b, parts, c, scoreCaptures);
    if (failed(grad))
      return failure();
    give(*grad);
  }
  SmallVector<Type> resultTypes(ValueRange(returned).getTypes());
  func.setType(b.getFunctionType(argTypes, resultTypes));
  func->setAttr("attn.gradient_of", b.getDenseI64ArrayAttr(gradientOf));
  func::ReturnOp::create(b, loc, returned);
  return success();
}

struct AttnGradientPass
    : flashlight::attn::impl::AttnGradientBase<AttnGradientPass> {
  using AttnGradientBase::AttnGradientBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    AttentionOp sole = getSoleAttention(module, getArgument());
    if (!sole)
      return signalPassFailure();
    SmallVector<Operation *> old(module.getBody()->getOperations().size());
    llvm::transform(module.getBody()->getOperations(), old.begin(),
                    [](Operation &op) { return &op; });
    // dK and dV in one attention where it pays: its loop computes S and P
    // once for both, but carries accumulators 2 Dqk wide and needs [Q | dO]
    // copied in. Same-run A/B (H200, decision 024): 1.07-1.19x from N = 2048
    // at D = 64 and vanilla D = 128; causal D = 128 at 2048, 0.88-0.90x while
    // the two gradients were copied out of its output, is 1.16x since they
    // are views of it.
    auto length = [](Value x, int64_t dim) {
      return cast<RankedTensorType>(x.getType()).getDimSize(dim);
    };
    int64_t shortest =
        std::min(length(sole.getQueries()[0], 2), length(sole.getKeys()[0], 2));
    bool fuse = fuseKeyValue && !ShapedType::isDynamic(shortest) &&
                shortest >= fuseKeyValueFrom;
    // GQA's dK and dV per query head where the mask reads positions and
    // the lengths make the grouped rows' block mask cost more than
    // repeating K and V and summing the gradients over the groups
    // (alternating processes, H200, decision 024: causal GQA 4:1 1.23-1.29x
    // at 8k, 1.07-1.12x at 4k, 0.89-0.96x at 2k).
    bool perHead = masksPositions(sole) && !ShapedType::isDynamic(shortest) &&
                   shortest >= perHeadKeyValueFrom;
    if (failed(buildGradient(module, sole, savedStatistics, scoreCaptures,
                             captureTerms, fuse, fuseQuery, perHead)))
      return signalPassFailure();
    // The module is the gradient program alone.
    for (Operation *op : old)
      op->erase();
  }
};

} // namespace
