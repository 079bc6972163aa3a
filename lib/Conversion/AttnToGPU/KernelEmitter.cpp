//===- KernelEmitter.cpp - Walk a tiled attention into a kernel -----------===//
//
// The code-generator-independent half of the AttnToGPU emitters: the small
// builders that need more than a line, region inlining, and the walk over
// the ops of a tiled attention (KernelEmitter.h).
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

using namespace flashlight::attn_to_gpu;

LogicalResult KernelEmitter::convertOps(Block &block, Operation *stop) {
  for (Operation &op : block.without_terminator()) {
    if (&op == stop)
      break;
    if (failed(convertOp(op)))
      return failure();
  }
  return success();
}

Value KernelEmitter::pairwise(ArrayRef<Value> values,
                              llvm::function_ref<Value(Value, Value)> combine) {
  SmallVector<Value> level(values);
  while (level.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(combine(level[i], level[i + 1]));
    if (level.size() % 2)
      next.push_back(level.back());
    level = std::move(next);
  }
  return level.front();
}

Value KernelEmitter::exp2Ftz(Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, loc, x.getType(),
             b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"), ValueRange{x})
      .getResult(0);
}

Value KernelEmitter::reciprocalOnFma(Value y) {
  y = arith::MinimumFOp::create(b, loc, y, f32(1e30));
  Value bits = arith::BitcastOp::create(b, loc, b.getI32Type(), y);
  Value magic =
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0x7EF311C7);
  Value r = arith::BitcastOp::create(
      b, loc, b.getF32Type(), arith::SubIOp::create(b, loc, magic, bits));
  for (int step = 0; step < 2; ++step)
    r = add(r, mul(r, sub(f32(1), mul(y, r))));
  return r;
}

Value KernelEmitter::sigmoid(Value x, bool fmaReciprocal) {
  Value y = add(exp2Ftz(mulLogit(x, f32(-kLog2e))), f32(1));
  if (fmaReciprocal)
    return reciprocalOnFma(y);
  return LLVM::CallIntrinsicOp::create(
             b, loc, x.getType(), b.getStringAttr("llvm.nvvm.rcp.approx.ftz.f"),
             ValueRange{y})
      .getResult(0);
}

FailureOr<KernelEmitter::FinalizeTarget>
KernelEmitter::finalizeTarget(OnlineFinalizeOp fin) {
  Value out = outputOf.lookup(fin.getOutput());
  if (!out)
    return fin.emitError("attn-to-gpu: finalize result is not an output");
  return FinalizeTarget{out, cast<MemRefType>(out.getType()),
                        map.lookup(fin.getBatchOffset()),
                        map.lookup(fin.getHeadOffset())};
}

Value KernelEmitter::loadF32(Value memref, ValueRange indices) {
  Value v = memref::LoadOp::create(b, loc, memref, indices);
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
}

std::pair<Value, Value> KernelEmitter::normalizeRow(Value m, Value l,
                                                    Value sink, Value head) {
  if (sink) {
    Value s = mul(loadF32(sink, {head}), f32(kLog2e));
    Value mNew = arith::MaximumFOp::create(b, loc, m, s);
    Value alpha = exp2(sub(m, mNew));
    Value lNew = add(mul(l, alpha), exp2(sub(s, mNew)));
    return {div(alpha, lNew),
            mul(add(mNew, math::Log2Op::create(b, loc, lNew)), f32(kLn2))};
  }
  Value any = cmpF(arith::CmpFPredicate::OGT, l, f32(0));
  return {select(any, div(f32(1), l), f32(0)),
          select(any, mul(add(m, math::Log2Op::create(b, loc, l)), f32(kLn2)),
                 f32(-std::numeric_limits<double>::infinity()))};
}

