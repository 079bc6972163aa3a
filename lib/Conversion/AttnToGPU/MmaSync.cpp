//===- MmaSync.cpp - Tensor-core code generator ---------------------------===//
//
// The mma.sync generator (MmaSync.h; the wgmma generator derives from it):
// staging copies, the mma building blocks, the step's stages and the
// finalize, and the generator's factory.
//
//===----------------------------------------------------------------------===//

#include "MmaSync.h"

#include "CopyPipeline.h"
#include "MmaSyncOps.h"

#include "llvm/Support/SaveAndRestore.h"

using namespace flashlight::attn_to_gpu;

MmaSyncEmitter::MmaSyncEmitter(OpBuilder &b, Location loc,
                               const MmaTiles &tiles, KernelPlanAttr plan,
                               const BlockMask &mask)
    : KernelEmitter(b, loc), keyTiles(tiles.keys), queryTiles(tiles.queries),
      valueTile(tiles.values), relativeTable(tiles.relative),
      stagedTiles(tiles.staged),
      threads(plan.getGenerator() == Generator::wgmma
                  ? plan.getConsumerGroups() * ArchInfo::kThreadsPerWarpgroup
                  : plan.getThreads()),
      mTiles(plan.getWarpRows() / ArchInfo::kMmaRows),
      alignedLengths(plan.getAlignedLengths()), blockM(plan.getBlockM()),
      blockMask(mask), sparsity(plan.getSparsity()),
      layout(plan.getGenerator() == Generator::wgmma
                 ? TileLayout::swizzled(cast<MemRefType>(tiles.values.getType())
                                            .getElementTypeBitWidth())
                 : TileLayout::padded()) {}

Value MmaSyncEmitter::nextTileKept(int64_t bn) {
  if (!blockMask.memref || !votesOnTiles())
    return Value();
  Value next = addI(
      arith::DivUIOp::create(b, loc, keyViews[0].offsets[2], idx(bn)), idx(1));
  Value last = arith::SubIOp::create(b, loc, dim(blockMask.memref, 3), idx(1));
  return tileIs(arith::CmpIPredicate::ne, BlockMask::Empty,
                tileByte(currentStep, minI(next, last)));
}

Value MmaSyncEmitter::tileByte(OnlineStepOp step, Value tile) {
  SmallVector<Value> at =
      blockMask.indices(b, loc, map.lookup(step.getBatchOffset()),
                        map.lookup(step.getHeadOffset()),
                        map.lookup(step.getQueryOffset()), idx(0));
  at[3] = tile;
  return memref::LoadOp::create(b, loc, blockMask.memref, at);
}

Value MmaSyncEmitter::tileIs(arith::CmpIPredicate pred, BlockMask::Tile t,
                             Value byte) {
  return cmpI(pred, byte,
              arith::ConstantIntOp::create(b, loc, b.getI8Type(), t));
}

int64_t MmaSyncEmitter::laneCount(Type type) {
  auto t = cast<RankedTensorType>(type);
  return mTiles * (t.getRank() == 4 ? t.getDimSize(3) / 8 * 4 : 2);
}

void MmaSyncEmitter::barrier() {
  if (!consumersOnly) {
    gpu::BarrierOp::create(b, loc);
    return;
  }
  namedBarrier(i32(5), threads);
}

void MmaSyncEmitter::namedBarrier(Value id, int64_t count) {
  NVVM::BarrierOp::create(b, loc, TypeRange{}, id, i32(count),
                          NVVM::BarrierReductionAttr(), Value());
}

Value MmaSyncEmitter::stage(const View &view, Value tile) {
  int64_t d = cast<MemRefType>(view.memref.getType()).getDimSize(3);
  int64_t rows = tileRows(tile, d);
  int64_t chunks = rows * d / 8;
  Value limit = dim(view.memref, 2);
  Value lastRow = arith::SubIOp::create(b, loc, limit, idx(1));
  Value tid = thread;
  SmallVector<Value> tokens;
  // Where the threads cover whole rows, a thread's copies share their
  // column and their rows differ by constants: written so (not as
  // (tid + first) / (d / 8)), their addresses fold into one base and
  // immediate offsets instead of a register pair each.
  std::optional<std::pair<Value, Value>> origin;
  if (threads % (d / 8) == 0)
    origin = chunkOrigin(tid, d);
  for (int64_t first = 0; first < chunks; first += threads) {
    Value c = addI(tid, idx(first));
    // More threads than copy (a producer warpgroup's, or the last round of
    // a tile whose chunks are not a multiple of the threads: D = 80 on 64
    // rows): the guarded copies go into the group without their tokens.
    std::optional<OpBuilder::InsertionGuard> guard;
    if (copyGuard || first + threads > chunks) {
      Value inTile = cmpI(arith::CmpIPredicate::ult, c, idx(chunks));
      auto ifCopies = scf::IfOp::create(
          b, loc,
          copyGuard ? arith::AndIOp::create(b, loc, copyGuard, inTile)
                    : inTile);
      guard.emplace(b);
      b.setInsertionPointToStart(&ifCopies.getThenRegion().front());
    }
    auto [row, col] = origin
                          ? std::pair(addI(origin->first, idx(first / (d / 8))),
                                      origin->second)
                          : chunkOrigin(c, d);
    Value globalRow = addI(view.offsets[2], row);
    Value srcRow = globalRow, valid = copyCondition;
    if (!tilesInBounds) {
      Value inRows = cmpI(arith::CmpIPredicate::slt, globalRow, limit);
      valid = valid ? arith::AndIOp::create(b, loc, inRows, valid) : inRows;
      srcRow = minI(globalRow, lastRow);
    }
    Value token = copies::asyncCopy(
        b, loc, tile, tileIndices(tile, row, col, d), view.memref,
        ValueRange{view.offsets[0], view.offsets[1], srcRow, col}, 8,
        copiedElements(valid, 8));
    if (!guard)
      tokens.push_back(token);
  }
  return copies::commitGroup(b, loc, tokens);
}

Value MmaSyncEmitter::copiedElements(Value valid, int64_t n) {
  return valid ? arith::SelectOp::create(b, loc, valid, idx(n), idx(0))
                     .getResult()
               : idx(n);
}

void MmaSyncEmitter::waitCopies(Value group, int32_t pending) {
  copies::waitGroups(b, loc, group, pending);
  publishCopies();
  barrier();
}

std::pair<Value, Value> MmaSyncEmitter::chunkOrigin(Value c, int64_t d) {
  return {arith::DivUIOp::create(b, loc, c, idx(d / 8)),
          mulI(arith::RemUIOp::create(b, loc, c, idx(d / 8)), 8)};
}

void MmaSyncEmitter::waitForValues() {
  if (valuesLanded)
    return;
  waitCopies(valueGroup, keyGroupsInFlight);
  valuesLanded = true;
}

SmallVector<Value> MmaSyncEmitter::ldmatrix(Value tile, Value row, Value col,
                                            int tiles, bool transpose) {
  return mma_sync::ldmatrix(b, loc, tile, row, col, tiles, transpose,
                            elementType());
}

Value MmaSyncEmitter::asOperand(Value pair) {
  return mma_sync::asOperand(b, loc, pair);
}

Value MmaSyncEmitter::pack(Value lo, Value hi) {
  return mma_sync::pack(b, loc, lo, hi, elementType());
}

