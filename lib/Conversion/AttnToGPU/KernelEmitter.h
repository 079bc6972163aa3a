//===- KernelEmitter.h - Walk a tiled attention into a kernel ---*- C++ -*-===//
//
// The structure of a tiled attention (attn-tile's output) is the same for
// every code generator: index math, slices of the arguments, the KV loop
// carrying the online state, the full/partial scf.if, the step and the
// finalize. KernelEmitter walks it and leaves to a subclass how state is
// distributed over threads, how slices are staged and how a step and the
// finalize compute. Private to the AttnToGPU conversion.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_KERNELEMITTER_H
#define FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_KERNELEMITTER_H

#include "flashlight/Conversion/HostToGPU.h"
#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"
#include "flashlight/Dialect/Attn/Analysis/KernelFacts.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <memory>

namespace flashlight::attn_to_gpu {

using namespace mlir;
using namespace flashlight::attn;

constexpr int64_t kThreadsPerWarp = 32;
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

/// A slice of a kernel argument: the memref and the slice's offsets/sizes.
struct View {
  Value memref;
  SmallVector<Value> offsets, sizes;
};

/// Walks a tiled attention and emits its kernel body; see the file comment.
class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  virtual ~KernelEmitter() = default;

  /// Kernel memref standing for a function argument or result tensor.
  DenseMap<Value, Value> memrefOf;
  /// Kernel memref each finalize result is stored to.
  DenseMap<Value, Value> outputOf;
  /// Values of the source IR (index math, constants) in the kernel.
  IRMapping map;
  /// This thread's lane, warp and index in the block.
  Value lane, warp, thread;

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

protected:
  /// Per-thread values a state tensor (or a register-held tile) takes.
  virtual int64_t laneCount(Type stateType) = 0;
  /// Called for every slice of an argument (`sliced`, a tensor of rank 4)
  /// once its view is known: stage it (registers, shared memory) as the
  /// code generator needs.
  virtual LogicalResult onSlice(Value sliced, const View &view) = 0;
  virtual LogicalResult emitStep(OnlineStepOp step) = 0;
  virtual LogicalResult emitFinalize(OnlineFinalizeOp fin) = 0;

  OpBuilder &b;
  Location loc;
  DenseMap<Value, View> views;
  /// Per-thread values of state tensors and of register-held tiles.
  DenseMap<Value, SmallVector<Value>> lanes;
  /// Lower bounds of the (converted) loops around the op being converted.
  SmallVector<Value> loopLowerBounds;

  //===--------------------------------------------------------------------===//
  // Small builders
  //===--------------------------------------------------------------------===//