Value KernelEmitter::warpSum(Value x) {
  for (int32_t offset = kThreadsPerWarp / 2; offset > 0; offset /= 2) {
    auto shuffle = gpu::ShuffleOp::create(b, loc, x, offset, kThreadsPerWarp,
                                          gpu::ShuffleMode::XOR);
    x = add(x, shuffle.getShuffleResult());
  }
  return x;
}

SmallVector<Value> KernelEmitter::inlineRegion(Region &region,
                                               ValueRange leading,
                                               ArrayRef<Value> indices,
                                               ValueRange captures,
                                               const IRMapping *pre) {
  Block &block = region.front();
  IRMapping rm = pre ? *pre : IRMapping();
  unsigned i = 0;
  for (Value v : leading)
    rm.map(block.getArgument(i++), v);
  mapIndicesAndCaptures(block, rm, i, indices, captures);
  for (Operation &op : block.without_terminator()) {
    if (pre && llvm::all_of(op.getResults(),
                            [&](Value r) { return pre->contains(r); }))
      continue;
    inlineOp(op, rm, leading.size());
  }
  SmallVector<Value> out;
  for (Value v : block.getTerminator()->getOperands())
    out.push_back(rm.lookup(v));
  return out;
}

IRMapping KernelEmitter::inlineIndependent(Region &region, unsigned numLeading,
                                           ArrayRef<Value> indices,
                                           ValueRange captures, IRMapping rm) {
  Block &block = region.front();
  mapIndicesAndCaptures(block, rm, numLeading, indices, captures);
  for (Operation &op : block.without_terminator())
    if (llvm::all_of(op.getOperands(),
                     [&](Value v) { return rm.contains(v); }) &&
        !llvm::all_of(op.getResults(), [&](Value r) { return rm.contains(r); }))
      inlineOp(op, rm, numLeading);
  return rm;
}

void KernelEmitter::mapIndicesAndCaptures(Block &block, IRMapping &rm,
                                          unsigned first,
                                          ArrayRef<Value> indices,
                                          ValueRange captures) {
  unsigned i = first;
  for (Value v : indices)
    rm.map(block.getArgument(i++), v);
  for (Value capture : captures)
    rm.map(block.getArgument(i++), memrefOf.lookup(capture));
}

/// Whether `op`'s results reach the region's results through float
/// arithmetic only: no user, transitively, compares them, converts them to
/// an integer or rounds them to an integral value, where a few ulp could
/// move a decision (a bucket index from floor(log(..))).
static bool feedsOnlyFloats(Operation &op) {
  SmallVector<Operation *> work = {&op};
  DenseSet<Operation *> seen;
  while (!work.empty()) {
    Operation *at = work.pop_back_val();
    if (!seen.insert(at).second)
      continue;
    for (Operation *user : at->getUsers()) {
      if (isa<arith::CmpFOp, arith::FPToSIOp, arith::FPToUIOp, math::FloorOp,
              math::CeilOp, math::RoundOp, math::RoundEvenOp, math::TruncOp>(
              user))
        return false;
      work.push_back(user);
    }
  }
  return true;
}