SmallVector<Value> MmaSyncEmitter::mma(ArrayRef<Value> a, ArrayRef<Value> bFrag,
                                       ArrayRef<Value> c) {
  return mma_sync::product(b, loc, a, bFrag, c, elementType());
}

Value MmaSyncEmitter::quadReduce(Value x, bool isMax) {
  for (int32_t offset : {1, 2}) {
    Value other = gpu::ShuffleOp::create(b, loc, x, offset, kThreadsPerWarp,
                                         gpu::ShuffleMode::XOR)
                      .getShuffleResult();
    x = isMax ? arith::MaximumFOp::create(b, loc, x, other).getResult()
              : add(x, other);
  }
  return x;
}

LogicalResult MmaSyncEmitter::onSlice(Value v, const View &view) {
  for (Role role : rolesOf(v))
    if (failed(onRole(v, view, role)))
      return failure();
  return success();
}

LogicalResult MmaSyncEmitter::onRole(Value v, const View &view, Role role) {
  if (role.kind == Role::Query && !queryTiles.empty()) {
    // Q stays in shared memory; the step reads its fragments.
    queryGroup = stage(view, queryTiles[role.branch]);
    if (role.branch + 1 == role.branches)
      afterQueryCopies();
    return success();
  }
  if (role.kind == Role::Query) {
    // Q goes through the first K tile in chunks of block-n rows; the warps
    // whose m16 tiles a chunk holds take their A fragments from it.
    int64_t d = cast<RankedTensorType>(v.getType()).getDimSize(3);
    Value staging = keyTiles[0];
    int64_t bn = tileRows(staging, d);
    int64_t rows = threads / kThreadsPerWarp * rowsPerWarp();
    Value colHalf = mulI(arith::DivUIOp::create(b, loc, lane, idx(16)), 8);
    SmallVector<Value> regs(mTiles * d / 16 * 4);
    for (int64_t chunk = 0; chunk * bn < rows; ++chunk) {
      // Every warp is done with the previous chunk (or branch).
      if (chunk > 0 || role.branch > 0)
        barrier();
      View part = view;
      part.offsets[2] = addI(view.offsets[2], idx(chunk * bn));
      queryGroup = stage(part, staging);
      waitCopies(queryGroup, 0);
      for (int64_t mt = 0; mt < mTiles; ++mt) {
        Value first = addI(mulI(warp, rowsPerWarp()), idx(16 * mt));
        Value tileRow = addI(arith::RemUIOp::create(b, loc, first, idx(bn)),
                             arith::RemUIOp::create(b, loc, lane, idx(16)));
        Value mine =
            cmpI(arith::CmpIPredicate::eq,
                 arith::DivUIOp::create(b, loc, first, idx(bn)), idx(chunk));
        for (int64_t k = 0; k < d / 16; ++k) {
          SmallVector<Value> frag =
              ldmatrix(staging, tileRow, addI(colHalf, idx(16 * k)), 4,
                       /*transpose=*/false);
          for (int64_t i = 0; i < 4; ++i) {
            Value &reg = regs[(mt * (d / 16) + k) * 4 + i];
            reg = chunk == 0 ? frag[i] : select(mine, frag[i], reg);
          }
        }
      }
    }
    lanes[v] = regs;
    return success();
  }
  if (role.kind == Role::Key) {
    // Every warp must be done with the previous tile (its P V reads V)
    // before V is refilled; K was prefetched by the previous step, except
    // on the loop's first tile.
    if (role.branch == 0)
      barrier();
    keyViews.resize(role.branches);
    keyViews[role.branch] = view;
    if (loopLowerBounds.empty()) {
      // A single KV tile: canonicalization removed the loop.
      stage(view, keyTiles[role.branch]);
    } else {
      Value first = cmpI(arith::CmpIPredicate::eq, view.offsets[2],
                         loopLowerBounds.back());
      auto ifFirst = scf::IfOp::create(b, loc, first);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
      stage(view, keyTiles[role.branch]);
    }
    return success();
  }
  valueGroup = stage(view, valueTile);
  return success();
}

void MmaSyncEmitter::prefetchNextKey(int64_t bn) {
  barrier();
  // A tile the block mask drops is not read from global memory.
  copyCondition = nextTileKept(bn);
  for (auto [tile, view] : llvm::zip_equal(keyTiles, keyViews)) {
    View next = view;
    next.offsets[2] = addI(view.offsets[2], idx(bn));
    stage(next, tile);
  }
  copyCondition = Value();
  keyGroupsInFlight = keyTiles.size();
}

Value MmaSyncEmitter::rowOf(Value q0, int64_t mt, int64_t i) {
  return addI(q0, addI(mulI(warp, rowsPerWarp()),
                       addI(group(), idx(16 * mt + 8 * (i / 2)))));
}

Value MmaSyncEmitter::fillRelativeTable(OnlineStepOp step,
                                        const RelativeTerms &relative, Value b0,
                                        Value h0, Value q0, Value k0,
                                        Value lastRow, Value lastKey,
                                        int64_t bn) {
  Region &score = step.getScore();
  Block &block = score.front();
  unsigned numLeading = step.getNumBranches();
  int64_t rows = rowsPerWarp(), positions = bn + rows - 1;
  int64_t terms = relative.terms.size();
  Value parity = arith::RemUIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, k0, idx(bn)), idx(2));
  Value base = mulI(addI(mulI(warp, 2), parity), terms * positions);
  Value d0 = arith::SubIOp::create(
      b, loc, k0, addI(q0, addI(mulI(warp, rows), idx(rows - 1))));
  Value first = arith::SubIOp::create(b, loc, idx(0), lastRow);
  for (int64_t from = 0; from < positions; from += kThreadsPerWarp) {
    Value t = addI(lane, idx(from));
    OpBuilder::InsertionGuard guard(b);
    if (from + kThreadsPerWarp > positions) {
      auto inTable = scf::IfOp::create(
          b, loc, cmpI(arith::CmpIPredicate::slt, t, idx(positions)));
      b.setInsertionPointToStart(&inTable.getThenRegion().front());
    }
    Value delta =
        minI(arith::MaxSIOp::create(b, loc, addI(d0, t), first), lastKey);
    // The region's relative ops, the differences replaced by delta; the
    // row and column arguments stay unmapped, so nothing else that reads
    // them is cloned.
    IRMapping rm;
    rm.map(block.getArgument(numLeading), b0);
    rm.map(block.getArgument(numLeading + 1), h0);
    for (auto [i, capture] : llvm::enumerate(step.getCaptures()))
      rm.map(block.getArgument(numLeading + 4 + i), memrefOf.lookup(capture));
    for (Operation &op : block.without_terminator()) {
      auto difference = relative.differences.find(&op);
      if (difference != relative.differences.end()) {
        Value d = difference->second > 0
                      ? delta
                      : arith::SubIOp::create(b, loc, idx(0), delta);
        Type type = op.getResult(0).getType();
        if (!type.isIndex())
          d = arith::IndexCastOp::create(b, loc, type, d);
        rm.map(op.getResult(0), d);
      } else if (op.getNumResults() &&
                 llvm::all_of(op.getOperands(),
                              [&](Value v) { return rm.contains(v); })) {
        inlineOp(op, rm, numLeading);
      }
    }
    for (auto [k, term] : llvm::enumerate(relative.terms))
      memref::StoreOp::create(
          b, loc, rm.lookup(term), relativeTable,
          ValueRange{addI(base, addI(idx(k * positions), t))});
  }
  NVVM::SyncWarpOp::create(b, loc, i32(-1));
  return base;
}

