//===- RowPerWarp.cpp - The reference code generator ----------------------===//
//
// Warp w of a block owns query row q0 + w; lane l owns head-dim columns
// l, l + 32, ... of Q (in registers) and of each accumulator. A logit is a
// warp-wide sum, so every lane holds every logit, the running max and sum.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace flashlight::attn_to_gpu;

namespace {

/// Lanes needed to hold `d` columns, `kThreadsPerWarp` at a time.
int64_t chunksOf(int64_t d) {
  return (d + kThreadsPerWarp - 1) / kThreadsPerWarp;
}

class RowPerWarpEmitter : public KernelEmitter {
public:
  using KernelEmitter::KernelEmitter;

protected:
  /// One value for [1, 1, rows] (max, sum), one per column chunk for
  /// [1, 1, rows, D] (accumulators, Q).
  int64_t laneCount(Type type) override {
    auto t = cast<RankedTensorType>(type);
    return t.getRank() == 4 ? chunksOf(t.getDimSize(3)) : 1;
  }

  /// Column `lane + 32 * chunk`.
  Value column(int64_t chunk) {
    return addI(lane, idx(chunk * kThreadsPerWarp));
  }

  /// Loads `memref[i0, i1, i2, first + col]` as f32, 0 for columns >= d
  /// (a row's block of d columns from `first`).
  Value loadColumn(Value memref, Value i0, Value i1, Value i2, Value col,
                   int64_t d, int64_t first = 0) {
    if (d % kThreadsPerWarp == 0)
      return loadF32(memref, {i0, i1, i2, addI(col, idx(first))});
    Value clamped = addI(minI(col, idx(d - 1)), idx(first));
    Value v = loadF32(memref, {i0, i1, i2, clamped});
    return select(cmpI(arith::CmpIPredicate::slt, col, idx(d)), v, f32(0));
  }

  /// Each branch's block of V's (and the output's) columns: (first, width);
  /// the whole of them for every branch unless value_columns split them.
  static SmallVector<std::pair<int64_t, int64_t>>
  valueBlocks(ValueRange accState, int64_t dv) {
    SmallVector<int64_t> columns = valueColumnOffsets(accState, dv);
    SmallVector<std::pair<int64_t, int64_t>> blocks;
    for (auto [r, acc] : llvm::enumerate(accState))
      blocks.push_back(
          columns.empty()
              ? std::pair<int64_t, int64_t>(0, dv)
              : std::pair<int64_t, int64_t>(
                    columns[r],
                    cast<RankedTensorType>(acc.getType()).getDimSize(3)));
    return blocks;
  }

  /// The query row this warp owns, clamped into [0, M) so that idle warps of
  /// a partial tile read valid memory; stores are guarded separately.
  std::pair<Value, Value> rowOf(Value q0, Value rowsMemref) {
    Value row = addI(q0, warp);
    Value last = arith::SubIOp::create(b, loc, dim(rowsMemref, 2), idx(1));
    return {row, minI(row, last)};
  }

  LogicalResult onSlice(Value sliced, const View &view) override {
    Value memref = view.memref;
    // Query tiles are loaded into registers once, here, outside the KV loop.
    SmallVector<Role> roles = rolesOf(sliced);
    if (roles.empty() || roles.front().kind != Role::Query)
      return success();
    int64_t d = cast<RankedTensorType>(sliced.getType()).getDimSize(3);
    auto [row, rowClamped] = rowOf(view.offsets[2], memref);
    (void)row;
    SmallVector<Value> regs;
    for (int64_t c = 0; c < chunksOf(d); ++c)
      regs.push_back(loadColumn(memref, view.offsets[0], view.offsets[1],
                                rowClamped, column(c), d));
    lanes[sliced] = regs;
    return success();
  }