void KernelEmitter::inlineOp(Operation &op, IRMapping &rm,
                             unsigned numLeading) {
  Block &block = *op.getBlock();
  if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
    SmallVector<Value> ids;
    for (Value id : extract.getIndices())
      ids.push_back(rm.lookup(id));
    Value memref = rm.lookup(extract.getTensor());
    // Indexed by batch, head and constants only (ALiBi's slope[h]): one
    // load per kernel, not one per element and step.
    bool uniform = llvm::all_of(extract.getIndices(), [&](Value id) {
      auto arg = dyn_cast<BlockArgument>(id);
      return (arg && arg.getOwner() == &block &&
              (arg.getArgNumber() == numLeading ||
               arg.getArgNumber() == numLeading + 1)) ||
             id.getDefiningOp<arith::ConstantOp>();
    });
    Value hoisted = uniform ? loadOnce(memref, ids) : Value();
    rm.map(extract.getResult(),
           hoisted ? hoisted
                   : memref::LoadOp::create(b, loc, memref, ids).getResult());
    return;
  }
  // Approximate exponentials (an exponent's result below 2^-126 is 0 next
  // to the weights it joins) on ex2.approx.ftz itself: afn's exp2 is the
  // non-ftz ex2.approx, which scales subnormal results around the MUFU op.
  if (approximateFunctions && isa<math::ExpOp, math::Exp2Op>(op) &&
      op.getResult(0).getType().isF32() && feedsOnlyFloats(op)) {
    Value x = rm.lookup(op.getOperand(0));
    if (isa<math::ExpOp>(op))
      x = mulLogit(x, f32(kLog2e));
    rm.map(op.getResult(0), exp2Ftz(x));
    return;
  }
  flashlight::cloneForKernel(b, op, rm);
  // As nvcc does by default (-fmad=true), a product feeding a sum may
  // become one FMA: a bias term (ALiBi's slope * (j - i) + s) is one
  // instruction per element instead of two. Reassociation (kLogit) lets
  // the generator's constant factors around the region fold into it.
  if (op.getNumResults() == 1)
    if (auto math = rm.lookup(op.getResult(0))
                        .getDefiningOp<arith::ArithFastMathInterface>()) {
      arith::FastMathFlagsAttr flags = math.getFastMathFlagsAttr();
      arith::FastMathFlags added = kLogit;
      if (approximateFunctions && feedsOnlyFloats(op))
        added = added | arith::FastMathFlags::afn;
      math->setAttr(
          math.getFastMathAttrName(),
          arith::FastMathFlagsAttr::get(
              b.getContext(),
              (flags ? flags.getValue() : arith::FastMathFlags::none) | added));
    }
}

Value KernelEmitter::loadOnce(Value memref, ArrayRef<Value> ids) {
  for (auto &[key, loaded] : loadedOnce)
    if (key.front() == memref && ArrayRef<Value>(key).drop_front() == ids)
      return loaded;
  auto func =
      b.getInsertionBlock()->getParent()->getParentOfType<gpu::GPUFuncOp>();
  if (!func)
    return Value();
  Block *entry = &func.getBody().front();
  Operation *after = nullptr;
  SmallVector<Value> operands = {memref};
  llvm::append_range(operands, ids);
  for (Value id : operands) {
    if (id.getDefiningOp<arith::ConstantOp>())
      continue;
    if (auto arg = dyn_cast<BlockArgument>(id)) {
      if (arg.getOwner() != entry)
        return Value();
      continue;
    }
    Operation *def = id.getDefiningOp();
    if (def->getBlock() != entry)
      return Value();
    if (!after || after->isBeforeInBlock(def))
      after = def;
  }
  OpBuilder::InsertionGuard guard(b);
  if (after)
    b.setInsertionPointAfter(after);
  else
    b.setInsertionPointToStart(entry);
  SmallVector<Value> here;
  for (Value id : ids)
    here.push_back(id.getDefiningOp<arith::ConstantOp>()
                       ? b.clone(*id.getDefiningOp())->getResult(0)
                       : id);
  Value loaded = memref::LoadOp::create(b, loc, memref, here);
  SmallVector<Value> key = {memref};
  llvm::append_range(key, ids);
  loadedOnce.push_back({std::move(key), loaded});
  return loaded;
}

SmallVector<Value> KernelEmitter::flatten(ValueRange values) {
  SmallVector<Value> flat;
  for (Value v : values)
    llvm::append_range(flat, lanes.lookup(v));
  return flat;
}

SmallVector<Value> KernelEmitter::flattenInits(scf::ForOp loop) {
  SmallVector<Value> flat;
  for (auto [init, arg] :
       llvm::zip_equal(loop.getInitArgs(), loop.getRegionIterArgs()))
    if (!keySide.contains(arg))
      llvm::append_range(flat, lanes.lookup(init));
  return flat;
}