IRMapping MmaSyncEmitter::readRelativeTable(const RelativeTerms &relative,
                                            Value base, int64_t bn, int64_t mt,
                                            int64_t i, Value col) {
  int64_t rows = rowsPerWarp(), positions = bn + rows - 1;
  Value row = addI(group(), idx(16 * mt + 8 * (i / 2)));
  Value t = arith::SubIOp::create(b, loc, addI(col, idx(rows - 1)), row);
  IRMapping rm;
  for (Operation *op : relative.ops)
    rm.map(op->getResult(0), op->getResult(0));
  for (auto [k, term] : llvm::enumerate(relative.terms))
    rm.map(term, memref::LoadOp::create(
                     b, loc, relativeTable,
                     ValueRange{addI(base, addI(idx(k * positions), t))}));
  return rm;
}

MmaSyncEmitter::Fragments
MmaSyncEmitter::scoreProduct(ArrayRef<Value> q, int64_t dqk, int64_t bn) {
  // Per m16 tile and 8-key block, a 16x8 fragment. One
  // ldmatrix.x4 gives the B fragments of two key blocks: lanes 0-15 address
  // block nb (columns k and k + 8), lanes 16-31 block nb + 1.
  Value keyRow = addI(arith::RemUIOp::create(b, loc, lane, idx(8)),
                      mulI(arith::DivUIOp::create(b, loc, lane, idx(16)), 8));
  Value keyCol =
      mulI(arith::RemUIOp::create(
               b, loc, arith::DivUIOp::create(b, loc, lane, idx(8)), idx(2)),
           8);
  // s[mt][nb]: the four f32 of block nb of m16 tile mt.
  int64_t blocks = bn / 8;
  Fragments s(mTiles, SmallVector<SmallVector<Value>>(
                          blocks, SmallVector<Value>(4, f32(0))));
  Value qRow = arith::RemUIOp::create(b, loc, lane, idx(16));
  Value qColHalf = mulI(arith::DivUIOp::create(b, loc, lane, idx(16)), 8);
  for (int64_t k = 0; k < dqk / 16; ++k) {
    SmallVector<SmallVector<Value>> qFrag(mTiles);
    for (int64_t mt = 0; mt < mTiles; ++mt) {
      if (!queryTile()) {
        qFrag[mt] = SmallVector<Value>(
            ArrayRef<Value>(q).slice((mt * (dqk / 16) + k) * 4, 4));
        continue;
      }
      Value row = addI(mulI(warp, rowsPerWarp()), addI(qRow, idx(16 * mt)));
      qFrag[mt] = ldmatrix(queryTile(), row, addI(qColHalf, idx(16 * k)), 4,
                           /*transpose=*/false);
    }
    for (int64_t nb = 0; nb < blocks; nb += 2) {
      SmallVector<Value> kFrag =
          ldmatrix(keyTile(), addI(keyRow, idx(8 * nb)),
                   addI(keyCol, idx(16 * k)), 4, /*transpose=*/false);
      for (int64_t mt = 0; mt < mTiles; ++mt) {
        s[mt][nb] =
            mma(qFrag[mt], ArrayRef<Value>(kFrag).take_front(2), s[mt][nb]);
        s[mt][nb + 1] =
            mma(qFrag[mt], ArrayRef<Value>(kFrag).take_back(2), s[mt][nb + 1]);
      }
    }
  }
  return s;
}

MmaSyncEmitter::Fragments MmaSyncEmitter::packWeights(const Fragments &p,
                                                      int64_t bn) {
  Fragments pFrag(mTiles, SmallVector<SmallVector<Value>>(bn / 16));
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t k = 0; k < bn / 16; ++k) {
      ArrayRef<SmallVector<Value>> t = p[mt];
      pFrag[mt][k] = {pack(t[2 * k][0], t[2 * k][1]),
                      pack(t[2 * k][2], t[2 * k][3]),
                      pack(t[2 * k + 1][0], t[2 * k + 1][1]),
                      pack(t[2 * k + 1][2], t[2 * k + 1][3])};
    }
  return pFrag;
}

SmallVector<Value> MmaSyncEmitter::valueProduct(const Fragments &p,
                                                ArrayRef<Value> acc,
                                                ArrayRef<Value> alpha,
                                                int64_t dv, int64_t bn) {
  Fragments pFrag = packWeights(p, bn);
  int64_t accPerTile = dv / 8 * 4;
  // V through ldmatrix.trans, once V has landed.
  waitForValues();
  // One ldmatrix.x4.trans gives the B fragments of two column blocks:
  // lanes 0-15 address keys [16k, 16k + 16) at columns 8nd, lanes 16-31 at
  // columns 8(nd + 1).
  Value vRow = arith::RemUIOp::create(b, loc, lane, idx(16));
  Value vCol = mulI(arith::DivUIOp::create(b, loc, lane, idx(16)), 8);
  SmallVector<Value> newAcc(acc.size());
  for (int64_t nd = 0; nd < dv / 8; nd += 2) {
    // c[mt][j]: the fragments of column blocks nd and nd + 1.
    SmallVector<std::array<SmallVector<Value>, 2>> c(mTiles);
    for (int64_t mt = 0; mt < mTiles; ++mt)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t i = 0; i < 4; ++i) {
          Value a = acc[mt * accPerTile + 4 * (nd + j) + i];
          Value f = alpha[2 * mt + i / 2];
          c[mt][j].push_back(f ? mul(a, f) : a);
        }
    for (int64_t k = 0; k < bn / 16; ++k) {
      SmallVector<Value> vFrag = ldmatrix(
          valueTile, addI(vRow, idx(16 * k)),
          addI(vCol, idx(valueBlock.column + 8 * nd)), 4, /*transpose=*/true);
      for (int64_t mt = 0; mt < mTiles; ++mt) {
        c[mt][0] =
            mma(pFrag[mt][k], ArrayRef<Value>(vFrag).take_front(2), c[mt][0]);
        c[mt][1] =
            mma(pFrag[mt][k], ArrayRef<Value>(vFrag).take_back(2), c[mt][1]);
      }
    }
    for (int64_t mt = 0; mt < mTiles; ++mt)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t i = 0; i < 4; ++i)
          newAcc[mt * accPerTile + 4 * (nd + j) + i] = c[mt][j][i];
  }
  return newAcc;
}

SmallVector<SmallVector<unsigned>>
MmaSyncEmitter::branchGroups(OnlineStepOp step) {
  unsigned n = step.getNumBranches();
  SmallVector<SmallVector<unsigned>> groups;
  // Terms read the logits of any branch: one group.
  bool separable =
      step.getTermState().empty() && separableBranches(step.getScore(), n);
  for (unsigned r = 0; r < n; ++r) {
    if (separable || groups.empty())
      groups.emplace_back();
    groups.back().push_back(r);
  }
  return groups;
}

/// The head dim of a [1, 1, rows, D] slice.
static int64_t headDim(Value v) {
  return cast<RankedTensorType>(v.getType()).getDimSize(3);
}

static constexpr double kNegInf = -std::numeric_limits<double>::infinity();

