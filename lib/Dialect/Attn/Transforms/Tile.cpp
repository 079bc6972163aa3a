//===- Tile.cpp - Tile the online form of attention -----------------------===//
//
// Query tiles become a parallel loop, KV tiles a sequential loop carrying the
// online state. The mask analysis bounds the KV loop and tells which tiles
// are entirely kept, so the mask is evaluated on partial tiles only.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNTILE
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Builds index arithmetic with less noise.
struct IndexMath {
  OpBuilder &b;
  Location loc;
  Value c(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubIOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivUIOp::create(b, loc, x, y); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value ceilDiv(Value x, Value y) {
    return arith::CeilDivUIOp::create(b, loc, x, y);
  }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value orI(Value x, Value y) { return arith::OrIOp::create(b, loc, x, y); }
  Value dim(Value tensor, int64_t d) {
    return tensor::DimOp::create(b, loc, tensor, d);
  }
};

/// True if `v` is a constant index 0.
bool isZero(Value v) { return matchPattern(v, m_Zero()); }

/// True if `v` is `linalg.fill` of the constant `expected`.
bool isFilledWith(Value v, double expected) {
  auto fill = v.getDefiningOp<linalg::FillOp>();
  FloatAttr value;
  return fill && matchPattern(fill.value(), m_Constant(&value)) &&
         value.getValueAsDouble() == expected;
}

/// A tensor of `type`'s element type, shaped [1, 1, rows(, cols)], filled.
Value tileState(OpBuilder &b, Location loc, RankedTensorType type, Value rows,
                double value) {
  SmallVector<int64_t> shape = {1, 1, ShapedType::kDynamic};
  if (type.getRank() == 4)
    shape.push_back(type.getDimSize(3));
  SmallVector<Value> dyn = {rows};
  if (type.getRank() == 4 && type.isDynamicDim(3))
    return nullptr; // Dv is static after online-softmax on static inputs.
  Value empty = tensor::EmptyOp::create(b, loc, shape, b.getF32Type(), dyn);
  Value scalar = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
  return linalg::FillOp::create(b, loc, scalar, empty).getResult(0);
}

/// A query tile's key-side contribution at first: zeros, [1, 1, N, D] for
/// the whole key side `keySide` [B, Hkv, N, D] (`keys`: N); null where D is
/// dynamic.
Value keySideTileState(OpBuilder &b, Location loc, Value keySide, Value keys) {
  auto type = cast<RankedTensorType>(keySide.getType());
  if (type.isDynamicDim(3))
    return nullptr;
  SmallVector<Value> dyn;
  if (type.isDynamicDim(2))
    dyn.push_back(keys);
  Value empty = tensor::EmptyOp::create(
      b, loc, {1, 1, type.getDimSize(2), type.getDimSize(3)}, b.getF32Type(),
      dyn);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

/// `tensor.extract_slice %t[b, h, start, 0] [1, 1, len, D]`.
Value sliceRows(OpBuilder &b, Location loc, Value t, Value batch, Value head,
                Value start, Value len) {
  auto type = cast<RankedTensorType>(t.getType());
  SmallVector<OpFoldResult> offsets = {batch, head, start, b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1), len,
                                     b.getIndexAttr(type.getDimSize(3))};
  SmallVector<OpFoldResult> strides(4, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, t, offsets, sizes, strides);
}

/// KV range `[lo, hi)` that can hold kept keys for query rows `[q0, q1]`,
/// and whether a KV tile `[k0, k0 + kn)` is kept entirely, from the mask.
struct KVBounds {
  const MaskInfo &mask;
  bool hasMask;

  std::pair<Value, Value> range(IndexMath &m, Value q0, Value q1, Value n) {
    Value lo = m.c(0), hi = n;
    if (!hasMask)
      return {lo, hi};
    const DiagonalBand &band = mask.band;
    bool keyPrefix = mask.kind == MaskKind::Prefix && !mask.prefixOnQueries;
    // q - kv <= band.hi  =>  kv >= q0 - band.hi.
    if (band.hi && !keyPrefix)
      lo = m.max(lo, m.sub(q0, m.c(*band.hi)));
    // q - kv >= band.lo  =>  kv <= q1 - band.lo.
    if (band.lo) {
      Value bandEnd = m.add(m.sub(q1, m.c(*band.lo)), m.c(1));
      if (keyPrefix)
        bandEnd = m.max(bandEnd, m.c(mask.prefixLength));
      hi = m.min(hi, bandEnd);
    }
    // A tile holding a row of a query prefix keeps every key.
    if (mask.kind == MaskKind::Prefix && mask.prefixOnQueries) {
      Value inPrefix =
          m.cmp(arith::CmpIPredicate::slt, q0, m.c(mask.prefixLength));
      lo = m.select(inPrefix, m.c(0), lo);
      hi = m.select(inPrefix, n, hi);
    }
    return {lo, hi};
  }