void KernelEmitter::distribute(ValueRange values, ValueRange flat) {
  unsigned pos = 0;
  for (Value v : values) {
    int64_t n = lanesOf(v);
    lanes[v] = SmallVector<Value>(flat.slice(pos, n));
    pos += n;
  }
}

LogicalResult KernelEmitter::convertOp(Operation &op) {
  if (auto d = dyn_cast<tensor::DimOp>(op)) {
    Value memref = memrefOf.lookup(d.getSource());
    if (!memref)
      return op.emitError("attn-to-gpu: dim of a non-argument tensor");
    map.map(d.getResult(),
            memref::DimOp::create(b, loc, memref, map.lookup(d.getIndex()))
                .getResult());
    return success();
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    return convertSlice(slice);
  if (auto cast = dyn_cast<tensor::CastOp>(op)) {
    // A whole argument as a tile: when one tile covers every key,
    // canonicalization folds the KV loop and the full slice away.
    if (Value memref = memrefOf.lookup(cast.getSource());
        memref && !views.count(cast.getSource())) {
      View view{memref, {}, {}};
      int64_t rank = cast.getType().getRank();
      for (int64_t d = 0; d < rank; ++d) {
        view.offsets.push_back(idx(0));
        view.sizes.push_back(memref::DimOp::create(b, loc, memref, d));
      }
      views[cast.getResult()] = view;
      return onSlice(cast.getResult(), view);
    }
    // Static/dynamic shape changes only: same data, same registers.
    if (views.count(cast.getSource()))
      views[cast.getResult()] = views.lookup(cast.getSource());
    if (lanes.count(cast.getSource()))
      lanes[cast.getResult()] = lanes.lookup(cast.getSource());
    return success();
  }
  if (isa<tensor::EmptyOp>(op))
    return success();
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    Value value = map.lookupOrNull(fill.value());
    if (!value)
      return op.emitError("attn-to-gpu: fill with a non-constant value");
    lanes[fill.getResult(0)] =
        SmallVector<Value>(laneCount(fill.getResult(0).getType()), value);
    return success();
  }
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return convertFor(loop);
  if (auto branch = dyn_cast<scf::IfOp>(op))
    return convertIf(branch);
  if (auto step = dyn_cast<OnlineStepOp>(op))
    return emitStep(step);
  if (auto fin = dyn_cast<OnlineFinalizeOp>(op))
    return emitFinalize(fin);
  bool scalar = op.getNumRegions() == 0 &&
                llvm::all_of(op.getOperandTypes(),
                             [](Type t) { return t.isIntOrIndexOrFloat(); }) &&
                llvm::all_of(op.getResultTypes(),
                             [](Type t) { return t.isIntOrIndexOrFloat(); });
  if (!scalar)
    return op.emitError("attn-to-gpu: unsupported op in a tiled attention");
  b.clone(op, map);
  return success();
}

LogicalResult KernelEmitter::convertSlice(tensor::ExtractSliceOp slice) {
  Value memref = memrefOf.lookup(slice.getSource());
  if (!memref)
    return slice.emitError("attn-to-gpu: slice of a non-argument tensor");
  View view{memref, {}, {}};
  for (OpFoldResult ofr : slice.getMixedOffsets())
    view.offsets.push_back(materialize(ofr));
  for (OpFoldResult ofr : slice.getMixedSizes())
    view.sizes.push_back(materialize(ofr));
  views[slice.getResult()] = view;

  return onSlice(slice.getResult(), view);
}