LogicalResult MmaSyncEmitter::emitStep(OnlineStepOp step) {
  StepFrame f = beginStep(step);
  findDiagonalBand(f);
  // The vote (or the block mask) decides whether the tile is computed at
  // all; a skipped tile yields the state unchanged, and the stages below
  // fill the branch that computes it.
  TileVote vote = voteOnTile(f);
  std::optional<OpBuilder::InsertionGuard> skipGuard;
  scf::IfOp skip;
  if (vote.anyKept) {
    skipGuard.emplace(b);
    skip = enterKeptTile(f, vote.anyKept);
  }
  planLogits(f);
  SmallVector<SmallVector<unsigned>> groups = branchGroups(step);
  for (size_t g = 0; g < groups.size(); ++g)
    emitBranchGroup(f, groups, g, vote.partial);
  // The new state, through the skip's scf.if when there is one.
  SmallVector<Value> next = newState(f);
  if (skip) {
    scf::YieldOp::create(b, loc, next);
    skipGuard.reset();
    next = SmallVector<Value>(skip.getResults());
  }
  distribute(step.getNewState(), next);
  return success();
}

MmaSyncEmitter::StepFrame MmaSyncEmitter::beginStep(OnlineStepOp step) {
  currentStep = step;
  StepFrame f;
  f.step = step;
  f.normalizer = step.getNormalizer();
  f.softmax = f.normalizer == Normalizer::softmax;
  f.branches = step.getNumBranches();
  f.dv = headDim(step.getValue());
  f.bn = tileRows(keyTiles[0], headDim(step.getKeys()[0]));
  f.blocks = f.bn / 8;
  f.rows = 2 * mTiles;
  f.values = views.lookup(step.getValue());
  f.columns = valueColumnOffsets(step.getAccState(), f.dv);
  // A whole key block (attn-tile's whole_keys): block-n keys, a constant.
  f.kn = step.getWholeKeys() ? idx(f.bn) : f.values.sizes[2];
  f.b0 = map.lookup(step.getBatchOffset());
  f.h0 = map.lookup(step.getHeadOffset());
  f.q0 = map.lookup(step.getQueryOffset());
  f.k0 = map.lookup(step.getKeyOffset());
  f.lastRow = arith::SubIOp::create(
      b, loc, dim(views.lookup(step.getQueries()[0]).memref, 2), idx(1));
  f.lastKey = arith::SubIOp::create(b, loc, dim(f.values.memref, 2), idx(1));
  f.state = flatten(step->getOperands().slice(
      step.getMaxState().getBeginOperandIndex(),
      step.getMaxState().size() + step.getSumState().size() +
          step.getAccState().size()));
  f.m.resize(f.branches);
  f.l.resize(f.branches);
  f.acc.resize(f.branches);
  for (unsigned r = 0; r < f.branches; ++r) {
    if (f.softmax) {
      f.m[r] = lanes.lookup(step.getMaxState()[r]);
      f.l[r] = lanes.lookup(step.getSumState()[r]);
    }
    f.acc[r] = lanes.lookup(step.getAccState()[r]);
  }
  keyGroupsInFlight = 0;
  valuesLanded = false;
  return f;
}

std::pair<Value, SmallVector<Value>>
MmaSyncEmitter::elementIndices(const StepFrame &f, int64_t mt, int64_t nb,
                               int64_t i) {
  Value col = addI(idx(8 * nb + (i % 2)), mulI(quad(), 2));
  // Rows and keys past the lengths (a partial tile's) read the last ones;
  // with aligned lengths there are none.
  Value row = rowOf(f.q0, mt, i), key = addI(f.k0, col);
  SmallVector<Value> indices = {f.b0, f.h0,
                                alignedLengths ? row : minI(row, f.lastRow),
                                alignedLengths ? key : minI(key, f.lastKey)};
  return std::make_pair(col, indices);
}

Value MmaSyncEmitter::maskOf(const StepFrame &f, int64_t mt, int64_t nb,
                             int64_t i) {
  if (!f.maskBits.empty())
    return f.maskBits[(mt * f.blocks + nb) * 4 + i];
  OnlineStepOp step = f.step;
  return inlineRegion(step.getMask(), {}, elementIndices(f, mt, nb, i).second,
                      step.getCaptures())[0];
}

void MmaSyncEmitter::findDiagonalBand(StepFrame &f) {
  // In a band, an element's i - j is this thread's base for the tile plus a
  // constant, and its key's column 2 * quad plus a constant, so each test
  // is one 32-bit compare with an immediate (the region's 64-bit index math
  // took about five instructions an element). Causal masks are the
  // one-sided case. Measured on an H100 (same runs): sliding window 256
  // +7-16 %; causal programs at D = 64 +0-4 %, at D = 128 -1 to +1 %
  // (0.94-1.00x while differential D = 64 still spilled).
  if (f.step.getMask().empty())
    return;
  MaskInfo info = MaskScoreAnalysis(f.step).getMask();
  // Lengths below 2^30, so that i - j fits in 32 bits: static ones, or
  // runtime ones, which the runtimes bound (kMaxRuntimeExtent).
  auto small = [](Value memref) {
    int64_t n = cast<MemRefType>(memref.getType()).getDimSize(2);
    return ShapedType::isDynamic(n) || n < (int64_t(1) << 30);
  };
  // (Reverse causal: the transposed gradient attentions' causal mask.)
  if ((info.kind != MaskKind::SlidingWindow && info.kind != MaskKind::Causal &&
       info.kind != MaskKind::ReverseCausal) ||
      !small(views.lookup(f.step.getQueries()[0]).memref) ||
      !small(f.values.memref))
    return;
  f.band = info.band;
  auto toI32 = [&](Value v) {
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
  };
  Value firstColumn = addI(f.k0, mulI(quad(), 2));
  for (int64_t mt = 0; mt < mTiles; ++mt)
    f.bandBase.push_back(
        toI32(arith::SubIOp::create(b, loc, rowOf(f.q0, mt, 0), firstColumn)));
  f.columnsLeft = toI32(arith::SubIOp::create(b, loc, f.kn, mulI(quad(), 2)));
}

Value MmaSyncEmitter::keeps(const StepFrame &f, int64_t mt, int64_t nb,
                            int64_t i) {
  if (f.band) {
    // i - j = base + 8 (i / 2) - 8 nb - i % 2; column - 2 quad =
    // 8 nb + i % 2.
    int64_t column = 8 * nb + i % 2;
    auto test = [&](arith::CmpIPredicate p, Value x, int64_t c) {
      return arith::CmpIOp::create(b, loc, p, x, i32(c));
    };
    using P = arith::CmpIPredicate;
    // (A whole tile, its key count the constant block-n, tests no column
    // against it.)
    Value keep = getConstantIntValue(f.kn) == f.bn
                     ? Value()
                     : test(P::sgt, f.columnsLeft, column);
    auto both = [&](Value test) {
      return keep ? Value(arith::AndIOp::create(b, loc, keep, test)) : test;
    };
    // (nsw: lengths below 2^30 keep it exact, and LLVM then folds the
    // add into the compare's immediate.)
    Value d =
        arith::AddIOp::create(b, loc, f.bandBase[mt], i32(8 * (i / 2) - column),
                              arith::IntegerOverflowFlags::nsw);
    if (f.band->lo)
      keep = both(test(P::sge, d, *f.band->lo));
    if (f.band->hi)
      keep = both(test(P::sle, d, *f.band->hi));
    return keep;
  }
  OnlineStepOp step = f.step;
  // A whole tile (its key count the constant block-n) keeps every column.
  if (getConstantIntValue(f.kn) == f.bn)
    return step.getMask().empty()
               ? arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1)
               : maskOf(f, mt, nb, i);
  Value col = elementIndices(f, mt, nb, i).first;
  Value keep = cmpI(arith::CmpIPredicate::slt, col, f.kn);
  if (!step.getMask().empty())
    keep = arith::AndIOp::create(b, loc, keep, maskOf(f, mt, nb, i));
  return keep;
}