  /// Null when no tile can be proven full (the mask is always evaluated).
  Value full(IndexMath &m, Value q0, Value q1, Value k0, Value kn) {
    if (!hasMask)
      return arith::ConstantIntOp::create(m.b, m.loc, 1, 1);
    bool banded =
        mask.kind == MaskKind::Causal || mask.kind == MaskKind::ReverseCausal ||
        mask.kind == MaskKind::SlidingWindow || mask.kind == MaskKind::Prefix;
    if (!banded)
      return nullptr;
    using P = arith::CmpIPredicate;
    Value kLast = m.sub(m.add(k0, kn), m.c(1));
    Value inBand = arith::ConstantIntOp::create(m.b, m.loc, 1, 1);
    // Every row keeps every key: q1 - k0 <= hi and q0 - kLast >= lo.
    if (mask.band.hi)
      inBand = m.andI(inBand, m.cmp(P::sle, m.sub(q1, k0), m.c(*mask.band.hi)));
    if (mask.band.lo)
      inBand =
          m.andI(inBand, m.cmp(P::sge, m.sub(q0, kLast), m.c(*mask.band.lo)));
    if (mask.kind == MaskKind::Prefix)
      inBand = m.orI(inBand, m.cmp(P::slt, mask.prefixOnQueries ? q1 : kLast,
                                   m.c(mask.prefixLength)));
    return inBand;
  }
};

/// The step feeding `fin` in the whole-tensor form attn-online-softmax
/// produces (offsets 0, the initial state), or an error at `fin`.
FailureOr<OnlineStepOp> wholeTensorStep(OnlineFinalizeOp fin) {
  ValueRange state = fin->getOperands().take_front(fin.getMaxState().size() +
                                                   fin.getSumState().size() +
                                                   fin.getAccState().size());
  auto step = state.front().getDefiningOp<OnlineStepOp>();
  if (!step || step.getStateResults() != state ||
      !isZero(step.getBatchOffset()) || !isZero(step.getHeadOffset()) ||
      !isZero(step.getQueryOffset()) || !isZero(step.getKeyOffset()) ||
      !isZero(fin.getBatchOffset()) || !isZero(fin.getHeadOffset()) ||
      !isZero(fin.getQueryOffset()))
    return fin.emitError("attn-tile expects an online_step over whole tensors "
                         "feeding this online_finalize");
  for (Value v : step.getMaxState())
    if (!isFilledWith(v, -std::numeric_limits<double>::infinity()))
      return fin.emitError("attn-tile expects the initial running max");
  for (Value v : llvm::concat<Value>(step.getSumState(), step.getAccState()))
    if (!isFilledWith(v, 0.0))
      return fin.emitError("attn-tile expects a zero initial state");
  if (Value keySide = step.getKeySide(); keySide && !isFilledWith(keySide, 0.0))
    return fin.emitError("attn-tile expects a zero initial key_side");
  for (Value term : step.getTermState())
    if (!isFilledWith(term, 0.0))
      return fin.emitError("attn-tile expects zero initial terms");
  return step;
}

/// After `loop`: the tile's finalize of its final state, inserted into the
/// forall's outputs at (bIdx, hIdx, q0) for `rows` rows; with a key-side
/// product (the loop's result after the state), added to the forall's
/// output after the finalize's at (bIdx, hKV); the `terms` (the loop's last
/// results) added to the forall's last outputs whole.
void finalizeTile(IRRewriter &b, Location loc, OnlineFinalizeOp fin,
                  scf::ForallOp forall, scf::ForOp loop, unsigned stats,
                  bool keySide, unsigned terms, Value bIdx, Value hIdx,
                  Value hKV, Value q0, Value rows) {
  unsigned nb = fin.getAccState().size();
  b.setInsertionPointAfter(loop);
  SmallVector<Type> tileTypes;
  for (Value result : fin.getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<int64_t> shape = {1, 1, ShapedType::kDynamic};
    if (type.getRank() == 4)
      shape.push_back(type.getDimSize(3));
    tileTypes.push_back(RankedTensorType::get(shape, type.getElementType()));
  }
  ValueRange last = loop.getResults();
  auto tileFin = OnlineFinalizeOp::create(
      b, loc, tileTypes, last.take_front(stats), last.slice(stats, stats),
      last.slice(2 * stats, nb), fin.getSinks(), bIdx, hIdx, q0,
      fin.getCaptures(), fin.getNormalizerAttr());
  IRMapping mapping;
  fin.getEpilogue().cloneInto(&tileFin.getEpilogue(), mapping);

  b.setInsertionPointToStart(forall.getTerminator().getBody());
  for (auto [tileResult, dest] :
       llvm::zip(tileFin.getResults(), forall.getRegionIterArgs())) {
    auto type = cast<RankedTensorType>(tileResult.getType());
    SmallVector<OpFoldResult> offsets = {bIdx, hIdx, q0};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(1),
                                       rows};
    if (type.getRank() == 4) {
      offsets.push_back(b.getIndexAttr(0));
      sizes.push_back(b.getIndexAttr(type.getDimSize(3)));
    }
    SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
    tensor::ParallelInsertSliceOp::create(b, loc, tileResult, dest, offsets,
                                          sizes, strides);
  }
  ValueRange shared =
      forall.getRegionIterArgs().drop_front(fin->getNumResults());
  ValueRange added = last.drop_front(2 * stats + nb);
  if (keySide)
    ParallelAccumulateOp::create(b, loc, added.front(), shared.front(),
                                 ValueRange{bIdx, hKV});
  for (unsigned e = 0; e < terms; ++e)
    ParallelAccumulateOp::create(b, loc, added[keySide + e],
                                 shared[keySide + e], ValueRange{});
}