SmallVector<KernelEmitter::Role> KernelEmitter::rolesOf(Value v) {
  SmallVector<Role> roles;
  SmallVector<Value> work = {v};
  OnlineStepOp step;
  SmallVector<Value> same;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    same.push_back(x);
    for (Operation *user : x.getUsers()) {
      if (auto cast = dyn_cast<tensor::CastOp>(user))
        work.push_back(cast.getResult());
      else if (auto s = dyn_cast<OnlineStepOp>(user))
        step = s;
    }
  }
  if (!step)
    return roles;
  unsigned n = step.getNumBranches();
  for (Role::Kind kind : {Role::Query, Role::Key})
    for (unsigned r = 0; r < n; ++r)
      if (llvm::is_contained(same, kind == Role::Query ? step.getQueries()[r]
                                                       : step.getKeys()[r]))
        roles.push_back({kind, r, n});
  if (llvm::is_contained(same, step.getValue()))
    roles.push_back({Role::Values, 0, n});
  return roles;
}

Value KernelEmitter::materialize(OpFoldResult ofr) {
  if (auto v = dyn_cast<Value>(ofr))
    return map.lookup(v);
  return idx(cast<IntegerAttr>(cast<Attribute>(ofr)).getInt());
}

LogicalResult KernelEmitter::convertFor(scf::ForOp loop) {
  SmallVector<Value> init = flattenInits(loop);
  auto newLoop = scf::ForOp::create(b, loc, map.lookup(loop.getLowerBound()),
                                    map.lookup(loop.getUpperBound()),
                                    map.lookup(loop.getStep()), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(newLoop.getBody());
  map.map(loop.getInductionVar(), newLoop.getInductionVar());
  distribute(loop.getRegionIterArgs(), newLoop.getRegionIterArgs());
  loopLowerBounds.push_back(newLoop.getLowerBound());
  LogicalResult body = convertOps(*loop.getBody());
  loopLowerBounds.pop_back();
  if (failed(body))
    return failure();
  scf::YieldOp::create(b, loc,
                       flatten(loop.getBody()->getTerminator()->getOperands()));
  b.setInsertionPointAfter(newLoop);
  distribute(loop.getResults(), newLoop.getResults());
  return success();
}

LogicalResult KernelEmitter::convertIf(scf::IfOp branch) {
  SmallVector<Type> types;
  for (Value result : branch.getResults())
    types.append(lanesOf(result), b.getF32Type());
  auto newIf =
      scf::IfOp::create(b, loc, types, map.lookup(branch.getCondition()),
                        /*withElseRegion=*/true);
  for (auto [from, to] :
       {std::pair(&branch.getThenRegion(), &newIf.getThenRegion()),
        std::pair(&branch.getElseRegion(), &newIf.getElseRegion())}) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&to->front());
    if (failed(convertOps(from->front())))
      return failure();
    scf::YieldOp::create(b, loc,
                         flatten(from->front().getTerminator()->getOperands()));
  }
  distribute(branch.getResults(), newIf.getResults());
  return success();
}

void KernelEmitter::markKeySide(Operation *root) {
  SmallVector<Value> work;
  root->walk([&](Operation *op) {
    if (auto step = dyn_cast<OnlineStepOp>(op)) {
      if (step.getKeySide()) {
        work.push_back(step.getKeySide());
        work.push_back(step.getNewState()[step.getStateResults().size()]);
      }
      llvm::append_range(work, step.getTermState());
      llvm::append_range(work, step.getTermResults());
    }
    if (auto acc = dyn_cast<ParallelAccumulateOp>(op))
      work.push_back(acc.getSource());
  });
  // A loop's init, iteration argument, yielded value and result, and a
  // branch's yielded values and result, are one carried tensor.
  // (Not the loop's init, a zero fill that CSE may share with a state's:
  // flattenInits skips it by its iteration argument.)
  auto visitLoop = [&](scf::ForOp loop, unsigned i) {
    work.append({loop.getRegionIterArgs()[i], loop.getResult(i),
                 loop.getBody()->getTerminator()->getOperand(i)});
  };
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!keySide.insert(v).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      Operation *parent = arg.getOwner()->getParentOp();
      if (auto loop = dyn_cast<scf::ForOp>(parent); loop && arg.getArgNumber())
        visitLoop(loop, arg.getArgNumber() - 1);
    } else if (auto loop = v.getDefiningOp<scf::ForOp>()) {
      visitLoop(loop, cast<OpResult>(v).getResultNumber());
    } else if (auto branch = v.getDefiningOp<scf::IfOp>()) {
      unsigned i = cast<OpResult>(v).getResultNumber();
      work.append(
          {branch.thenYield().getOperand(i), branch.elseYield().getOperand(i)});
    }
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto acc = dyn_cast<ParallelAccumulateOp>(user))
        work.push_back(acc.getDest());
      if (auto yield = dyn_cast<scf::YieldOp>(user)) {
        if (auto loop = dyn_cast<scf::ForOp>(yield->getParentOp()))
          visitLoop(loop, use.getOperandNumber());
        if (auto branch = dyn_cast<scf::IfOp>(yield->getParentOp()))
          work.push_back(branch.getResult(use.getOperandNumber()));
      }
    }
  }
}