MmaSyncEmitter::TileVote MmaSyncEmitter::voteOnTile(const StepFrame &f) {
  // K's copies (the older groups in flight) are done. (A wait counts
  // groups; its token only names one of them.) A mask whose kept tiles no
  // bound describes (it reads data, or matches no known shape) is
  // evaluated first on the whole tile, and a tile where no thread keeps an
  // element skips the products and the softmax -- for document masks, most
  // tiles.
  TileVote vote;
  if (blockMask.memref && votesOnTiles()) {
    // The block mask says it: skip empty tiles, evaluate the mask on
    // partial ones only.
    Value tile = memref::LoadOp::create(
        b, loc, blockMask.memref,
        blockMask.indices(b, loc, f.b0, f.h0, f.q0, f.k0));
    waitForStep();
    auto is = [&](BlockMask::Tile t) {
      return tileIs(arith::CmpIPredicate::eq, t, tile);
    };
    if (!keptTilesOnly)
      vote.anyKept = arith::XOrIOp::create(
          b, loc, is(BlockMask::Empty),
          arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1));
    vote.partial = is(BlockMask::Partial);
  } else if (votesOnTiles()) {
    // The barrier after the wait also ORs every thread's "some element
    // kept".
    Value any = arith::ConstantIntOp::create(b, loc, 0, 1);
    for (int64_t mt = 0; mt < mTiles; ++mt)
      for (int64_t nb = 0; nb < f.blocks; ++nb)
        for (int64_t i = 0; i < 4; ++i)
          any = arith::OrIOp::create(b, loc, any, keeps(f, mt, nb, i));
    copies::waitGroups(b, loc, valueGroup, pendingAtStep());
    publishCopies();
    Value ballot = NVVM::BarrierOp::create(
                       b, loc, b.getI32Type(), Value(), Value(),
                       NVVM::BarrierReductionAttr::get(
                           b.getContext(), NVVM::BarrierReduction::OR),
                       arith::ExtUIOp::create(b, loc, b.getI32Type(), any))
                       .getRes();
    vote.anyKept =
        cmpI(arith::CmpIPredicate::ne, ballot,
             arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0));
  } else {
    waitForStep();
  }
  return vote;
}

scf::IfOp MmaSyncEmitter::enterKeptTile(const StepFrame &f, Value anyKept) {
  SmallVector<Type> types(f.state.size(), b.getF32Type());
  auto skip =
      scf::IfOp::create(b, loc, types, anyKept, /*withElseRegion=*/true);
  // A skipped tile still prefetches the next K and lets V land, as the
  // computing path does, so that the copy groups stay in step.
  b.setInsertionPointToStart(&skip.getElseRegion().front());
  prefetchNextKey(f.bn);
  waitForValues();
  scf::YieldOp::create(b, loc, f.state);
  b.setInsertionPointToStart(&skip.getThenRegion().front());
  keyGroupsInFlight = 0;
  valuesLanded = false;
  return skip;
}

void MmaSyncEmitter::planLogits(StepFrame &f) {
  // Per element: scale, score region, mask region (and the tile's end); a
  // dropped element becomes -inf under softmax. Softmax takes the row max
  // before the exponent's positive factor (`factor`), which then folds
  // into the exponent (one fma per element): without a score region and
  // with a positive scale, the raw scores' max and scale * log2 e; after a
  // score region, its logits' max and log2 e.
  OnlineStepOp step = f.step;
  f.scale = SmallVector<double>(step.getScale());
  f.factor.assign(f.branches, 0.0);
  f.rawMax.assign(f.branches, false);
  for (unsigned r = 0; r < f.branches; ++r) {
    if (f.softmax && step.getScore().empty())
      f.scale[r] *= kLog2e;
    f.rawMax[r] = f.softmax && step.getScore().empty() && f.scale[r] > 0;
    if (f.rawMax[r])
      f.factor[r] = f.scale[r];
    else if (f.softmax && !step.getScore().empty())
      f.factor[r] = kLog2e;
  }
  f.newMax.resize(f.branches);
  f.newSum.resize(f.branches);
  f.newAcc.resize(f.branches);
  // A score region that gathers per element (a bias table): what does not
  // depend on the logits (the loads, index math) runs before the S
  // products, which then hide its latency (`early`). Terms of j - i only
  // (a relative-position bias): read from a table this warp fills for the
  // tile (fillRelativeTable).
  if (relativeTable)
    f.relative = relativeTerms(step.getScore(), f.branches);
  if (f.relative)
    f.tableBase = fillRelativeTable(step, f.relative, f.b0, f.h0, f.q0, f.k0,
                                    f.lastRow, f.lastKey, f.bn);
  // Staged reads are shared-memory loads: read after S, they hold no
  // registers during the product.
  f.staged = !stagedTiles.empty();
  SmallVector<tensor::ExtractOp> fromShared;
  if (f.staged) {
    fromShared = stagedTileReads(step.getScore(), f.branches);
    fromShared.truncate(std::min(fromShared.size(), stagedTiles.size()));
  }
  f.early = !step.getScore().empty() && !f.relative &&
            gathersPerElement(step.getScore(), fromShared);
}

void MmaSyncEmitter::emitBranchGroup(StepFrame &f,
                                     ArrayRef<SmallVector<unsigned>> groups,
                                     size_t g, Value partial) {
  ArrayRef<unsigned> group = groups[g];
  // The score region's inputs: the gathers before S, or the table's terms
  // and staged reads after S (they need no latency hidden, nor registers
  // during the product).
  SmallVector<IRMapping> pre;
  if (f.early)
    pre = scoreRegionInputs(f);
  SmallVector<Fragments> s = scoreProducts(f, groups, g);
  // Every warp has read the K tiles: prefetch the next tile's so that
  // their load overlaps the softmax and P V.
  if (g + 1 == groups.size())
    prefetchNextKey(f.bn);
  if (f.relative || (f.staged && !f.early))
    pre = scoreRegionInputs(f);
  // The mask of every element, evaluated on partial tiles only (a full
  // tile keeps every element); once per step.
  if (partial && f.maskBits.empty())
    maskPartialTile(f, partial);
  Fragments kept = applyScoreAndMask(f, group, s, pre);
  bool lastGroup = g + 1 == groups.size();
  std::optional<unsigned> keySide = keySideIn(f, group);
  if (group.size() == 1 && !keySide) {
    weighAndAccumulate(f, group[0], s[group[0]], kept, lastGroup);
    return;
  }
  // Several branches: every weight first, then the P Vs back to back.
  SmallVector<SmallVector<Value>> alpha;
  SmallVector<const Fragments *> weights;
  for (unsigned r : group) {
    alpha.push_back(weigh(f, r, s[r], kept));
    weights.push_back(&s[r]);
  }
  groupWeighed(weights, f.bn);
  if (keySide)
    stageKeySide(f, s[*keySide]);
  for (auto [i, r] : llvm::enumerate(group))
    accumulate(f, r, s[r], alpha[i], lastGroup && r == group.back());
  if (keySide)
    keySideProduct(f, *keySide);
}