  /// A score region's logit floored at -1e5 (a softmax's). A program's
  /// finite mask fill (finfo.min added to the scores) is otherwise beyond
  /// what the exp2 step takes: scaled by log2(e) it overflows to -inf (a row
  /// of them gives 0, not the program's mean of V), and near -1e30 the FMA
  /// `x * f - m * f` leaves a residual of ~1e23 (exp2 of it is inf, then
  /// inf * 0 = NaN). At -1e5 the residual is below 0.004 and exp2 of any
  /// floored logit beside a real one is 0; no real logit is that low.
  Value floorLogit(Value x) {
    return arith::MaximumFOp::create(b, loc, x, f32(-1e5));
  }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value addI(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value minI(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  /// The generator's own float arithmetic may contract into fma (as nvcc's
  /// default does); user regions keep their ops' flags.
  static constexpr arith::FastMathFlags kContract =
      arith::FastMathFlags::contract;
  /// A logit's chain (scale, score region, the exponent's factor) may also
  /// reassociate, so that its constant factors fold: sigmoid's
  /// (s * scale + bias) * -log2 e is one FFMA per logit instead of an FFMA
  /// and an FMUL. The row sums and rescales keep their order: nothing there
  /// folds.
  static constexpr arith::FastMathFlags kLogit =
      arith::FastMathFlags::contract | arith::FastMathFlags::reassoc;
  /// x * y in a logit's chain (kLogit).
  Value mulLogit(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, kLogit);
  }
  Value add(Value x, Value y) {
    return arith::AddFOp::create(b, loc, x, y, kContract);
  }
  Value mul(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, kContract);
  }
  Value sub(Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y, kContract);
  }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value exp2(Value x) { return math::Exp2Op::create(b, loc, x); }
  /// exp2 that flushes subnormal results to 0: one MUFU.EX2, where math.exp2
  /// (ex2.approx.f32) costs a compare and two predicated multiplies around it
  /// to scale subnormals. For softmax weights and rescales (exponents <= 0),
  /// anything below 2^-126 is 0 next to the row max's weight of 1.
  Value exp2Ftz(Value x) {
    return LLVM::CallIntrinsicOp::create(
               b, loc, x.getType(),
               b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f32"), ValueRange{x})
        .getResult(0);
  }
  /// 1 / (1 + 2^(-x log2 e)) with ex2.approx.ftz and rcp.approx.ftz: two
  /// MUFU instructions and an FMA, where math.exp and an IEEE division cost
  /// a dozen (the division's slow path included). Both approximations are
  /// within a few ulp; a large -x gives rcp(inf) = 0, a large x 1.
  /// 1 / y on the FMA pipe: a bit-trick estimate (0x7EF311C7 minus y's
  /// bits, within 5.1 %) and two Newton steps, within 6.6e-6 for y >= 1
  /// (checked over [1, 2^40] in f32). y is clamped to 1e30 first, so that
  /// y = inf gives about 0, as rcp.approx does.
  Value reciprocalOnFma(Value y) {
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
  /// 1 / (1 + 2^(-x log2 e)): ex2 and rcp on the MUFU pipe, or with
  /// `fmaReciprocal` the reciprocal on the FMA pipe (reciprocalOnFma).
  Value sigmoid(Value x, bool fmaReciprocal = false) {
    Value y = add(exp2Ftz(mulLogit(x, f32(-kLog2e))), f32(1));
    if (fmaReciprocal)
      return reciprocalOnFma(y);
    return LLVM::CallIntrinsicOp::create(
               b, loc, x.getType(),
               b.getStringAttr("llvm.nvvm.rcp.approx.ftz.f"), ValueRange{y})
        .getResult(0);
  }
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

  /// Where a finalize stores: the output memref and the (batch, head)
  /// offsets of its block.
  struct FinalizeTarget {
    Value out;
    MemRefType type;
    Value b0, h0;
  };
  FailureOr<FinalizeTarget> finalizeTarget(OnlineFinalizeOp fin) {
    Value out = outputOf.lookup(fin.getOutput());
    if (!out)
      return fin.emitError("attn-to-gpu: finalize result is not an output");
    return FinalizeTarget{out, cast<MemRefType>(out.getType()),
                          map.lookup(fin.getBatchOffset()),
                          map.lookup(fin.getHeadOffset())};
  }
  /// Loads `memref[indices]` as f32.
  Value loadF32(Value memref, ValueRange indices) {
    Value v = memref::LoadOp::create(b, loc, memref, indices);
    if (v.getType().isF32())
      return v;
    return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  }

  /// Final normalization of one softmax row from its base-2 state (max `m`,
  /// sum `l`): the factor that turns the accumulator into the output, and
  /// the natural-log LSE. With `sink` (a [H] memref read at `head`), the
  /// sink is one more key with that logit and value 0; without, a row with no
  /// kept key (l = 0) gives output 0 and LSE -inf.
  std::pair<Value, Value> normalizeRow(Value m, Value l, Value sink,
                                       Value head) {
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

  /// Sum over the warp; every lane gets the result.
  Value warpSum(Value x) {
    for (int32_t offset = kThreadsPerWarp / 2; offset > 0; offset /= 2) {
      auto shuffle = gpu::ShuffleOp::create(b, loc, x, offset, kThreadsPerWarp,
                                            gpu::ShuffleMode::XOR);
      x = add(x, shuffle.getShuffleResult());
    }
    return x;
  }

  /// Inlines a region of an attn op: `leading` then the four indices then
  /// the captures (as memrefs; tensor.extract becomes memref.load). With
  /// `pre` (inlineIndependent's), the ops it holds are not cloned again.
  SmallVector<Value> inlineRegion(Region &region, ValueRange leading,
                                  ArrayRef<Value> indices, ValueRange captures,
                                  const IRMapping *pre = nullptr) {
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

  /// The ops of `region` that do not depend on its first `numLeading` block
  /// arguments (a score region's logits), inlined here: inlineRegion then
  /// completes them. A per-element gather (a bias table) issued before
  /// S = Q K^T has its latency hidden behind the product.
  /// Ops whose results `rm` already maps (reads from a staged tile) stay.
  IRMapping inlineIndependent(Region &region, unsigned numLeading,
                              ArrayRef<Value> indices, ValueRange captures,
                              IRMapping rm = IRMapping()) {
    Block &block = region.front();
    mapIndicesAndCaptures(block, rm, numLeading, indices, captures);
    for (Operation &op : block.without_terminator())
      if (llvm::all_of(op.getOperands(),
                       [&](Value v) { return rm.contains(v); }) &&
          !llvm::all_of(op.getResults(),
                        [&](Value r) { return rm.contains(r); }))
        inlineOp(op, rm, numLeading);
    return rm;
  }

  /// Maps a region's index then capture block arguments, from `first` on.
  void mapIndicesAndCaptures(Block &block, IRMapping &rm, unsigned first,
                             ArrayRef<Value> indices, ValueRange captures) {
    unsigned i = first;
    for (Value v : indices)
      rm.map(block.getArgument(i++), v);
    for (Value capture : captures)
      rm.map(block.getArgument(i++), memrefOf.lookup(capture));
  }

  /// Clones one op of a region whose first `numLeading` block arguments
  /// precede the indices.
  void inlineOp(Operation &op, IRMapping &rm, unsigned numLeading) {
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
        if (approximateFunctions)
          added = added | arith::FastMathFlags::afn;
        math->setAttr(math.getFastMathAttrName(),
                      arith::FastMathFlagsAttr::get(
                          b.getContext(), (flags ? flags.getValue()
                                                 : arith::FastMathFlags::none) |
                                              added));
      }
  }
  /// Set while inlining an epilogue whose result is stored in 16 bits:
  /// its divisions and math functions may be approximate (afn:
  /// div.approx.f32, __nv_fast_expf, ...). Their f32 errors (a few ulp;
  /// fast exp's grow with |x|, to ~1e-5 relative at |x| = 80) vanish in
  /// the store's rounding (2^-9 for bf16, 2^-12 for f16). Evoformer's gate,
  /// sigmoid(g) = 1 / (1 + exp(-g)), took an IEEE division (with its slow
  /// path) and an accurate exp per output element.
  bool approximateFunctions = false;

  /// `memref[ids]` loaded once where its indices are all defined, outside
  /// any loop (the kernel's entry block), and reused; null when an index is
  /// defined elsewhere. Captures are read-only inputs, so the load may move.
  Value loadOnce(Value memref, ArrayRef<Value> ids) {
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
  /// loadOnce's loads: ({memref, indices...}, value).
  SmallVector<std::pair<SmallVector<Value>, Value>> loadedOnce;

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

    return onSlice(slice.getResult(), view);
  }

  /// What a slice feeds in a step: the query or key of one of the step's
  /// `branches` logit branches, or the value.
  struct Role {
    enum Kind { Query, Key, Values } kind;
    unsigned branch, branches;
  };
  /// The roles of `v` (directly or through tensor.cast), queries first,
  /// then keys, then the value: one slice may feed several (a K shared by
  /// two branches; K and V of the same tensor, merged by CSE).
  static SmallVector<Role> rolesOf(Value v) {
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

  Value materialize(OpFoldResult ofr) {
    if (auto v = dyn_cast<Value>(ofr))
      return map.lookup(v);
    return idx(cast<IntegerAttr>(cast<Attribute>(ofr)).getInt());
  }

  virtual LogicalResult convertFor(scf::ForOp loop) {
    SmallVector<Value> init = flatten(loop.getInitArgs());
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
};

/// One warp per query row, lanes across the head dim; no tensor cores. The
/// reference code generator: correct for every program.
std::unique_ptr<KernelEmitter> createRowPerWarpEmitter(OpBuilder &b,
                                                       Location loc);

/// The shared-memory tiles of the tensor-core generator: one K tile per
/// logit branch and V ([block-n, D + 8]) and, when Q is read from shared
/// memory each step rather than held in registers, one Q tile per branch
/// ([block-m, D + 8]; else none).
struct MmaTiles {
  SmallVector<Value, 2> keys, queries;
  Value values;
  /// wgmma without a block-wide barrier per step: 4 mbarriers (i64) in
  /// shared memory, K/V buffer 0 and 1 full, then empty (with a producer,
  /// 8: those for K, then for V); else null.
  Value barriers;
  /// The relative-position tables (f32, [warp][buffer][term][position]),
  /// when the score region has RelativeTerms; else null.
  Value relative;
  /// wgmma: one tile per stagedTileReads() read, [2 * rows, block-n + 16
  /// bytes] (rows: block-m, or 1 for a row uniform over the block),
  /// double-buffered as K is; and those reads (of one of the
  /// kernel's steps: every step's score region reads the same).
  SmallVector<Value, 2> staged;
  SmallVector<tensor::ExtractOp, 2> stagedReads;
};

/// A block mask (BlockMask.cpp): an i8 buffer [B', H', M tiles, N tiles]
/// classifying each (query tile, KV tile) of a data-dependent mask once per
/// call, written by a pre-kernel and read by the attention kernel.
struct BlockMask {
  /// What a tile's byte says.
  enum Tile : int8_t { Empty = 0, Partial = 1, Full = 2 };
  /// The buffer, a parameter of the kernel being emitted.
  Value memref;
  /// Whether the mask reads `b` / `h` (else that dim is 1, read at 0).
  bool batch = false, heads = false;
  int64_t blockM = 0, blockN = 0;

  /// The byte's indices for the tile at (b0, h0, q0, k0).
  SmallVector<Value> indices(OpBuilder &b, Location loc, Value b0, Value h0,
                             Value q0, Value k0) const {
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    auto tile = [&](Value offset, int64_t size) -> Value {
      return arith::DivUIOp::create(
          b, loc, offset, arith::ConstantIndexOp::create(b, loc, size));
    };
    return {batch ? b0 : zero, heads ? h0 : zero, tile(q0, blockM),
            tile(k0, blockN)};
  }
};

/// The block mask `step` would use (without its memref): whether its mask
/// region reads `b` and `h`.
BlockMask blockMaskOf(OnlineStepOp step, int64_t blockM, int64_t blockN);

/// The pre-kernel's code generator: a block of `threads` threads per
/// (query tile, KV tile); block id x is `queryTile * N tiles + kvTile`.
/// `kvTile` is that KV tile's index.
std::unique_ptr<KernelEmitter>
createBlockMaskEmitter(OpBuilder &b, Location loc, const BlockMask &mask,
                       Value kvTile, int64_t threads);

/// Tensor cores (mma.sync m16n8k16, ldmatrix), warps of the plan's
/// warp_rows query rows. With `mask.memref`, a mask that votesOnTiles reads
/// the block mask instead.
std::unique_ptr<KernelEmitter>
createMmaSyncEmitter(OpBuilder &b, Location loc, const MmaTiles &tiles,
                     KernelPlanAttr plan, const BlockMask &mask);

/// Hopper warpgroup MMA (sm_90a): the mma.sync generator's structure with
/// both products on wgmma; one warpgroup (128 threads) per 64 query rows.
/// `tiles` are stored as 8x8 core matrices ([rows / 8 * D / 8, 64]); Q is
/// always in shared memory. The plan's loop form says whether the KV loop
/// is software-pipelined (each warpgroup's softmax of tile t overlaps its
/// P V of tile t - 1) or on mbarriers (with a producer warpgroup and turns),
/// and whether branches run one after the other issue the next one's S
/// before this one's softmax (lookahead).
std::unique_ptr<KernelEmitter>
createWgmmaEmitter(OpBuilder &b, Location loc, const MmaTiles &tiles,
                   KernelPlanAttr plan, const BlockMask &mask);

} // namespace flashlight::attn_to_gpu

#endif // FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_KERNELEMITTER_H