/// The dims term `e` of `step` keeps.
static ArrayRef<int64_t> termDimsOf(OnlineStepOp step, unsigned e) {
  return cast<DenseI64ArrayAttr>(step.getTermDimsAttr()[e]).asArrayRef();
}

/// `memref[indices] += x`, or `= x` with `store`.
static void addOrStore(OpBuilder &b, Location loc, Value x, Value memref,
                       ValueRange indices, bool store) {
  if (store)
    memref::StoreOp::create(b, loc, x, memref, indices);
  else
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, x, memref,
                                indices);
}

bool KernelEmitter::termStored(OnlineStepOp step, unsigned e) {
  return termDimsOf(step, e).size() == 4;
}

void KernelEmitter::addTerms(OnlineStepOp step, ValueRange values,
                             ArrayRef<Value> indices, Value keep,
                             Value inBounds, SmallVectorImpl<Value> *partials,
                             bool skipStored,
                             SmallVectorImpl<Value> *rowPartials) {
  if (partials)
    partials->resize(values.size());
  if (rowPartials)
    rowPartials->resize(values.size());
  for (auto [e, v] : llvm::enumerate(values)) {
    ArrayRef<int64_t> dims = termDimsOf(step, e);
    if (skipStored && dims.size() == 4)
      continue;
    // A masked element adds 0 (its value may be anything, inf included).
    Value x = select(keep, v, f32(0));
    bool keepsRow = llvm::is_contained(dims, 2),
         keepsKey = llvm::is_contained(dims, 3);
    SmallVectorImpl<Value> *sums =
        keepsKey ? nullptr : (keepsRow ? rowPartials : partials);
    if (sums) {
      if (inBounds)
        x = select(inBounds, x, f32(0));
      Value &sum = (*sums)[e];
      sum = sum ? add(sum, x) : x;
      continue;
    }
    SmallVector<Value> at;
    for (int64_t d : dims)
      at.push_back(indices[d]);
    bool store = dims.size() == 4;
    if (!inBounds) {
      addOrStore(b, loc, x, termOuts[e], at, store);
      continue;
    }
    auto guard = scf::IfOp::create(b, loc, inBounds, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    addOrStore(b, loc, x, termOuts[e], at, store);
  }
}

void KernelEmitter::flushTerms(OnlineStepOp step, ArrayRef<Value> partials,
                               ArrayRef<Value> indices) {
  for (auto [e, partial] : llvm::enumerate(partials)) {
    if (!partial)
      continue;
    Value sum = warpSum(partial);
    SmallVector<Value> at;
    for (int64_t d : termDimsOf(step, e))
      at.push_back(indices[d]);
    auto first =
        scf::IfOp::create(b, loc, cmpI(arith::CmpIPredicate::eq, lane, idx(0)),
                          /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    addOrStore(b, loc, sum, termOuts[e], at, /*store=*/false);
  }
}