SmallVector<IRMapping> MmaSyncEmitter::scoreRegionInputs(const StepFrame &f) {
  OnlineStepOp step = f.step;
  SmallVector<IRMapping> pre;
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t nb = 0; nb < f.blocks; ++nb)
      for (int64_t i = 0; i < 4; ++i) {
        auto [col, indices] = elementIndices(f, mt, nb, i);
        if (f.relative) {
          pre.push_back(
              readRelativeTable(f.relative, f.tableBase, f.bn, mt, i, col));
          continue;
        }
        IRMapping m;
        readStaged(m, step, mt, i, col);
        pre.push_back(f.early
                          ? inlineIndependent(step.getScore(), f.branches,
                                              indices, step.getCaptures(), m)
                          : m);
      }
  return pre;
}

SmallVector<MmaSyncEmitter::Fragments> MmaSyncEmitter::scoreProducts(
    const StepFrame &f, ArrayRef<SmallVector<unsigned>> groups, size_t g) {
  OnlineStepOp step = f.step;
  SmallVector<Fragments> s(f.branches);
  for (unsigned r : groups[g]) {
    // The branch whose tiles the product reads, and the one whose S follows
    // (another group's), for this product only.
    llvm::SaveAndRestore<unsigned> current(branch, r);
    std::optional<unsigned> next;
    if (r == groups[g].back() && g + 1 < groups.size())
      next = groups[g + 1].front();
    llvm::SaveAndRestore<std::optional<unsigned>> following(nextScoreBranch,
                                                            next);
    s[r] = scoreProduct(lanes.lookup(step.getQueries()[r]),
                        headDim(step.getKeys()[r]), f.bn);
  }
  return s;
}

void MmaSyncEmitter::maskPartialTile(StepFrame &f, Value partial) {
  SmallVector<Type> types(mTiles * f.blocks * 4, b.getI1Type());
  auto ifPartial =
      scf::IfOp::create(b, loc, types, partial, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifPartial.getThenRegion().front());
  SmallVector<Value> bits;
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t nb = 0; nb < f.blocks; ++nb)
      for (int64_t i = 0; i < 4; ++i)
        bits.push_back(maskOf(f, mt, nb, i));
  scf::YieldOp::create(b, loc, bits);
  b.setInsertionPointToStart(&ifPartial.getElseRegion().front());
  scf::YieldOp::create(
      b, loc,
      SmallVector<Value>(types.size(), arith::ConstantIntOp::create(
                                           b, loc, b.getI1Type(), 1)));
  f.maskBits.assign(ifPartial.getResults().begin(),
                    ifPartial.getResults().end());
}

MmaSyncEmitter::Fragments
MmaSyncEmitter::applyScoreAndMask(const StepFrame &f, ArrayRef<unsigned> group,
                                  MutableArrayRef<Fragments> s,
                                  ArrayRef<IRMapping> pre) {
  OnlineStepOp step = f.step;
  Fragments kept(mTiles, SmallVector<SmallVector<Value>>(f.blocks));
  SmallVector<Value> termSums;
  // Row terms' sums per row this thread holds: [mt][i / 2].
  SmallVector<SmallVector<Value>> rowSums(mTiles * 2);
  std::pair<SmallVector<Value>, Value> pairFirst;
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t nb = 0; nb < f.blocks; ++nb)
      for (int64_t i = 0; i < 4; ++i) {
        SmallVector<Value> terms;
        // The score region sees every branch's logit; those of other
        // groups (whose logits it does not read) as 0.
        SmallVector<Value> x(f.branches, Value());
        for (unsigned r : group)
          x[r] = f.rawMax[r] ? s[r][mt][nb][i]
                             : mulLogit(s[r][mt][nb][i], f32(f.scale[r]));
        if (!step.getScore().empty()) {
          for (Value &v : x)
            if (!v)
              v = f32(0);
          // The logits feed weights rounded to 16 bits: the region's
          // divisions and functions may be approximate (see
          // approximateFunctions).
          llvm::SaveAndRestore<bool> approximate(approximateFunctions, true);
          SmallVector<Value> logits = inlineRegion(
              step.getScore(), x, elementIndices(f, mt, nb, i).second,
              step.getCaptures(),
              pre.empty() ? nullptr : &pre[(mt * f.blocks + nb) * 4 + i]);
          for (unsigned r : group)
            x[r] = f.softmax ? floorLogit(logits[r]) : logits[r];
          terms.assign(logits.begin() + f.branches, logits.end());
        }
        Value keep = keeps(f, mt, nb, i);
        for (unsigned r : group)
          s[r][mt][nb][i] = f.softmax ? select(keep, x[r], f32(kNegInf)) : x[r];
        kept[mt][nb].push_back(keep);
        if (terms.empty())
          continue;
        // Elements i and i + 1 (even i) are columns 2 quad and 2 quad + 1
        // of one row: where no bound applies, a term that keeps every dim
        // goes out as one 8-byte store of both (half the store requests).
        Value bounds = inBounds(f, mt, nb, i);
        addTerms(step, terms, elementIndices(f, mt, nb, i).second, keep, bounds,
                 &termSums, /*skipStored=*/!bounds, &rowSums[mt * 2 + i / 2]);
        if (bounds)
          continue;
        if (i % 2 == 0) {
          pairFirst = {terms, keep};
          continue;
        }
        storeTermPairs(step, pairFirst.first, terms, pairFirst.second, keep,
                       elementIndices(f, mt, nb, i - 1).second);
      }
  if (!termSums.empty())
    flushTerms(step, termSums, {f.b0, f.h0, f.q0, f.k0});
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t half = 0; half < 2 && !rowSums[mt * 2 + half].empty(); ++half)
      flushRowTerms(step, rowSums[mt * 2 + half],
                    elementIndices(f, mt, 0, 2 * half).second);
  return kept;
}

void MmaSyncEmitter::flushRowTerms(OnlineStepOp step, ArrayRef<Value> partials,
                                   ArrayRef<Value> indices) {
  if (llvm::none_of(partials, [](Value x) { return bool(x); }))
    return;
  // Lanes 4 r .. 4 r + 3 hold row r's columns: the quad's first adds.
  Value first = cmpI(arith::CmpIPredicate::eq,
                     arith::RemUIOp::create(b, loc, lane, idx(4)), idx(0));
  SmallVector<Value> sums;
  for (Value partial : partials)
    sums.push_back(partial ? quadReduce(partial, /*isMax=*/false) : Value());
  auto guard = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  for (auto [e, sum] : llvm::enumerate(sums)) {
    if (!sum)
      continue;
    SmallVector<Value> at;
    for (int64_t d :
         cast<DenseI64ArrayAttr>(step.getTermDimsAttr()[e]).asArrayRef())
      at.push_back(indices[d]);
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, sum,
                                termOuts[e], at);
  }
}