/// The forall's shared outputs: the full output and LSE tensors (empty),
/// then the key side's initial zeros where there is one and the terms'
/// (every query tile adds to them).
SmallVector<Value> destinations(IndexMath &m, OnlineFinalizeOp fin, Value q,
                                Value v, Value keySide, ValueRange terms) {
  SmallVector<Value> outs;
  for (Value result : fin.getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<Value> dyn;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.isDynamicDim(d))
        dyn.push_back(m.dim(d < 3 ? q : v, d));
    outs.push_back(tensor::EmptyOp::create(m.b, m.loc, type.getShape(),
                                           type.getElementType(), dyn));
  }
  if (keySide)
    outs.push_back(keySide);
  llvm::append_range(outs, terms);
  return outs;
}

/// The KV loop's initial state for a tile of `rows` query rows: each
/// branch's row max (-inf), row sum and accumulator (zeros), the tile's own
/// key-side contribution (every key of its KV head: its steps add their
/// key blocks' rows) and the terms (the whole terms, to which its steps
/// add). Errors on `fin` where a head dim is not static.
LogicalResult initialTileState(OpBuilder &b, Location loc, OnlineFinalizeOp fin,
                               OnlineStepOp step, Value rows, Value keys,
                               SmallVectorImpl<Value> &init) {
  auto initFor = [&](ValueRange states, double value) -> LogicalResult {
    for (Value s : states) {
      Value t =
          tileState(b, loc, cast<RankedTensorType>(s.getType()), rows, value);
      if (!t)
        return failure();
      init.push_back(t);
    }
    return success();
  };
  if (failed(initFor(step.getMaxState(),
                     -std::numeric_limits<double>::infinity())) ||
      failed(initFor(step.getSumState(), 0.0)) ||
      failed(initFor(step.getAccState(), 0.0)))
    return fin.emitError("attn-tile needs a static value head dim");
  if (Value keySide = step.getKeySide()) {
    Value part = keySideTileState(b, loc, keySide, keys);
    if (!part)
      return fin.emitError("attn-tile needs a static key_side head dim");
    init.push_back(part);
  }
  llvm::append_range(init, step.getTermState());
  return success();
}

