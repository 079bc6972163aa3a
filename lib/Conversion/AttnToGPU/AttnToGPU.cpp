//===- AttnToGPU.cpp - Tiled attention to a GPU kernel --------------------===//
//
// The reference code generator. It follows the structure the tiling left in
// the IR -- the grid, the KV loop and its bounds, the full/partial split, the
// number of branches and states, the regions -- and emits per-warp code for
// each piece. Nothing here depends on which attention variant it is.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Conversion/Passes.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace flashlight {
#define GEN_PASS_DEF_ATTNTOGPU
#include "flashlight/Conversion/Passes.h.inc"
} // namespace flashlight

using namespace mlir;
using namespace flashlight::attn;

namespace {

constexpr int64_t kWarpSize = 32;
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

/// Lanes needed to hold `d` columns, `kWarpSize` at a time.
int64_t chunksOf(int64_t d) { return (d + kWarpSize - 1) / kWarpSize; }

/// Per-lane values of a state tensor: one for [1, 1, rows] (max, sum), one
/// per column chunk for [1, 1, rows, D] (accumulators).
int64_t laneCount(Type type) {
  auto t = cast<RankedTensorType>(type);
  return t.getRank() == 4 ? chunksOf(t.getDimSize(3)) : 1;
}

/// A slice of a kernel argument: the memref and the slice's offsets/sizes.
struct View {
  Value memref;
  SmallVector<Value> offsets, sizes;
};

class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// Kernel memref standing for a function argument or result tensor.
  DenseMap<Value, Value> memrefOf;
  /// Kernel memref each finalize result is stored to.
  DenseMap<Value, Value> outputOf;
  /// Values of the source IR (index math, constants) in the kernel.
  IRMapping map;
  Value lane, warp;

  /// Converts the ops of `block`, up to `stop` or the terminator.
  LogicalResult convertOps(Block &block, Operation *stop = nullptr) {
    for (Operation &op : block.without_terminator()) {
      if (&op == stop)
        break;
      if (failed(convertOp(op)))
        return failure();
    }
    return success();
  }

private:
  OpBuilder &b;
  Location loc;
  DenseMap<Value, View> views;
  /// Per-lane f32 values of state tensors and of Q tiles (held in registers).
  DenseMap<Value, SmallVector<Value>> lanes;