void MmaSyncEmitter::storeTermPairs(OnlineStepOp step, ValueRange first,
                                    ValueRange second, Value keepFirst,
                                    Value keepSecond, ArrayRef<Value> indices) {
  auto pairType = VectorType::get({2}, b.getF32Type());
  for (unsigned e = 0; e < first.size(); ++e) {
    if (!termStored(step, e))
      continue;
    // A masked element stores 0 (its value may be anything, inf included).
    Value pair = vector::FromElementsOp::create(
        b, loc, pairType,
        ValueRange{select(keepFirst, first[e], f32(0)),
                   select(keepSecond, second[e], f32(0))});
    vector::StoreOp::create(b, loc, pair, termOuts[e], indices,
                            /*nontemporal=*/false, llvm::Align(8));
  }
}

Value MmaSyncEmitter::inBounds(const StepFrame &f, int64_t mt, int64_t nb,
                               int64_t i) {
  if (alignedLengths)
    return Value();
  // A partial tile's rows and keys past the lengths: elementIndices clamps
  // them to the last ones, where their (masked, zero) terms must not land.
  // (Static lengths that whole tiles divide have none.)
  OnlineStepOp step = f.step;
  int64_t m =
      cast<MemRefType>(views.lookup(step.getQueries()[0]).memref.getType())
          .getDimSize(2);
  Value row;
  if (ShapedType::isDynamic(m) || m % blockM)
    row = cmpI(arith::CmpIPredicate::sle, rowOf(f.q0, mt, i), f.lastRow);
  if (getConstantIntValue(f.kn) == f.bn)
    return row;
  Value col =
      cmpI(arith::CmpIPredicate::slt, elementIndices(f, mt, nb, i).first, f.kn);
  return row ? arith::AndIOp::create(b, loc, row, col).getResult() : col;
}

void MmaSyncEmitter::weighAndAccumulate(StepFrame &f, unsigned r, Fragments &s,
                                        const Fragments &kept, bool last) {
  SmallVector<Value> alpha = weigh(f, r, s, kept);
  accumulate(f, r, s, alpha, last);
}

SmallVector<Value> MmaSyncEmitter::weigh(StepFrame &f, unsigned r, Fragments &s,
                                         const Fragments &kept) {
  SmallVector<Value> alpha(f.rows, Value()), offset;
  if (f.softmax)
    updateRowMax(f, r, s, alpha, offset);
  SmallVector<Value> rowSum = rowWeights(f, r, s, kept, offset);
  if (f.softmax)
    for (int64_t row = 0; row < f.rows; ++row)
      f.newSum[r].push_back(add(mul(f.l[r][row], alpha[row]), rowSum[row]));
  return alpha;
}

void MmaSyncEmitter::accumulate(StepFrame &f, unsigned r, const Fragments &s,
                                ArrayRef<Value> alpha, bool last) {
  llvm::SaveAndRestore<bool> lastProduct(lastValueProduct, last);
  // value_columns: the branch weighs its own block of V's columns.
  int64_t dv = f.dv;
  ValueBlock block;
  if (!f.columns.empty()) {
    dv =
        cast<RankedTensorType>(f.step.getAccState()[r].getType()).getDimSize(3);
    block = {f.columns[r], f.dv};
  }
  llvm::SaveAndRestore<ValueBlock> ownBlock(valueBlock, block);
  f.newAcc[r] = valueProduct(s, f.acc[r], alpha, dv, f.bn);
}

void MmaSyncEmitter::updateRowMax(StepFrame &f, unsigned r, const Fragments &s,
                                  MutableArrayRef<Value> alpha,
                                  SmallVectorImpl<Value> &offset) {
  for (int64_t row = 0; row < f.rows; ++row) {
    int64_t mt = row / 2, half = row % 2;
    SmallVector<Value> row32;
    for (int64_t nb = 0; nb < f.blocks; ++nb)
      for (int64_t i = 2 * half; i < 2 * half + 2; ++i)
        row32.push_back(s[mt][nb][i]);
    Value rowMax =
        quadReduce(pairwise(row32,
                            [&](Value x, Value y) -> Value {
                              return arith::MaximumFOp::create(b, loc, x, y);
                            }),
                   true);
    if (f.factor[r])
      rowMax = mul(rowMax, f32(f.factor[r]));
    Value mNew = arith::MaximumFOp::create(b, loc, f.m[r][row], rowMax);
    // 1 when the max did not move (also while it is -inf).
    alpha[row] = select(cmpF(arith::CmpFPredicate::OEQ, f.m[r][row], mNew),
                        f32(1), exp2Ftz(sub(f.m[r][row], mNew)));
    f.newMax[r].push_back(mNew);
    // 0 for a row with no kept key yet, so that exp2(-inf - offset) is 0
    // rather than NaN.
    offset.push_back(select(cmpF(arith::CmpFPredicate::OEQ, mNew, f32(kNegInf)),
                            f32(0), mNew));
  }
}

SmallVector<Value> MmaSyncEmitter::rowWeights(const StepFrame &f, unsigned r,
                                              Fragments &s,
                                              const Fragments &kept,
                                              ArrayRef<Value> offset) {
  SmallVector<SmallVector<Value>> weights(f.rows);
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t nb = 0; nb < f.blocks; ++nb)
      for (int64_t i = 0; i < 4; ++i) {
        Value x = s[mt][nb][i], p;
        int64_t row = 2 * mt + i / 2;
        if (f.softmax) {
          Value scaled = f.factor[r] ? mul(x, f32(f.factor[r])) : x;
          p = exp2Ftz(sub(scaled, offset[row]));
          weights[row].push_back(p);
        } else {
          // Every other weight's reciprocal on the FMA pipe
          // (fmaReciprocals).
          Value w = f.normalizer == Normalizer::sigmoid
                        ? sigmoid(x, fmaReciprocals && i % 2)
                        : x;
          p = select(kept[mt][nb][i], w, f32(0));
        }
        s[mt][nb][i] = p;
      }
  // The sum stays a chain, after the row's exponentials: a pairwise sum ran
  // causal D = 64 at N = 2k 4 % slower (docs/decisions/021).
  SmallVector<Value> rowSum(f.rows, f32(0));
  for (auto [row, w] : llvm::enumerate(weights))
    for (Value p : w)
      rowSum[row] = add(rowSum[row], p);
  return rowSum;
}

SmallVector<Value> MmaSyncEmitter::newState(const StepFrame &f) {
  SmallVector<Value> next;
  for (auto *part : {&f.newMax, &f.newSum, &f.newAcc})
    for (const SmallVector<Value> &values : *part)
      llvm::append_range(next, values);
  return next;
}

void MmaSyncEmitter::pairEpilogueReads(attn::OnlineFinalizeOp fin,
                                       ArrayRef<Value> indices,
                                       MutableArrayRef<IRMapping> paired) {
  Block &block = fin.getEpilogue().front();
  unsigned first = fin.getNumBranches();
  IRMapping rm;
  mapIndicesAndCaptures(block, rm, first, indices, fin.getCaptures());
  block.walk([&](tensor::ExtractOp read) {
    auto type = cast<RankedTensorType>(read.getTensor().getType());
    if (type.getRank() == 0)
      return;
    int64_t width = type.getDimSize(type.getRank() - 1);
    auto arg = dyn_cast<BlockArgument>(read.getIndices().back());
    if (!isa<BlockArgument>(read.getTensor()) || !arg ||
        arg.getOwner() != &block || arg.getArgNumber() != first + 3 ||
        ShapedType::isDynamic(width) || width % 2)
      return;
    SmallVector<Value> ids;
    for (Value id : read.getIndices().drop_back()) {
      auto other = dyn_cast<BlockArgument>(id);
      if (auto c = id.getDefiningOp<arith::ConstantOp>())
        ids.push_back(arith::ConstantOp::create(b, loc, c.getValue()));
      else if (other && other.getOwner() == &block &&
               other.getArgNumber() >= first &&
               other.getArgNumber() < first + 3)
        ids.push_back(rm.lookup(id));
      else
        return;
    }
    ids.push_back(rm.lookup(arg));
    Type element = type.getElementType();
    Value both = vector::LoadOp::create(
        b, loc, VectorType::get({2}, element), rm.lookup(read.getTensor()), ids,
        /*nontemporal=*/false,
        llvm::Align(2 * element.getIntOrFloatBitWidth() / 8));
    for (int64_t j = 0; j < 2; ++j)
      paired[j].map(read.getResult(),
                    vector::ExtractOp::create(b, loc, both, j).getResult());
  });
}