/// Tiles `fin` and its step as `plan` says; the loop nest carries the plan.
LogicalResult tile(OnlineFinalizeOp fin, KernelPlanAttr plan) {
  int64_t blockM = plan.getBlockM(), blockN = plan.getBlockN();
  FailureOr<OnlineStepOp> matched = wholeTensorStep(fin);
  if (failed(matched))
    return failure();
  OnlineStepOp step = *matched;

  MaskScoreAnalysis analysis(step);
  KVBounds bounds{analysis.getMask(), !step.getMask().empty()};
  unsigned nb = step.getNumBranches();
  bool softmax = step.getNormalizer() == Normalizer::softmax;

  IRRewriter b(fin);
  Location loc = fin.getLoc();
  IndexMath m{b, loc};
  Value q = step.getQueries()[0], k = step.getKeys()[0], v = step.getValue();
  Value batch = m.dim(q, 0), heads = m.dim(q, 1), rowsTotal = m.dim(q, 2);
  Value kvHeads = m.dim(k, 1), keys = m.dim(k, 2);
  Value group = m.div(heads, kvHeads);
  Value bm = m.c(blockM), bn = m.c(blockN);
  Value numTiles = m.ceilDiv(rowsTotal, bm);

  Value keySide = step.getKeySide();
  ValueRange terms = step.getTermState();
  SmallVector<Value> outs = destinations(m, fin, q, v, keySide, terms);

  // (b, h, query tile) map to GPU blocks (z, y, x).
  MLIRContext *ctx = b.getContext();
  ArrayAttr blockMapping = b.getArrayAttr(
      {gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimZ),
       gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimY),
       gpu::GPUBlockMappingAttr::get(ctx, gpu::MappingId::DimX)});
  auto forall = scf::ForallOp::create(
      b, loc, SmallVector<OpFoldResult>{batch, heads, numTiles}, outs,
      blockMapping);
  forall->setAttr(kKernelPlanAttrName, plan);
  Block *body = forall.getBody();
  b.setInsertionPointToStart(body);
  Value bIdx = body->getArgument(0), hIdx = body->getArgument(1);
  Value q0 = m.mul(body->getArgument(2), bm);
  // Lengths that are multiples of the tiles (static ones, or runtime ones
  // the plan says are aligned): every tile whole, its extent the constant
  // block size. (Every KV loop starts at a multiple of block-n and ends at
  // most at the key length, so no key tile is partial either: without the
  // constant, a loop whose start depends on the query tile -- a masked
  // gradient's -- kept testing every column against the length.)
  bool aligned = plan.getAlignedLengths();
  auto whole = [&](Value t, int64_t tile) {
    int64_t n = cast<RankedTensorType>(t.getType()).getDimSize(2);
    return ShapedType::isDynamic(n) ? aligned : n % tile == 0;
  };
  bool alignedRows = whole(q, blockM);
  bool alignedKeys = whole(k, blockN);
  Value rows = alignedRows ? bm : m.min(bm, m.sub(rowsTotal, q0));
  Value q1 = m.sub(m.add(q0, rows), m.c(1));
  Value hKV = m.div(hIdx, group);

  SmallVector<Value> qTiles;
  for (Value query : step.getQueries())
    qTiles.push_back(sliceRows(b, loc, query, bIdx, hIdx, q0, rows));

  SmallVector<Value> init;
  if (failed(initialTileState(b, loc, fin, step, rows, keys, init)))
    return failure();

  // The KV loop over tiles aligned to block-n, within the mask's bounds.
  auto [kvLo, kvHi] = bounds.range(m, q0, q1, keys);
  Value start = m.mul(m.div(kvLo, bn), bn);
  auto loop = scf::ForOp::create(b, loc, start, kvHi, bn, init);
  b.setInsertionPointToStart(loop.getBody());
  Value k0 = loop.getInductionVar();
  Value kn = alignedKeys ? bn : m.min(bn, m.sub(keys, k0));
  SmallVector<Value> kTiles;
  for (Value key : step.getKeys())
    kTiles.push_back(sliceRows(b, loc, key, bIdx, hKV, k0, kn));
  Value vTile = sliceRows(b, loc, v, bIdx, hKV, k0, kn);
  ValueRange carried = loop.getRegionIterArgs();
  unsigned stats = softmax ? nb : 0;

  // One step on this tile; `withMask` decides whether the mask is evaluated.
  auto emitStep = [&](OpBuilder &builder, Location l, bool withMask) {
    auto tiled = OnlineStepOp::create(
        builder, l, qTiles, kTiles, vTile, carried.take_front(stats),
        carried.slice(stats, stats), carried.slice(2 * stats, nb),
        keySide ? carried[2 * stats + nb] : Value(),
        carried.take_back(terms.size()), bIdx, hIdx, q0, k0, step.getCaptures(),
        step.getScaleAttr(), step.getNormalizerAttr(),
        /*whole_keys=*/UnitAttr(), step.getKeySideBranchAttr(),
        step.getTermDimsAttr());
    IRMapping mapping;
    step.getScore().cloneInto(&tiled.getScore(), mapping);
    if (withMask)
      step.getMask().cloneInto(&tiled.getMask(), mapping);
    return tiled;
  };
  Value full = bounds.full(m, q0, q1, k0, kn);
  SmallVector<Value> next;
  // A key length that block-n does not divide, static or not: the tiles
  // that are whole (k0 + block-n <= N) take a step that says so
  // (`whole_keys`), so that nothing tests their keys against the length;
  // the last, partial tile takes the other step. (The tile's extent is a
  // min() per iteration, which LLVM does not fold for a static length
  // either: every tile tested its keys, 1.05-1.18x slower at N = 2000,
  // docs/decisions/003.) A mask no bound describes is evaluated on every
  // tile, in one step: its tile votes stay per loop iteration.
  if (!alignedKeys && (!bounds.hasMask || full)) {
    Value whole = m.cmp(arith::CmpIPredicate::sle, m.add(k0, bn), keys);
    bool masked = bounds.hasMask;
    auto ifOp = scf::IfOp::create(
        b, loc, full ? m.andI(full, whole) : whole,
        [&](OpBuilder &tb, Location l) {
          OnlineStepOp tiled = emitStep(tb, l, false);
          tiled.setWholeKeys(true);
          scf::YieldOp::create(tb, l, tiled.getNewState());
        },
        [&](OpBuilder &eb, Location l) {
          scf::YieldOp::create(eb, l, emitStep(eb, l, masked).getNewState());
        });
    llvm::append_range(next, ifOp.getResults());
  } else if (!bounds.hasMask) {
    llvm::append_range(next, emitStep(b, loc, false).getNewState());
  } else if (!full) {
    llvm::append_range(next, emitStep(b, loc, true).getNewState());
  } else {
    auto ifOp = scf::IfOp::create(
        b, loc, full,
        [&](OpBuilder &tb, Location l) {
          scf::YieldOp::create(tb, l, emitStep(tb, l, false).getNewState());
        },
        [&](OpBuilder &eb, Location l) {
          scf::YieldOp::create(eb, l, emitStep(eb, l, true).getNewState());
        });
    llvm::append_range(next, ifOp.getResults());
  }
  scf::YieldOp::create(b, loc, next);

  // Normalize the tile and insert it into the outputs.
  finalizeTile(b, loc, fin, forall, loop, stats, static_cast<bool>(keySide),
               terms.size(), bIdx, hIdx, hKV, q0, rows);
  ValueRange results = forall.getResults();
  unsigned numFinalized = fin->getNumResults();
  ValueRange added = step.getNewState().drop_front(2 * stats + nb);
  for (auto [from, to] : llvm::zip(added, results.drop_front(numFinalized)))
    b.replaceAllUsesWith(from, to);
  b.replaceOp(fin, results.take_front(numFinalized));
  b.eraseOp(step);
  return success();
}

struct AttnTilePass : flashlight::attn::impl::AttnTileBase<AttnTilePass> {
  using AttnTileBase::AttnTileBase;
  void runOnOperation() override {
    SmallVector<OnlineFinalizeOp> ops;
    getOperation()->walk([&](OnlineFinalizeOp op) { ops.push_back(op); });
    // Without attn-plan, the options' tiles on the reference generator.
    auto fallback = KernelPlanAttr::getReference(&getContext(), blockM, blockN,
                                                 /*runtimeStrides=*/true);
    for (OnlineFinalizeOp op : ops) {
      auto plan = op->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
      if (!plan && (blockM <= 0 || blockN <= 0)) {
        op.emitError("attn-tile: no kernel plan (run attn-plan) and no "
                     "positive block-m and block-n");
        return signalPassFailure();
      }
      if (failed(tile(op, plan ? plan : fallback)))
        return signalPassFailure();
    }
  }
};

} // namespace