  /// One KV tile: for each key, the logits of every branch (a warp-wide dot
  /// product), the score and mask regions, and the state update.
  LogicalResult emitStep(OnlineStepOp step) override {
    unsigned nb = step.getNumBranches();
    Normalizer normalizer = step.getNormalizer();
    bool softmax = normalizer == Normalizer::softmax;
    View vView = views.lookup(step.getValue());
    int64_t dv = step.getValue().getType().getDimSize(3);
    int64_t numChunks = chunksOf(dv);
    Value b0 = map.lookup(step.getBatchOffset());
    Value h0 = map.lookup(step.getHeadOffset());
    Value k0 = map.lookup(step.getKeyOffset());
    auto [row, rowClamped] = rowOf(map.lookup(step.getQueryOffset()),
                                   views.lookup(step.getQueries()[0]).memref);

    SmallVector<Value> init = flatten(step->getOperands().slice(
        step.getMaxState().getBeginOperandIndex(),
        step.getMaxState().size() + step.getSumState().size() +
            step.getAccState().size()));
    auto keyLoop =
        scf::ForOp::create(b, loc, idx(0), vView.sizes[2], idx(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(keyLoop.getBody());
    Value j = keyLoop.getInductionVar();
    Value kv = addI(k0, j);
    ValueRange state = keyLoop.getRegionIterArgs();
    unsigned stats = softmax ? nb : 0;
    ValueRange maxIn = state.take_front(stats);
    ValueRange sumIn = state.slice(stats, stats);
    ValueRange accIn = state.drop_front(2 * stats);

    // s_r = scale_r * sum_c Q_r[row, c] * K_r[kv, c]
    SmallVector<Value> logits;
    for (unsigned r = 0; r < nb; ++r) {
      View kView = views.lookup(step.getKeys()[r]);
      int64_t dqk =
          cast<RankedTensorType>(step.getKeys()[r].getType()).getDimSize(3);
      SmallVector<Value> q = lanes.lookup(step.getQueries()[r]);
      Value partial = f32(0);
      for (int64_t c = 0; c < chunksOf(dqk); ++c) {
        Value k = loadColumn(kView.memref, kView.offsets[0], kView.offsets[1],
                             addI(kView.offsets[2], j), column(c), dqk);
        partial = add(partial, mul(q[c], k));
      }
      // Softmax runs in base 2 (exp2 is one instruction): without a score
      // region log2(e) folds into the scale, otherwise it applies after.
      double scale = step.getScale()[r];
      if (softmax && step.getScore().empty())
        scale *= kLog2e;
      logits.push_back(mul(warpSum(partial), f32(scale)));
    }
    SmallVector<Value> indices = {b0, h0, rowClamped, kv};
    SmallVector<Value> terms;
    if (!step.getScore().empty()) {
      logits =
          inlineRegion(step.getScore(), logits, indices, step.getCaptures());
      terms.assign(logits.begin() + nb, logits.end());
      logits.resize(nb);
      if (softmax)
        for (Value &s : logits)
          s = mul(floorLogit(s), f32(kLog2e));
    }
    Value keep =
        step.getMask().empty()
            ? arith::ConstantIntOp::create(b, loc, 1, 1).getResult()
            : inlineRegion(step.getMask(), {}, indices, step.getCaptures())[0];
    // The terms, once per element: lane 0 of the row's warp.
    if (!terms.empty()) {
      View qView = views.lookup(step.getQueries()[0]);
      Value rowValid =
          cmpI(arith::CmpIPredicate::slt, row, dim(qView.memref, 2));
      addTerms(
          step, terms, indices, keep,
          arith::AndIOp::create(b, loc, rowValid,
                                cmpI(arith::CmpIPredicate::eq, lane, idx(0))));
    }

    // V's row (each branch's block of it, with value_columns).
    SmallVector<std::pair<int64_t, int64_t>> blocks =
        valueBlocks(step.getAccState(), dv);
    auto valueRow = [&](int64_t first, int64_t width) {
      SmallVector<Value> v;
      for (int64_t c = 0; c < chunksOf(width); ++c)
        v.push_back(loadColumn(vView.memref, vView.offsets[0], vView.offsets[1],
                               addI(vView.offsets[2], j), column(c), width,
                               first));
      return v;
    };
    SmallVector<Value> shared;
    if (blocks.front().second == dv)
      shared = valueRow(0, dv);

    SmallVector<Value> maxOut, sumOut, accOut;
    int64_t accAt = 0;
    for (unsigned r = 0; r < nb; ++r) {
      Value s = logits[r];
      auto [first, width] = blocks[r];
      numChunks = chunksOf(width);
      SmallVector<Value> v = shared.empty() ? valueRow(first, width) : shared;
      ValueRange acc = accIn.slice(accAt, numChunks);
      accAt += numChunks;
      // p: the weight of this key; alpha: the rescale of the old state.
      Value p, alpha;
      if (softmax) {
        // A key is kept only if unmasked and finite (-inf scores are masks).
        Value kept = arith::AndIOp::create(
            b, loc, keep,
            cmpF(arith::CmpFPredicate::OGT, s,
                 f32(-std::numeric_limits<double>::infinity())));
        Value m = maxIn[r];
        Value mNew = select(kept, arith::MaximumFOp::create(b, loc, m, s), m);
        // alpha = exp(m - m_new), 1 when the max did not move (also -inf).
        alpha = select(cmpF(arith::CmpFPredicate::OEQ, m, mNew), f32(1),
                       exp2(sub(m, mNew)));
        p = select(kept, exp2(sub(s, mNew)), f32(0));
        maxOut.push_back(mNew);
        sumOut.push_back(add(mul(sumIn[r], alpha), p));
      } else {
        Value weight = s;
        if (normalizer == Normalizer::sigmoid)
          weight =
              div(f32(1), add(f32(1), exp(arith::NegFOp::create(b, loc, s))));
        p = select(keep, weight, f32(0));
      }
      for (int64_t c = 0; c < numChunks; ++c) {
        Value old = alpha ? mul(acc[c], alpha) : acc[c];
        accOut.push_back(add(old, mul(p, v[c])));
      }
      if (keySideOut && step.getKeySideBranch() == r)
        addKeySide(step, r, p, row, kv);
    }
    SmallVector<Value> next = maxOut;
    llvm::append_range(next, sumOut);
    llvm::append_range(next, accOut);
    scf::YieldOp::create(b, loc, next);
    b.setInsertionPointAfter(keyLoop);
    distribute(step.getNewState(), keyLoop.getResults());
    return success();
  }

  /// The key-side product: key_side[b, hkv, kv, c] += p * Q_r[row, c] for
  /// this warp's row (if it is one) and columns. Every row of every block
  /// adds to the key's row: atomics.
  void addKeySide(OnlineStepOp step, unsigned r, Value p, Value row, Value kv) {
    View qView = views.lookup(step.getQueries()[r]);
    View kView = views.lookup(step.getKeys()[r]);
    int64_t dqk =
        cast<RankedTensorType>(step.getQueries()[r].getType()).getDimSize(3);
    SmallVector<Value> q = lanes.lookup(step.getQueries()[r]);
    Value rowValid = cmpI(arith::CmpIPredicate::slt, row, dim(qView.memref, 2));
    for (int64_t c = 0; c < chunksOf(dqk); ++c)
      inColumn(rowValid, c, dqk, [&](Value col) {
        memref::AtomicRMWOp::create(
            b, loc, arith::AtomicRMWKind::addf, mul(p, q[c]), keySideOut,
            {kView.offsets[0], kView.offsets[1], kv, col});
      });
  }

  /// Runs `body` (given the column) where `rowValid` and chunk `c`'s column
  /// is below `width`.
  void inColumn(Value rowValid, int64_t c, int64_t width,
                function_ref<void(Value)> body) {
    Value col = column(c), valid = rowValid;
    if (width % kThreadsPerWarp)
      valid = arith::AndIOp::create(
          b, loc, valid, cmpI(arith::CmpIPredicate::slt, col, idx(width)));
    auto inside = scf::IfOp::create(b, loc, valid);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&inside.getThenRegion().front());
    body(col);
  }

  /// Normalizes the state, applies the epilogue and stores the rows.
  LogicalResult emitFinalize(OnlineFinalizeOp fin) override {
    unsigned nb = fin.getNumBranches();
    bool softmax = fin.getNormalizer() == Normalizer::softmax;
    FailureOr<FinalizeTarget> target = finalizeTarget(fin);
    if (failed(target))
      return failure();
    auto [out, outType, b0, h0] = *target;
    int64_t dv = outType.getDimSize(3);
    int64_t numChunks = chunksOf(dv);
    SmallVector<std::pair<int64_t, int64_t>> blocks =
        valueBlocks(fin.getAccState(), dv);
    auto [row, rowClamped] = rowOf(map.lookup(fin.getQueryOffset()), out);
    Value rowValid = cmpI(arith::CmpIPredicate::slt, row, dim(out, 2));

    // o_r = acc_r * outScale_r
    SmallVector<SmallVector<Value>> branchOut(nb);
    for (unsigned r = 0; r < nb; ++r) {
      SmallVector<Value> acc = lanes.lookup(fin.getAccState()[r]);
      Value outScale = f32(1), lse;
      if (softmax) {
        Value m = lanes.lookup(fin.getMaxState()[r])[0];
        Value l = lanes.lookup(fin.getSumState()[r])[0];
        std::tie(outScale, lse) = normalizeRow(
            m, l,
            fin.getSinks().empty() ? Value()
                                   : memrefOf.lookup(fin.getSinks()[r]),
            h0);
      }
      for (Value a : acc)
        branchOut[r].push_back(mul(a, outScale));
      if (lse && r < fin.getLse().size()) {
        Value lseMemref = outputOf.lookup(fin.getLse()[r]);
        Value first = cmpI(arith::CmpIPredicate::eq, lane, idx(0));
        auto store = scf::IfOp::create(
            b, loc, arith::AndIOp::create(b, loc, rowValid, first));
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&store.getThenRegion().front());
        memref::StoreOp::create(b, loc, lse, lseMemref, {b0, h0, row});
      }
    }

    if (blocks.front().second != dv) {
      // value_columns: each branch stores its own block.
      for (unsigned r = 0; r < nb; ++r)
        storeBlock(out, outType.getElementType(), branchOut[r], rowValid,
                   {b0, h0, row}, blocks[r].first, blocks[r].second);
      return success();
    }
    // The epilogue combines the branches at each of the row's columns.
    SmallVector<Value> values;
    for (int64_t c = 0; c < numChunks; ++c) {
      Value d = column(c);
      Value dClamped = dv % kThreadsPerWarp ? minI(d, idx(dv - 1)) : d;
      SmallVector<Value> outs;
      for (unsigned r = 0; r < nb; ++r)
        outs.push_back(branchOut[r][c]);
      values.push_back(fin.getEpilogue().empty()
                           ? outs[0]
                           : inlineRegion(fin.getEpilogue(), outs,
                                          {b0, h0, rowClamped, dClamped},
                                          fin.getCaptures())[0]);
    }
    storeBlock(out, outType.getElementType(), values, rowValid, {b0, h0, row},
               0, dv);
    return success();
  }

  /// Stores a row's chunks `values` into columns [first, first + width) of
  /// `out` at `at` (b, h, row), where `rowValid`.
  void storeBlock(Value out, Type elementType, ArrayRef<Value> values,
                  Value rowValid, ArrayRef<Value> at, int64_t first,
                  int64_t width) {
    for (auto [c, element] : llvm::enumerate(values)) {
      Value value = element;
      if (elementType != value.getType())
        value = arith::TruncFOp::create(b, loc, elementType, value);
      inColumn(rowValid, c, width, [&](Value d) {
        SmallVector<Value> indices(at);
        indices.push_back(addI(d, idx(first)));
        memref::StoreOp::create(b, loc, value, out, indices);
      });
    }
  }
};

} // namespace

std::unique_ptr<KernelEmitter>
flashlight::attn_to_gpu::createRowPerWarpEmitter(OpBuilder &b, Location loc) {
  return std::make_unique<RowPerWarpEmitter>(b, loc);
}