void MmaSyncEmitter::storeOutput(const FinalizeTarget &target, Value q0,
                                 ArrayRef<Value> pairs) {
  auto [out, outType, b0, h0] = target;
  int64_t dv = outType.getDimSize(3);
  llvm::Align pairAlign(outType.getElementTypeBitWidth() / 4);
  Value rows = dim(out, 2);
  const Value *pair = pairs.begin();
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t nd = 0; nd < dv / 8; ++nd)
      for (int64_t half = 0; half < 2; ++half, ++pair) {
        Value row = rowOf(q0, mt, 2 * half);
        auto guard = scf::IfOp::create(
            b, loc, cmpI(arith::CmpIPredicate::slt, row, rows));
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(&guard.getThenRegion().front());
        vector::StoreOp::create(
            b, loc, *pair, out,
            {b0, h0, row, addI(idx(8 * nd), mulI(quad(), 2))},
            /*nontemporal=*/false, pairAlign);
      }
}

LogicalResult MmaSyncEmitter::emitFinalize(OnlineFinalizeOp fin) {
  // The last step prefetched K tiles nobody reads: let them land.
  copies::waitGroups(b, loc, queryGroup, 0);
  bool softmax = fin.getNormalizer() == Normalizer::softmax;
  unsigned branches = fin.getNumBranches();
  FailureOr<FinalizeTarget> target = finalizeTarget(fin);
  if (failed(target))
    return failure();
  auto [out, outType, b0, h0] = *target;
  int64_t dv = outType.getDimSize(3);
  Value q0 = map.lookup(fin.getQueryOffset());
  Value rows = dim(out, 2);
  Value lastRow = arith::SubIOp::create(b, loc, rows, idx(1));

  // Per branch, the factor of each row that turns its accumulator into
  // o_r (and the row's LSE, when asked).
  int64_t rowCount = 2 * mTiles;
  SmallVector<SmallVector<Value>> outScale(
      branches, SmallVector<Value>(rowCount, f32(1)));
  for (unsigned r = 0; r < branches && softmax; ++r)
    for (int64_t row = 0; row < rowCount; ++row) {
      Value m = lanes.lookup(fin.getMaxState()[r])[row];
      Value l = quadReduce(lanes.lookup(fin.getSumState()[r])[row], false);
      Value lse;
      std::tie(outScale[r][row], lse) = normalizeRow(
          m, l,
          fin.getSinks().empty() ? Value() : memrefOf.lookup(fin.getSinks()[r]),
          h0);
      if (fin.getLse().empty())
        continue;
      Value at = rowOf(q0, row / 2, 2 * (row % 2));
      Value store = arith::AndIOp::create(
          b, loc, cmpI(arith::CmpIPredicate::slt, at, rows),
          cmpI(arith::CmpIPredicate::eq, quad(), idx(0)));
      auto guard = scf::IfOp::create(b, loc, store);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      memref::StoreOp::create(b, loc, lse, outputOf.lookup(fin.getLse()[r]),
                              {b0, h0, at});
    }

  // A thread holds columns (d, d + 1) of each of its rows: one pair per
  // (m16 tile, 8 columns, row half). The epilogue combines the branches'
  // o_r there (without one, the output is o_0).
  Type outElement = outType.getElementType();
  auto pairType = VectorType::get({2}, outElement);
  // o_r of the thread's elements, in (m16 tile, 8 columns, row half, j)
  // order; with value_columns, each column block's from its branch (the
  // others' entries null).
  SmallVector<int64_t> columns = valueColumnOffsets(fin.getAccState(), dv);
  auto output = [&](unsigned r) {
    int64_t first = columns.empty() ? 0 : columns[r] / 8;
    int64_t width =
        cast<RankedTensorType>(fin.getAccState()[r].getType()).getDimSize(3);
    int64_t perTile = width / 8 * 4;
    SmallVector<Value> o;
    for (int64_t mt = 0; mt < mTiles; ++mt)
      for (int64_t nd = 0; nd < dv / 8; ++nd)
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t j = 0; j < 2; ++j) {
            int64_t local = nd - first;
            if (local < 0 || local >= width / 8) {
              o.push_back(Value());
              continue;
            }
            o.push_back(mul(
                lanes.lookup(fin.getAccState()[r])[mt * perTile + 4 * local +
                                                   2 * half + j],
                outScale[r][2 * mt + half]));
          }
    return o;
  };
  SmallVector<SmallVector<Value>> outputs;
  for (unsigned r = 0; r < branches; ++r)
    outputs.push_back(output(r));
  SmallVector<Value> pairs;
  int64_t element = 0;
  for (int64_t mt = 0; mt < mTiles; ++mt)
    for (int64_t nd = 0; nd < dv / 8; ++nd)
      for (int64_t half = 0; half < 2; ++half) {
        Value row = rowOf(q0, mt, 2 * half);
        Value d = addI(idx(8 * nd), mulI(quad(), 2));
        SmallVector<Value, 2> pair;
        Value clamped = minI(row, lastRow);
        SmallVector<IRMapping, 2> paired(2);
        if (!fin.getEpilogue().empty())
          pairEpilogueReads(fin, {b0, h0, clamped, d}, paired);
        for (int64_t j = 0; j < 2; ++j, ++element) {
          SmallVector<Value> o;
          for (unsigned r = 0; r < branches; ++r)
            o.push_back(outputs[r][element]);
          // Without an epilogue: o_0, or the column block's own branch.
          Value value = *llvm::find_if(o, [](Value x) { return bool(x); });
          if (!fin.getEpilogue().empty()) {
            approximateFunctions = outElement.getIntOrFloatBitWidth() <= 16;
            value = inlineRegion(fin.getEpilogue(), o,
                                 {b0, h0, clamped, addI(d, idx(j))},
                                 fin.getCaptures(), &paired[j])[0];
            approximateFunctions = false;
          }
          if (value.getType() != outElement)
            value = arith::TruncFOp::create(b, loc, outElement, value);
          pair.push_back(value);
        }
        pairs.push_back(vector::FromElementsOp::create(b, loc, pairType, pair));
      }
  storeOutput(*target, q0, pairs);
  return success();
}

std::unique_ptr<KernelEmitter> flashlight::attn_to_gpu::createMmaSyncEmitter(
    OpBuilder &b, Location loc, const MmaTiles &tiles, KernelPlanAttr plan,
    const BlockMask &mask) {
  return std::make_unique<MmaSyncEmitter>(b, loc, tiles, plan, mask);
}