  //===--------------------------------------------------------------------===//
  // Small builders
  //===--------------------------------------------------------------------===//

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value addI(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value minI(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value exp2(Value x) { return math::Exp2Op::create(b, loc, x); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value cmpF(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value cmpI(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value dim(Value memref, int64_t d) {
    return memref::DimOp::create(b, loc, memref, d);
  }
  /// Column `lane + 32 * chunk`.
  Value column(int64_t chunk) { return addI(lane, idx(chunk * kWarpSize)); }

  /// Loads `memref[indices]` as f32.
  Value loadF32(Value memref, ValueRange indices) {
    Value v = memref::LoadOp::create(b, loc, memref, indices);
    if (v.getType().isF32())
      return v;
    return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  }

  /// Loads `memref[i0, i1, i2, col]` as f32, 0 for columns >= D.
  Value loadColumn(Value memref, Value i0, Value i1, Value i2, Value col,
                   int64_t d) {
    if (d % kWarpSize == 0)
      return loadF32(memref, {i0, i1, i2, col});
    Value clamped = minI(col, idx(d - 1));
    Value v = loadF32(memref, {i0, i1, i2, clamped});
    return select(cmpI(arith::CmpIPredicate::slt, col, idx(d)), v, f32(0));
  }

  /// Sum over the warp; every lane gets the result.
  Value warpSum(Value x) {
    for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
      auto shuffle = gpu::ShuffleOp::create(b, loc, x, offset, kWarpSize,
                                            gpu::ShuffleMode::XOR);
      x = add(x, shuffle.getShuffleResult());
    }
    return x;
  }

  /// The query row this warp owns, clamped into [0, M) so that idle warps of
  /// a partial tile read valid memory; stores are guarded separately.
  std::pair<Value, Value> rowOf(Value q0, Value rowsMemref) {
    Value row = addI(q0, warp);
    Value last = arith::SubIOp::create(b, loc, dim(rowsMemref, 2), idx(1));
    return {row, minI(row, last)};
  }

  /// Inlines a region of an attn op: `leading` then the four indices then
  /// the captures (as memrefs; tensor.extract becomes memref.load).
  SmallVector<Value> inlineRegion(Region &region, ValueRange leading,
                                  ArrayRef<Value> indices,
                                  ValueRange captures) {
    Block &block = region.front();
    IRMapping rm;
    unsigned i = 0;
    for (Value v : leading)
      rm.map(block.getArgument(i++), v);
    for (Value v : indices)
      rm.map(block.getArgument(i++), v);
    for (Value capture : captures)
      rm.map(block.getArgument(i++), memrefOf.lookup(capture));
    for (Operation &op : block.without_terminator()) {
      if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
        SmallVector<Value> ids;
        for (Value id : extract.getIndices())
          ids.push_back(rm.lookup(id));
        rm.map(
            extract.getResult(),
            memref::LoadOp::create(b, loc, rm.lookup(extract.getTensor()), ids)
                .getResult());
        continue;
      }
      b.clone(op, rm);
    }
    SmallVector<Value> out;
    for (Value v : block.getTerminator()->getOperands())
      out.push_back(rm.lookup(v));
    return out;
  }

  /// Flattens the per-lane values of `values`.
  SmallVector<Value> flatten(ValueRange values) {
    SmallVector<Value> flat;
    for (Value v : values)
      llvm::append_range(flat, lanes.lookup(v));
    return flat;
  }

  /// Distributes `flat` over `values` by their lane counts.
  void distribute(ValueRange values, ValueRange flat) {
    unsigned pos = 0;
    for (Value v : values) {
      int64_t n = laneCount(v.getType());
      lanes[v] = SmallVector<Value>(flat.slice(pos, n));
      pos += n;
    }
  }

  //===--------------------------------------------------------------------===//
  // Ops of the tiled form
  //===--------------------------------------------------------------------===//

  LogicalResult convertOp(Operation &op) {
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
    bool scalar =
        op.getNumRegions() == 0 &&
        llvm::all_of(op.getOperandTypes(),
                     [](Type t) { return t.isIntOrIndexOrFloat(); }) &&
        llvm::all_of(op.getResultTypes(),
                     [](Type t) { return t.isIntOrIndexOrFloat(); });
    if (!scalar)
      return op.emitError("attn-to-gpu: unsupported op in a tiled attention");
    b.clone(op, map);
    return success();
  }

  LogicalResult convertSlice(tensor::ExtractSliceOp slice) {
    Value memref = memrefOf.lookup(slice.getSource());
    if (!memref)
      return slice.emitError("attn-to-gpu: slice of a non-argument tensor");
    View view{memref, {}, {}};
    for (OpFoldResult ofr : slice.getMixedOffsets())
      view.offsets.push_back(materialize(ofr));
    for (OpFoldResult ofr : slice.getMixedSizes())
      view.sizes.push_back(materialize(ofr));
    views[slice.getResult()] = view;

    // Query tiles are loaded into registers once, here, outside the KV loop.
    bool isQuery = feedsQuery(slice.getResult());
    if (!isQuery)
      return success();
    int64_t d = slice.getType().getDimSize(3);
    auto [row, rowClamped] = rowOf(view.offsets[2], memref);
    (void)row;
    SmallVector<Value> regs;
    for (int64_t c = 0; c < chunksOf(d); ++c)
      regs.push_back(loadColumn(memref, view.offsets[0], view.offsets[1],
                                rowClamped, column(c), d));
    lanes[slice.getResult()] = regs;
    return success();
  }

  /// True if `v` (directly or through tensor.cast) is a step's query.
  static bool feedsQuery(Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      if (auto cast = dyn_cast<tensor::CastOp>(user))
        return feedsQuery(cast.getResult());
      auto step = dyn_cast<OnlineStepOp>(user);
      return step && llvm::is_contained(step.getQueries(), v);
    });
  }

  Value materialize(OpFoldResult ofr) {
    if (auto v = dyn_cast<Value>(ofr))
      return map.lookup(v);
    return idx(cast<IntegerAttr>(cast<Attribute>(ofr)).getInt());
  }

  LogicalResult convertFor(scf::ForOp loop) {
    SmallVector<Value> init = flatten(loop.getInitArgs());
    auto newLoop = scf::ForOp::create(b, loc, map.lookup(loop.getLowerBound()),
                                      map.lookup(loop.getUpperBound()),
                                      map.lookup(loop.getStep()), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(newLoop.getBody());
    map.map(loop.getInductionVar(), newLoop.getInductionVar());
    distribute(loop.getRegionIterArgs(), newLoop.getRegionIterArgs());
    if (failed(convertOps(*loop.getBody())))
      return failure();
    scf::YieldOp::create(
        b, loc, flatten(loop.getBody()->getTerminator()->getOperands()));
    b.setInsertionPointAfter(newLoop);
    distribute(loop.getResults(), newLoop.getResults());
    return success();
  }

  LogicalResult convertIf(scf::IfOp branch) {
    SmallVector<Type> types;
    for (Type t : branch.getResultTypes())
      types.append(laneCount(t), b.getF32Type());
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
      scf::YieldOp::create(
          b, loc, flatten(from->front().getTerminator()->getOperands()));
    }
    distribute(branch.getResults(), newIf.getResults());
    return success();
  }

  /// One KV tile: for each key, the logits of every branch (a warp-wide dot
  /// product), the score and mask regions, and the state update.
  LogicalResult emitStep(OnlineStepOp step) {
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
    (void)row;

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
    if (!step.getScore().empty()) {
      logits =
          inlineRegion(step.getScore(), logits, indices, step.getCaptures());
      if (softmax)
        for (Value &s : logits)
          s = mul(s, f32(kLog2e));
    }
    Value keep =
        step.getMask().empty()
            ? arith::ConstantIntOp::create(b, loc, 1, 1).getResult()
            : inlineRegion(step.getMask(), {}, indices, step.getCaptures())[0];

    SmallVector<Value> v;
    for (int64_t c = 0; c < numChunks; ++c)
      v.push_back(loadColumn(vView.memref, vView.offsets[0], vView.offsets[1],
                             addI(vView.offsets[2], j), column(c), dv));

    SmallVector<Value> maxOut, sumOut, accOut;
    for (unsigned r = 0; r < nb; ++r) {
      Value s = logits[r];
      ValueRange acc = accIn.slice(r * numChunks, numChunks);
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
    }
    SmallVector<Value> next = maxOut;
    llvm::append_range(next, sumOut);
    llvm::append_range(next, accOut);
    scf::YieldOp::create(b, loc, next);
    b.setInsertionPointAfter(keyLoop);
    distribute(step.getNewState(), keyLoop.getResults());
    return success();
  }

  /// Normalizes the state, applies the epilogue and stores the rows.
  LogicalResult emitFinalize(OnlineFinalizeOp fin) {
    unsigned nb = fin.getNumBranches();
    bool softmax = fin.getNormalizer() == Normalizer::softmax;
    Value out = outputOf.lookup(fin.getOutput());
    if (!out)
      return fin.emitError("attn-to-gpu: finalize result is not an output");
    auto outType = cast<MemRefType>(out.getType());
    int64_t dv = outType.getDimSize(3);
    int64_t numChunks = chunksOf(dv);
    Value b0 = map.lookup(fin.getBatchOffset());
    Value h0 = map.lookup(fin.getHeadOffset());
    auto [row, rowClamped] = rowOf(map.lookup(fin.getQueryOffset()), out);
    Value rowValid = cmpI(arith::CmpIPredicate::slt, row, dim(out, 2));
    const double negInf = -std::numeric_limits<double>::infinity();

    // o_r = acc_r * outScale_r
    SmallVector<SmallVector<Value>> branchOut(nb);
    for (unsigned r = 0; r < nb; ++r) {
      SmallVector<Value> acc = lanes.lookup(fin.getAccState()[r]);
      Value outScale = f32(1), lse;
      if (softmax) {
        Value m = lanes.lookup(fin.getMaxState()[r])[0];
        Value l = lanes.lookup(fin.getSumState()[r])[0];
        if (!fin.getSinks().empty()) {
          // The sink is one more key with logit sink[h] and value 0.
          // The state is in base 2 (see emitStep); so is the sink here.
          Value sink = mul(loadF32(memrefOf.lookup(fin.getSinks()[r]), {h0}),
                           f32(kLog2e));
          Value mNew = arith::MaximumFOp::create(b, loc, m, sink);
          Value alpha = exp2(sub(m, mNew));
          Value lNew = add(mul(l, alpha), exp2(sub(sink, mNew)));
          outScale = div(alpha, lNew);
          lse = mul(add(mNew, math::Log2Op::create(b, loc, lNew)), f32(kLn2));
        } else {
          // A row with no kept key has l = 0: output 0, LSE -inf.
          Value any = cmpF(arith::CmpFPredicate::OGT, l, f32(0));
          outScale = select(any, div(f32(1), l), f32(0));
          lse = select(any,
                       mul(add(m, math::Log2Op::create(b, loc, l)), f32(kLn2)),
                       f32(negInf));
        }
      }
      for (int64_t c = 0; c < numChunks; ++c)
        branchOut[r].push_back(mul(acc[c], outScale));
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

    for (int64_t c = 0; c < numChunks; ++c) {
      Value d = column(c);
      Value dClamped = dv % kWarpSize ? minI(d, idx(dv - 1)) : d;
      SmallVector<Value> outs;
      for (unsigned r = 0; r < nb; ++r)
        outs.push_back(branchOut[r][c]);
      Value value = fin.getEpilogue().empty()
                        ? outs[0]
                        : inlineRegion(fin.getEpilogue(), outs,
                                       {b0, h0, rowClamped, dClamped},
                                       fin.getCaptures())[0];
      Type elementType = outType.getElementType();
      if (elementType != value.getType())
        value = arith::TruncFOp::create(b, loc, elementType, value);
      Value valid = rowValid;
      if (dv % kWarpSize)
        valid = arith::AndIOp::create(
            b, loc, valid, cmpI(arith::CmpIPredicate::slt, d, idx(dv)));
      auto store = scf::IfOp::create(b, loc, valid);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&store.getThenRegion().front());
      memref::StoreOp::create(b, loc, value, out, {b0, h0, row, d});
    }
    return success();
  }
};

/// Converts one function whose body is a tiled attention.
LogicalResult convertFunction(func::FuncOp func, gpu::GPUModuleOp gpuModule,
                              scf::ForallOp forall) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ValueRange(ret.getOperands()) != ValueRange(forall.getResults()))
    return func.emitError("attn-to-gpu: the function must return exactly the "
                          "results of its attention (ops after the attention "
                          "are not supported yet)");
  auto blockM = forall->getAttrOfType<IntegerAttr>("attn.block_m");

  // Parameters: the function's tensors as memrefs, arguments then results.
  SmallVector<Type> params;
  auto toMemref = [](Type t) {
    auto tensor = cast<RankedTensorType>(t);
    return MemRefType::get(tensor.getShape(), tensor.getElementType());
  };
  for (Type t : func.getArgumentTypes())
    params.push_back(toMemref(t));
  for (Type t : func.getResultTypes())
    params.push_back(toMemref(t));

  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc = func.getLoc();
  auto kernel = gpu::GPUFuncOp::create(b, loc, func.getName(),
                                       b.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int64_t threads = blockM.getInt() * kWarpSize;
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  kernel->setAttr("flashlight.block_m", blockM);

  b.setInsertionPointToStart(&kernel.getBody().front());
  KernelEmitter emitter(b, loc);
  unsigned numArgs = func.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    emitter.memrefOf[func.getArgument(i)] = kernel.getArgument(i);
  // Each parallel_insert_slice names the output its source is stored to.
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = cast<tensor::ParallelInsertSliceOp>(op);
    auto dest = cast<BlockArgument>(insert.getDest());
    unsigned result = dest.getArgNumber() - forall.getRank();
    Value source = insert.getSource();
    while (auto cast = source.getDefiningOp<tensor::CastOp>())
      source = cast.getSource();
    emitter.outputOf[source] = kernel.getArgument(numArgs + result);
  }
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value warpSize = arith::ConstantIndexOp::create(b, loc, kWarpSize);
  emitter.warp = arith::DivUIOp::create(b, loc, tid, warpSize);
  emitter.lane = arith::RemUIOp::create(b, loc, tid, warpSize);
  gpu::Dimension dims[] = {gpu::Dimension::z, gpu::Dimension::y,
                           gpu::Dimension::x};
  for (auto [iv, d] : llvm::zip(forall.getInductionVars(), dims))
    emitter.map.map(iv, gpu::BlockIdOp::create(b, loc, d).getResult());

  // Values the loop nest uses from before the forall (sizes, constants).
  if (failed(emitter.convertOps(func.getBody().front(), forall)) ||
      failed(emitter.convertOps(*forall.getBody())))
    return failure();
  gpu::ReturnOp::create(b, loc);
  return success();
}

/// `math.absi x` -> `maxsi(x, 0 - x)`: convert-gpu-to-nvvm lowers float
/// math through libdevice, which has no integer abs.
struct ExpandAbsI : OpRewritePattern<math::AbsIOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::AbsIOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value zero = arith::ConstantOp::create(rewriter, loc,
                                           rewriter.getZeroAttr(op.getType()));
    Value neg = arith::SubIOp::create(rewriter, loc, zero, op.getOperand());
    rewriter.replaceOpWithNewOp<arith::MaxSIOp>(op, op.getOperand(), neg);
    return success();
  }
};

struct AttnToGPUPass : flashlight::impl::AttnToGPUBase<AttnToGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, scf::ForallOp>> work;
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<scf::ForallOp> foralls;
      func.walk([&](scf::ForallOp f) {
        if (f->hasAttr("attn.block_m"))
          foralls.push_back(f);
      });
      if (foralls.size() > 1) {
        func.emitError("attn-to-gpu: one attention per function is supported");
        return signalPassFailure();
      }
      if (!foralls.empty())
        work.push_back({func, foralls.front()});
    }
    if (work.empty())
      return;
    OpBuilder b(module.getBodyRegion());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    auto gpuModule =
        gpu::GPUModuleOp::create(b, module.getLoc(), "flashlight_kernels");
    for (auto [func, forall] : work) {
      if (failed(convertFunction(func, gpuModule, forall)))
        return signalPassFailure();
      func.erase();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandAbsI>(&getContext());
    if (failed(applyPatternsGreedily(gpuModule, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
