//===- HostToGPU.cpp - What is not attention, as simple GPU kernels -------===//
//
// The reference path: every linalg.generic that attn-raise left in a
// function becomes one kernel with a thread per point of its parallel loops
// and its reductions run sequentially in that thread; a row reduction whose
// accumulators combine associatively (a norm's sum, a row max) takes a warp
// per point instead. Slow, but correct for any static generic, so a program
// that is not (only) attention still compiles.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Conversion/HostToGPU.h"
#include "flashlight/Conversion/Passes.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace flashlight {
#define GEN_PASS_DEF_HOSTTOGPU
#include "flashlight/Conversion/Passes.h.inc"
} // namespace flashlight

using namespace mlir;

SmallVector<Value> flashlight::hostKernelCaptures(linalg::GenericOp generic) {
  llvm::SetVector<Value> captures;
  // Scalar inputs (a fill's value) are captures too.
  for (Value in : generic.getInputs())
    if (auto extract = in.getDefiningOp<tensor::ExtractOp>())
      captures.insert(extract.getTensor());
  Region &region = generic.getRegion();
  region.walk([&](Operation *op) {
    for (Value operand : op->getOperands()) {
      if (region.isAncestor(operand.getParentRegion()))
        continue;
      if (isa<RankedTensorType>(operand.getType()))
        captures.insert(operand);
      else if (auto extract = operand.getDefiningOp<tensor::ExtractOp>())
        captures.insert(extract.getTensor());
    }
  });
  return captures.takeVector();
}

void flashlight::cloneForKernel(OpBuilder &b, Operation &op, IRMapping &map) {
  auto powi = dyn_cast<math::FPowIOp>(op);
  if (!powi || powi.getRhs().getType().isInteger(32)) {
    b.clone(op, map);
    return;
  }
  // torch-mlir writes x**2 with an i64 2; exponents beyond i32 are not
  // meaningful.
  Location loc = op.getLoc();
  Value n = arith::TruncIOp::create(b, loc, b.getI32Type(),
                                    map.lookupOrDefault(powi.getRhs()));
  map.map(powi.getResult(),
          math::FPowIOp::create(b, loc, map.lookupOrDefault(powi.getLhs()), n));
}

SmallVector<Value> flashlight::hostKernelParams(linalg::GenericOp generic) {
  SmallVector<Value> params;
  for (Value in : generic.getInputs())
    if (isa<RankedTensorType>(in.getType()))
      params.push_back(in);
  llvm::append_range(params, generic.getOutputs());
  llvm::append_range(params, generic.getResults());
  llvm::append_range(params, hostKernelCaptures(generic));
  return params;
}

namespace {

constexpr int32_t kWarpSize = 32;

/// `x` without a float widening on top of it.
Value unwiden(Value x) {
  if (auto ext = x.getDefiningOp<arith::ExtFOp>())
    return ext.getIn();
  return x;
}

/// The einsum of a contraction generic, `out += widen(a) * widen(b)` summed
/// over its reduction loops, each operand read through a projected
/// permutation of the loops (a matmul, a batched matmul, a projection):
/// e.g. "abd,cd->abc". A runtime may compute it with a library GEMM
/// instead of the kernel. None for any other generic, and for rows of dot
/// products (no loop that only one operand reads).
std::optional<std::string> einsumOf(linalg::GenericOp generic) {
  if (generic.getNumDpsInputs() != 2 || generic.getNumDpsInits() != 1 ||
      !llvm::all_of(
          generic.getDpsInputs(),
          [](Value v) { return isa<RankedTensorType>(v.getType()); }) ||
      generic.getNumReductionLoops() == 0 || generic.getNumLoops() > 26 ||
      !isa<FloatType>(getElementTypeOrSelf(generic.getResult(0).getType())))
    return std::nullopt;
  Block &body = generic.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || body.getOperations().size() > 5)
    return std::nullopt;
  Value acc = body.getArgument(2);
  Value product = add.getLhs() == acc   ? add.getRhs()
                  : add.getRhs() == acc ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return std::nullopt;
  Value x = unwiden(mul.getLhs()), y = unwiden(mul.getRhs());
  if (!((x == body.getArgument(0) && y == body.getArgument(1)) ||
        (x == body.getArgument(1) && y == body.getArgument(0))))
    return std::nullopt;
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  // A row of dot products (every loop either reduced or read by both
  // operands, as rowsum(dO * O)) is no GEMM: a library runs it as a batch
  // of 1 x 1 products, ~10x slower than the kernel's warp per row.
  auto readsLoop = [](AffineMap map, unsigned loop) {
    return map.isFunctionOfDim(loop);
  };
  bool hasFreeLoop = false;
  for (unsigned loop = 0; loop < generic.getNumLoops(); ++loop)
    hasFreeLoop |= readsLoop(maps[0], loop) != readsLoop(maps[1], loop);
  if (!hasFreeLoop)
    return std::nullopt;
  std::string text;
  for (auto [k, map] : llvm::enumerate(maps)) {
    if (!map.isProjectedPermutation(/*allowZeroInResults=*/false))
      return std::nullopt;
    text += k == 0 ? "" : k == 1 ? "," : "->";
    for (AffineExpr e : map.getResults())
      text += char('a' + cast<AffineDimExpr>(e).getPosition());
  }
  return text;
}

/// The constant a generic writes to every element of its single float
/// result (a generalized `linalg.fill`: parallel loops, no tensor read, the
/// body yielding a constant scalar), if it is one. Runtimes then make the
/// tensor where it is read, and a contraction into zeros skips its add.
std::optional<double> fillValueOf(linalg::GenericOp generic) {
  if (generic.getNumResults() != 1 || generic.getNumReductionLoops() != 0 ||
      !isa<FloatType>(getElementTypeOrSelf(generic.getResult(0).getType())))
    return std::nullopt;
  for (Value in : generic.getInputs())
    if (isa<ShapedType>(in.getType()))
      return std::nullopt;
  Value yielded = generic.getRegion().front().getTerminator()->getOperand(0);
  if (auto arg = dyn_cast<BlockArgument>(yielded);
      arg && arg.getArgNumber() < generic.getNumDpsInputs())
    yielded = generic.getInputs()[arg.getArgNumber()];
  FloatAttr value;
  // Finite only: a manifest (JSON) has no infinities.
  if (!matchPattern(yielded, m_Constant(&value)) ||
      !std::isfinite(value.getValueAsDouble()))
    return std::nullopt;
  return value.getValueAsDouble();
}

/// The permutation `perm` (result dim j is the input's dim perm[j], as
/// torch's `permute`) a generic applies to its single input, if all it does
/// is copy that input through a permuted map (a generalized
/// `linalg.transpose`: the gradient's transposed pair bias).
std::optional<SmallVector<int64_t>> permutationOf(linalg::GenericOp generic) {
  if (generic.getNumDpsInputs() != 1 || generic.getNumDpsInits() != 1 ||
      generic.getNumReductionLoops() != 0 ||
      generic.getRegion().front().getOperations().size() != 1)
    return std::nullopt;
  Value yielded = generic.getRegion().front().getTerminator()->getOperand(0);
  auto arg = dyn_cast<BlockArgument>(yielded);
  AffineMap in = generic.getIndexingMapsArray()[0],
            out = generic.getIndexingMapsArray()[1];
  if (!arg || arg.getArgNumber() != 0 || !out.isIdentity() ||
      !in.isPermutation() || in.isIdentity() ||
      !isa<ShapedType>(generic.getInputs()[0].getType()))
    return std::nullopt;
  SmallVector<int64_t> perm(in.getNumResults());
  for (auto [k, e] : llvm::enumerate(in.getResults()))
    perm[cast<AffineDimExpr>(e).getPosition()] = k;
  return perm;
}

RankedTensorType staticTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t : RankedTensorType();
}

/// Replaces `op` by a parallel generic over its static result type `type`
/// with no inputs: `element` builds the value at the loop indices (reading
/// operands with tensor.extract).
linalg::GenericOp replaceByGeneric(
    IRRewriter &rewriter, Operation *op, RankedTensorType type,
    function_ref<Value(OpBuilder &, Location, ArrayRef<Value>)> element) {
  rewriter.setInsertionPoint(op);
  Location loc = op->getLoc();
  Value empty = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                        type.getElementType());
  auto generic = linalg::GenericOp::create(
      rewriter, loc, type, ValueRange(), empty,
      rewriter.getMultiDimIdentityMap(type.getRank()),
      SmallVector<utils::IteratorType>(type.getRank(),
                                       utils::IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange) {
        SmallVector<Value> idx;
        for (int64_t d = 0; d < type.getRank(); ++d)
          idx.push_back(linalg::IndexOp::create(b, l, d));
        Value v = element(b, l, idx);
        linalg::YieldOp::create(b, l, v);
      });
  rewriter.replaceOp(op, generic.getResults());
  return generic;
}

/// Marks `generic`, which moves `sources` (operands of the op it replaced)
/// without arithmetic, as the copy `fields` describe (`kind` and its
/// parameters), naming each source by its place among the kernel's
/// parameters. Runtimes then copy natively (torch.cat, cuMemcpy2D, XLA)
/// instead of launching the one-thread-per-element kernel, which stays the
/// reference: the backward's [Q | dO] and its dK, dV slices took 0.4 ms a
/// call as kernels.
void markCopy(linalg::GenericOp generic, ValueRange sources,
              SmallVector<NamedAttribute> fields) {
  Builder b(generic.getContext());
  SmallVector<Value> params = flashlight::hostKernelParams(generic);
  SmallVector<int64_t> at;
  for (Value source : sources) {
    const Value *it = llvm::find(params, source);
    if (it == params.end())
      return; // Not a parameter (a constant folded in): no copy.
    at.push_back(it - params.begin());
  }
  fields.push_back(b.getNamedAttr("sources", b.getDenseI64ArrayAttr(at)));
  generic->setAttr("flashlight.copy", b.getDictionaryAttr(fields));
}

/// `extract_slice` as a generic whose body reads source element `offset +
/// d * stride` (tensor.extract of the captured source). Read as an input
/// through that map instead, the source would fix the loops' extents where
/// the map is a plain dim (a zero offset, stride 1: `x[..., :-1]`), and
/// those are the slice's, not the source's.
LogicalResult sliceToGeneric(IRRewriter &rewriter,
                             tensor::ExtractSliceOp slice) {
  RankedTensorType src = staticTensor(slice.getSource()),
                   dst = staticTensor(slice.getResult());
  if (!src || !dst || src.getRank() != dst.getRank() ||
      slice.getStaticOffsets().size() != (size_t)src.getRank() ||
      !slice.getOffsets().empty() || !slice.getStrides().empty() ||
      !slice.getSizes().empty())
    return slice.emitError("only static, rank-preserving slices are "
                           "supported on the reference path");
  Value source = slice.getSource();
  SmallVector<int64_t> offsets(slice.getStaticOffsets()),
      sizes(slice.getStaticSizes());
  bool unitStrides =
      llvm::all_of(slice.getStaticStrides(), [](int64_t s) { return s == 1; });
  linalg::GenericOp generic = replaceByGeneric(
      rewriter, slice, dst,
      [&](OpBuilder &b, Location l, ArrayRef<Value> idx) -> Value {
        SmallVector<Value> at;
        for (int64_t d = 0; d < src.getRank(); ++d) {
          Value stride =
              arith::ConstantIndexOp::create(b, l, slice.getStaticStrides()[d]);
          Value offset =
              arith::ConstantIndexOp::create(b, l, slice.getStaticOffsets()[d]);
          at.push_back(arith::AddIOp::create(
              b, l, offset, arith::MulIOp::create(b, l, idx[d], stride)));
        }
        return tensor::ExtractOp::create(b, l, slice.getSource(), at);
      });
  if (unitStrides) {
    Builder a(generic.getContext());
    markCopy(generic, source,
             {a.getNamedAttr("kind", a.getStringAttr("slice")),
              a.getNamedAttr("offsets", a.getDenseI64ArrayAttr(offsets)),
              a.getNamedAttr("sizes", a.getDenseI64ArrayAttr(sizes))});
  }
  return success();
}

/// `insert_slice` as a generic that reads the source inside the box (at a
/// clamped index, so no read is out of bounds) and the destination outside
/// it (TOSA's concat is a chain of these into an empty tensor).
LogicalResult insertSliceToGeneric(IRRewriter &rewriter,
                                   tensor::InsertSliceOp insert) {
  RankedTensorType src = staticTensor(insert.getSource()),
                   dst = staticTensor(insert.getResult());
  if (!src || !dst || src.getRank() != dst.getRank() ||
      !insert.getOffsets().empty() || !insert.getSizes().empty() ||
      !insert.getStrides().empty())
    return insert.emitError("only static, rank-preserving insert_slices are "
                            "supported on the reference path");
  replaceByGeneric(
      rewriter, insert, dst,
      [&](OpBuilder &b, Location l, ArrayRef<Value> idx) -> Value {
        auto index = [&](int64_t v) -> Value {
          return arith::ConstantIndexOp::create(b, l, v);
        };
        SmallVector<Value> at;
        Value inside = arith::ConstantIntOp::create(b, l, 1, 1);
        for (int64_t d = 0; d < dst.getRank(); ++d) {
          int64_t offset = insert.getStaticOffsets()[d],
                  stride = insert.getStaticStrides()[d],
                  size = src.getDimSize(d);
          // idx = offset + k * stride for some k in [0, size).
          Value k = arith::DivSIOp::create(
              b, l, arith::SubIOp::create(b, l, idx[d], index(offset)),
              index(stride));
          Value exact = arith::CmpIOp::create(
              b, l, arith::CmpIPredicate::eq,
              arith::AddIOp::create(
                  b, l, index(offset),
                  arith::MulIOp::create(b, l, k, index(stride))),
              idx[d]);
          Value inRange = arith::AndIOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, idx[d],
                                    index(offset)),
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, k,
                                    index(size)));
          inside = arith::AndIOp::create(
              b, l, inside, arith::AndIOp::create(b, l, exact, inRange));
          at.push_back(arith::MinSIOp::create(
              b, l, arith::MaxSIOp::create(b, l, k, index(0)),
              index(size - 1)));
        }
        Value fromSource =
            tensor::ExtractOp::create(b, l, insert.getSource(), at);
        Value fromDest = tensor::ExtractOp::create(b, l, insert.getDest(), idx);
        return arith::SelectOp::create(b, l, inside, fromSource, fromDest);
      });
  return success();
}

/// `concat` as a generic that reads, at each index, the part it falls in
/// (every part read at a clamped index, so no read is out of bounds).
LogicalResult concatToGeneric(IRRewriter &rewriter, tensor::ConcatOp concat) {
  RankedTensorType dst = staticTensor(concat.getResult());
  if (!dst || llvm::any_of(concat.getInputs(),
                           [](Value v) { return !staticTensor(v); }))
    return concat.emitError("only static concats are supported on the "
                            "reference path");
  int64_t dim = concat.getDim();
  SmallVector<Value> parts(concat.getInputs());
  linalg::GenericOp generic = replaceByGeneric(
      rewriter, concat, dst,
      [&](OpBuilder &b, Location l, ArrayRef<Value> idx) -> Value {
        int64_t offset = 0;
        SmallVector<std::pair<Value, Value>> picks; // (in part?, value)
        for (Value part : parts) {
          int64_t n = cast<RankedTensorType>(part.getType()).getDimSize(dim);
          Value local = arith::SubIOp::create(
              b, l, idx[dim], arith::ConstantIndexOp::create(b, l, offset));
          Value clamped = arith::MinSIOp::create(
              b, l,
              arith::MaxSIOp::create(b, l, local,
                                     arith::ConstantIndexOp::create(b, l, 0)),
              arith::ConstantIndexOp::create(b, l, n - 1));
          SmallVector<Value> at(idx);
          at[dim] = clamped;
          Value v = tensor::ExtractOp::create(b, l, part, at);
          Value inside = arith::CmpIOp::create(
              b, l, arith::CmpIPredicate::slt, idx[dim],
              arith::ConstantIndexOp::create(b, l, offset + n));
          picks.push_back({inside, v});
          offset += n;
        }
        Value result = picks.back().second;
        for (auto it = picks.rbegin() + 1; it != picks.rend(); ++it)
          result = arith::SelectOp::create(b, l, it->first, it->second, result);
        return result;
      });
  Builder a(generic.getContext());
  markCopy(generic, parts,
           {a.getNamedAttr("kind", a.getStringAttr("concat")),
            a.getNamedAttr("dim", a.getI64IntegerAttr(dim))});
  return success();
}

/// A generic with one reduction loop of at least `kMinWarpReduction`
/// iterations whose accumulators combine associatively
/// (reductionCombiners): its combining ops; none otherwise. A warp then
/// shares each row.
constexpr int64_t kMinWarpReduction = 64;
/// The most steps a lane of a warp's row reduction takes unrolled.
constexpr int64_t kMaxUnrolledLaneSteps = 8;
/// A warp takes several short rows where the generic has at least
/// kMinGroupedRows: as many as keep each lane's steps over all of them
/// within kMaxUnrolledLaneSteps, at most kMaxRowsPerWarp. One 64-wide
/// row is one or two loads per lane and input, too few in flight to keep
/// the memory busy (a gradient's rowsum(dO * O) ran at ~40 % of the
/// bandwidth one row per warp); with fewer rows the grid would get too few
/// blocks, and long rows already issue enough loads.
constexpr int64_t kMaxRowsPerWarp = 4;
constexpr int64_t kMinGroupedRows = 16384;
std::optional<SmallVector<Operation *>>
rowCombiners(linalg::GenericOp generic) {
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  std::optional<int64_t> reduced;
  for (auto [d, it] : llvm::enumerate(generic.getIteratorTypesArray()))
    if (it != utils::IteratorType::parallel) {
      if (reduced)
        return std::nullopt;
      reduced = d;
    }
  if (!reduced || ShapedType::isDynamic(ranges[*reduced]) ||
      ranges[*reduced] < kMinWarpReduction)
    return std::nullopt;
  return flashlight::reductionCombiners(generic);
}

} // namespace

SmallVector<func::FuncOp> flashlight::hostFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> hosts;
  for (auto func : module.getOps<func::FuncOp>()) {
    bool attention = false;
    func.walk([&](Operation *op) {
      attention |= op->getName().getDialectNamespace() == "attn";
    });
    if (!func.isExternal() && !attention)
      hosts.push_back(func);
  }
  return hosts;
}

std::optional<SmallVector<Operation *>>
flashlight::reductionCombiners(linalg::GenericOp generic) {
  Block &body = generic.getRegion().front();
  ValueRange accs = body.getArguments().take_back(generic.getNumDpsInits());
  SmallVector<Operation *> combiners;
  for (auto [k, v] : llvm::enumerate(body.getTerminator()->getOperands())) {
    Operation *op = v.getDefiningOp();
    if (!op ||
        !isa<arith::AddFOp, arith::MulFOp, arith::MaximumFOp, arith::MaxNumFOp,
             arith::MinimumFOp, arith::MinNumFOp>(op) ||
        !v.getType().isF32() || op->getNumOperands() != 2)
      return std::nullopt;
    int side = op->getOperand(0) == accs[k]   ? 0
               : op->getOperand(1) == accs[k] ? 1
                                              : -1;
    if (side < 0)
      return std::nullopt;
    // The term reads no accumulator.
    Value term = op->getOperand(1 - side);
    SetVector<Operation *> slice;
    if (Operation *def = term.getDefiningOp())
      slice.insert(def);
    for (unsigned i = 0; i < slice.size(); ++i)
      for (Value operand : slice[i]->getOperands()) {
        if (llvm::is_contained(accs, operand))
          return std::nullopt;
        if (Operation *def = operand.getDefiningOp();
            def && def->getBlock() == &body)
          slice.insert(def);
      }
    if (llvm::is_contained(accs, term))
      return std::nullopt;
    combiners.push_back(op);
  }
  return combiners;
}

Value flashlight::combinerIdentity(OpBuilder &b, Location loc,
                                   Operation *combiner) {
  double inf = std::numeric_limits<double>::infinity();
  double value = isa<arith::AddFOp>(combiner)                         ? 0.0
                 : isa<arith::MulFOp>(combiner)                       ? 1.0
                 : isa<arith::MaximumFOp, arith::MaxNumFOp>(combiner) ? -inf
                                                                      : inf;
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

namespace {

/// The kernel of one generic.
class KernelBuilder {
public:
  KernelBuilder(linalg::GenericOp generic, gpu::GPUModuleOp module,
                StringRef name)
      : generic(generic), module(module), name(name) {}

  FailureOr<int64_t> build();

private:
  LogicalResult captureScalars(OpBuilder &b, Location loc);
  SmallVector<Value> emitBody(OpBuilder &b, ArrayRef<Value> idx,
                              ValueRange accs);
  /// The body once per value of the bucket dim (all of them in this
  /// thread, each with its own accumulators, in value-major order), or
  /// once where there is none. What does not depend on the bucket is
  /// emitted alike in every copy and merged by CSE.
  SmallVector<Value> emitBodies(OpBuilder &b, SmallVector<Value> &idx,
                                ValueRange accs);
  /// The reductions as loops in this thread, carrying the accumulators
  /// (`idx`'s reduction entries are set while emitting, 0 after).
  SmallVector<Value> reduceInThread(OpBuilder &b, SmallVector<Value> &idx,
                                    ValueRange accs);
  /// The single reduction shared by the warp's lanes (rowCombiners): each
  /// takes every 32nd step from its lane, lane 0 (`first`) from the
  /// initial values and the others from the combiners' identities; a
  /// butterfly of shuffles combines the lanes (every lane gets the result).
  SmallVector<Value> reduceInWarp(OpBuilder &b, SmallVector<Value> &idx,
                                  ValueRange accs,
                                  ArrayRef<Operation *> combiners, Value lane,
                                  Value first);
  /// reduceInWarp's steps of each lane (its elements `lane`, `lane` + 32,
  /// ... of reduction dim `d`) one after another from `start` instead of
  /// as a loop, so that a lane's loads all issue before their sums (a
  /// gradient's rowsum(dO * O) ran at a quarter of the memory's bandwidth
  /// as a loop); empty where the row takes more than kMaxUnrolledLaneSteps.
  SmallVector<Value> unrolledLaneSteps(OpBuilder &b, SmallVector<Value> &idx,
                                       int64_t d, ValueRange start, Value lane);
  /// The element `map` reaches from the loop indices `idx`.
  SmallVector<Value> elementAt(OpBuilder &b, AffineMap map,
                               ArrayRef<Value> idx);
  /// A parallel point's indices and reduced values (per bucket value, per
  /// output); `first` is lane 0's test where a warp reduces it.
  struct Point {
    SmallVector<Value> idx, values;
    Value first;
  };
  /// Parallel point `linear` (a thread's, or with `combiners` a warp's row,
  /// `lane` its lane): its indices, accumulators and reduction.
  Point reducePoint(OpBuilder &b, Value linear, Value lane,
                    const std::optional<SmallVector<Operation *>> &combiners);
  /// The points' results, stored (a warp's by lane 0) after all of them
  /// were reduced: a store the loads of a later point would follow could
  /// alias them, and so would keep those loads from issuing early.
  void storePoints(OpBuilder &b, ArrayRef<Point> points);

  linalg::GenericOp generic;
  gpu::GPUModuleOp module;
  std::string name;
  IRMapping captured;
  SmallVector<Value> inputs, inits, results;
  /// bucketDim's loop, if any, and its extent.
  std::optional<int64_t> bucket;
  int64_t buckets = 1;
};

/// The parallel loop of a reduction generic whose index the body only
/// compares for equality (a table's entry against the bucket a term falls
/// in: `select(bucket(i, j) == t, term, 0)`), with at most
/// `kMaxBuckets` values: one thread then takes every value, so that the
/// term is computed once per step instead of once per entry.
constexpr int64_t kMaxBuckets = 32;
std::optional<int64_t> bucketDim(linalg::GenericOp generic) {
  if (generic.getNumReductionLoops() == 0)
    return std::nullopt;
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = generic.getIteratorTypesArray();
  std::optional<int64_t> found;
  for (auto index : generic.getRegion().front().getOps<linalg::IndexOp>()) {
    int64_t d = index.getDim();
    if (iters[d] != utils::IteratorType::parallel ||
        ShapedType::isDynamic(ranges[d]) || ranges[d] > kMaxBuckets ||
        (found && *found != d))
      continue;
    bool compared =
        !index->use_empty() &&
        llvm::all_of(index->getUsers(), [](Operation *user) {
          auto cmp = dyn_cast<arith::CmpIOp>(user);
          return cmp && cmp.getPredicate() == arith::CmpIPredicate::eq;
        });
    if (compared)
      found = d;
  }
  // Only where no input is read at the bucket (each copy would load its
  // own element: nothing to share).
  if (found)
    for (AffineMap map : generic.getIndexingMapsArray())
      if (map != generic.getIndexingMapsArray().back() &&
          map.isFunctionOfDim(*found))
        return std::nullopt;
  return found;
}

SmallVector<Value> KernelBuilder::elementAt(OpBuilder &b, AffineMap map,
                                            ArrayRef<Value> idx) {
  return *affine::expandAffineMap(b, generic.getLoc(), map, idx);
}

SmallVector<Value> KernelBuilder::emitBody(OpBuilder &b, ArrayRef<Value> idx,
                                           ValueRange accs) {
  Location loc = generic.getLoc();
  IRMapping map = captured;
  Block &body = generic.getRegion().front();
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  for (auto [i, in] : llvm::enumerate(inputs)) {
    if (!isa<MemRefType>(in.getType())) {
      map.map(body.getArgument(i), in); // a scalar input
      continue;
    }
    SmallVector<Value> element = elementAt(b, maps[i], idx);
    map.map(body.getArgument(i), memref::LoadOp::create(b, loc, in, element));
  }
  for (auto [k, acc] : llvm::enumerate(accs))
    map.map(body.getArgument(inputs.size() + k), acc);
  for (Operation &op : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(op)) {
      map.map(index.getResult(), idx[index.getDim()]);
    } else if (auto extract = dyn_cast<tensor::ExtractOp>(op);
               extract && captured.contains(extract.getTensor())) {
      SmallVector<Value> at;
      for (Value i : extract.getIndices())
        at.push_back(map.lookupOrDefault(i));
      map.map(extract.getResult(),
              memref::LoadOp::create(b, loc,
                                     captured.lookup(extract.getTensor()), at));
    } else {
      flashlight::cloneForKernel(b, op, map);
    }
  }
  SmallVector<Value> yielded;
  for (Value v : body.getTerminator()->getOperands())
    yielded.push_back(map.lookupOrDefault(v));
  return yielded;
}

SmallVector<Value> KernelBuilder::emitBodies(OpBuilder &b,
                                             SmallVector<Value> &idx,
                                             ValueRange accs) {
  if (!bucket)
    return emitBody(b, idx, accs);
  unsigned perCopy = accs.size() / buckets;
  SmallVector<Value> yielded;
  for (int64_t k = 0; k < buckets; ++k) {
    idx[*bucket] = arith::ConstantIndexOp::create(b, generic.getLoc(), k);
    llvm::append_range(yielded,
                       emitBody(b, idx, accs.slice(k * perCopy, perCopy)));
  }
  return yielded;
}

SmallVector<Value> KernelBuilder::reduceInThread(OpBuilder &b,
                                                 SmallVector<Value> &idx,
                                                 ValueRange accs) {
  Location loc = generic.getLoc();
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  SmallVector<int64_t> reductions;
  for (auto [d, it] : llvm::enumerate(generic.getIteratorTypesArray()))
    if (it != utils::IteratorType::parallel)
      reductions.push_back(d);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  std::function<SmallVector<Value>(OpBuilder &, unsigned, ValueRange)> nest =
      [&](OpBuilder &nb, unsigned level, ValueRange carried) {
        if (level == reductions.size())
          return emitBodies(nb, idx, carried);
        int64_t d = reductions[level];
        auto loop = scf::ForOp::create(
            nb, loc, arith::ConstantIndexOp::create(nb, loc, 0),
            arith::ConstantIndexOp::create(nb, loc, ranges[d]),
            arith::ConstantIndexOp::create(nb, loc, 1), carried,
            [&](OpBuilder &lb, Location l, Value iv, ValueRange args) {
              idx[d] = iv;
              scf::YieldOp::create(lb, l, nest(lb, level + 1, args));
            });
        idx[d] = zero;
        return SmallVector<Value>(loop.getResults());
      };
  return nest(b, 0, accs);
}

SmallVector<Value> KernelBuilder::reduceInWarp(OpBuilder &b,
                                               SmallVector<Value> &idx,
                                               ValueRange accs,
                                               ArrayRef<Operation *> combiners,
                                               Value lane, Value first) {
  Location loc = generic.getLoc();
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  int64_t d = 0;
  for (auto [i, it] : llvm::enumerate(generic.getIteratorTypesArray()))
    if (it != utils::IteratorType::parallel)
      d = i;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  SmallVector<Value> start;
  // Accumulators per bucket value, each with its output's combiner.
  auto combinerOf = [&](size_t a) { return combiners[a % combiners.size()]; };
  for (auto [a, acc] : llvm::enumerate(accs))
    start.push_back(arith::SelectOp::create(
        b, loc, first, acc,
        flashlight::combinerIdentity(b, loc, combinerOf(a))));
  SmallVector<Value> lanes = unrolledLaneSteps(b, idx, d, start, lane);
  if (lanes.empty()) {
    auto loop = scf::ForOp::create(
        b, loc, lane, arith::ConstantIndexOp::create(b, loc, ranges[d]),
        arith::ConstantIndexOp::create(b, loc, kWarpSize), start,
        [&](OpBuilder &lb, Location l, Value iv, ValueRange args) {
          idx[d] = iv;
          scf::YieldOp::create(lb, l, emitBodies(lb, idx, args));
        });
    lanes = loop.getResults();
  }
  idx[d] = zero;
  SmallVector<Value> values;
  for (auto [a, value] : llvm::enumerate(lanes)) {
    Operation *combiner = combinerOf(a);
    Value x = value;
    for (int32_t offset = kWarpSize / 2; offset > 0; offset /= 2) {
      Value other = gpu::ShuffleOp::create(b, loc, x, offset, kWarpSize,
                                           gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      OperationState state(loc, combiner->getName());
      state.addOperands({x, other});
      state.addTypes(x.getType());
      state.addAttributes(combiner->getAttrs());
      x = b.create(state)->getResult(0);
    }
    values.push_back(x);
  }
  return values;
}

SmallVector<Value> KernelBuilder::unrolledLaneSteps(OpBuilder &b,
                                                    SmallVector<Value> &idx,
                                                    int64_t d, ValueRange start,
                                                    Value lane) {
  Location loc = generic.getLoc();
  int64_t range = generic.getStaticLoopRanges()[d];
  int64_t steps = llvm::divideCeil(range, kWarpSize);
  if (steps > kMaxUnrolledLaneSteps)
    return {};
  SmallVector<Value> carried(start);
  for (int64_t s = 0; s < steps; ++s) {
    idx[d] = s == 0 ? lane
                    : arith::AddIOp::create(b, loc, lane,
                                            arith::ConstantIndexOp::create(
                                                b, loc, s * kWarpSize));
    if ((s + 1) * kWarpSize <= range) {
      carried = emitBodies(b, idx, carried);
      continue;
    }
    // The last step of a row that lanes do not divide: lanes past its end
    // keep their values.
    Value inRow =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, idx[d],
                              arith::ConstantIndexOp::create(b, loc, range));
    auto step = scf::IfOp::create(b, loc, ValueRange(carried).getTypes(), inRow,
                                  /*withElseRegion=*/true);
    OpBuilder inner = step.getThenBodyBuilder();
    scf::YieldOp::create(inner, loc, emitBodies(inner, idx, carried));
    inner = step.getElseBodyBuilder();
    scf::YieldOp::create(inner, loc, carried);
    carried = step.getResults();
  }
  return carried;
}

/// Scalars the body captures, mapped in `captured` at the kernel's entry:
/// constants are cloned, extracted elements loaded from their (captured)
/// tensor; an error for any other value.
LogicalResult KernelBuilder::captureScalars(OpBuilder &b, Location loc) {
  llvm::SetVector<Value> above;
  for (Value in : generic.getInputs())
    if (!isa<RankedTensorType>(in.getType()))
      above.insert(in);
  getUsedValuesDefinedAbove(generic.getRegion(), above);
  for (Value v : above) {
    if (isa<RankedTensorType>(v.getType()))
      continue;
    Operation *def = v.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>()) {
      captured.map(v, b.clone(*def)->getResult(0));
    } else if (auto extract = dyn_cast_or_null<tensor::ExtractOp>(def)) {
      SmallVector<Value> at;
      for (Value i : extract.getIndices()) {
        Operation *c = i.getDefiningOp();
        if (!c || !c->hasTrait<OpTrait::ConstantLike>())
          return generic.emitError("a captured element is read at a "
                                   "computed index");
        at.push_back(b.clone(*c)->getResult(0));
      }
      captured.map(v, memref::LoadOp::create(
                          b, loc, captured.lookup(extract.getTensor()), at));
    } else {
      return generic.emitError("the body reads a value the reference path "
                               "cannot pass to a kernel");
    }
  }
  return success();
}

FailureOr<int64_t> KernelBuilder::build() {
  Location loc = generic.getLoc();
  MLIRContext *ctx = generic.getContext();
  SmallVector<Value> params = flashlight::hostKernelParams(generic);
  SmallVector<Type> types;
  for (Value p : params) {
    RankedTensorType t = staticTensor(p);
    if (!t)
      return generic.emitError("the reference path needs static shapes");
    types.push_back(MemRefType::get(t.getShape(), t.getElementType()));
  }
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = generic.getIteratorTypesArray();
  int64_t points = 1;
  for (auto [r, it] : llvm::zip(ranges, iters))
    if (it == utils::IteratorType::parallel)
      points *= r;
  // A bucket dim's values are taken by each thread (or warp), not spread.
  bucket = bucketDim(generic);
  if (bucket) {
    buckets = ranges[*bucket];
    points /= buckets;
  }

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto kernel =
      gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(types, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(flashlight::kHostBlockSize), 1, 1}));
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  unsigned numOut = generic.getNumDpsInits();
  unsigned numTensorIn = 0;
  for (Value in : generic.getInputs())
    numTensorIn += isa<RankedTensorType>(in.getType());
  for (unsigned i = 0; i < params.size(); ++i) {
    Value arg = entry.getArgument(i);
    if (i < numTensorIn)
      inputs.push_back(arg);
    else if (i < numTensorIn + numOut)
      inits.push_back(arg);
    else if (i < numTensorIn + 2 * numOut)
      results.push_back(arg);
    else
      captured.map(params[i], arg);
  }
  if (failed(captureScalars(b, loc)))
    return failure();
  // Inputs in operand order: memrefs, and scalars resolved above.
  SmallVector<Value> memrefs = std::move(inputs);
  inputs.clear();
  unsigned nextMemref = 0;
  for (Value in : generic.getInputs())
    inputs.push_back(isa<RankedTensorType>(in.getType()) ? memrefs[nextMemref++]
                                                         : captured.lookup(in));
  // One thread per parallel point; with rowCombiners, one warp, which
  // takes `rows` consecutive rows.
  std::optional<SmallVector<Operation *>> combiners = rowCombiners(generic);
  int64_t perPoint = combiners ? kWarpSize : 1;
  int64_t rows = 1;
  if (combiners && points >= kMinGroupedRows) {
    int64_t reduced = 1;
    for (auto [r, it] : llvm::zip(ranges, iters))
      if (it != utils::IteratorType::parallel)
        reduced = r;
    int64_t steps = llvm::divideCeil(reduced, kWarpSize);
    rows =
        std::clamp<int64_t>(kMaxUnrolledLaneSteps / steps, 1, kMaxRowsPerWarp);
  }
  Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value lane;
  if (combiners) {
    Value warpSize = arith::ConstantIndexOp::create(b, loc, kWarpSize);
    lane = arith::RemUIOp::create(b, loc, thread, warpSize);
    thread = arith::DivUIOp::create(b, loc, thread, warpSize);
  }
  auto constant = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value linear = arith::MulIOp::create(
      b, loc,
      arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(
              b, loc, block, constant(flashlight::kHostBlockSize / perPoint)),
          thread),
      constant(rows));
  auto ult = [&](Value x, int64_t bound) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, x,
                                 constant(bound));
  };
  auto guard = scf::IfOp::create(b, loc, ult(linear, points),
                                 /*withElseRegion=*/false);
  gpu::ReturnOp::create(b, loc);
  b.setInsertionPointToStart(guard.thenBlock());
  auto rowAt = [&](OpBuilder &rb, int64_t r) {
    return r ? arith::AddIOp::create(rb, loc, linear,
                                     arith::ConstantIndexOp::create(rb, loc, r))
                   .getResult()
             : linear;
  };
  if (rows == 1) {
    storePoints(b, reducePoint(b, linear, lane, combiners));
  } else {
    // Every row of the group in straight-line code where all are in
    // range, so that the rows' loads issue together; else each row behind
    // its own test.
    auto whole = scf::IfOp::create(
        b, loc,
        ult(arith::AddIOp::create(b, loc, linear, constant(rows - 1)), points),
        /*withElseRegion=*/true);
    OpBuilder inner = whole.getThenBodyBuilder();
    SmallVector<Point> group;
    for (int64_t r = 0; r < rows; ++r)
      group.push_back(reducePoint(inner, rowAt(inner, r), lane, combiners));
    storePoints(inner, group);
    inner = whole.getElseBodyBuilder();
    for (int64_t r = 0; r < rows; ++r) {
      Value row = rowAt(inner, r);
      auto inRange = scf::IfOp::create(
          inner, loc,
          arith::CmpIOp::create(
              inner, loc, arith::CmpIPredicate::ult, row,
              arith::ConstantIndexOp::create(inner, loc, points)),
          /*withElseRegion=*/false);
      OpBuilder one = inRange.getThenBodyBuilder();
      storePoints(one, reducePoint(one, row, lane, combiners));
    }
  }
  int64_t pointsPerBlock = flashlight::kHostBlockSize / perPoint * rows;
  return (points + pointsPerBlock - 1) / pointsPerBlock;
}

KernelBuilder::Point KernelBuilder::reducePoint(
    OpBuilder &b, Value linear, Value lane,
    const std::optional<SmallVector<Operation *>> &combiners) {
  Location loc = generic.getLoc();
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = generic.getIteratorTypesArray();
  unsigned numIn = generic.getNumDpsInputs();
  // Parallel indices from the linear id (the last loop fastest); reduction
  // indices start at 0 (output maps do not read them).
  Point point;
  SmallVector<Value> &idx = point.idx;
  idx.resize(ranges.size());
  Value rest = linear;
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  for (int64_t d = ranges.size() - 1; d >= 0; --d) {
    if (iters[d] != utils::IteratorType::parallel || d == bucket) {
      idx[d] = zero;
      continue;
    }
    Value size = arith::ConstantIndexOp::create(b, loc, ranges[d]);
    idx[d] = arith::RemUIOp::create(b, loc, rest, size);
    rest = arith::DivUIOp::create(b, loc, rest, size);
  }
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  // The accumulators, per bucket value (one value without a bucket dim).
  SmallVector<Value> accs;
  for (int64_t k = 0; k < buckets; ++k) {
    if (bucket)
      idx[*bucket] = arith::ConstantIndexOp::create(b, loc, k);
    for (auto [j, init] : llvm::enumerate(inits))
      accs.push_back(memref::LoadOp::create(
          b, loc, init, elementAt(b, maps[numIn + j], idx)));
  }
  if (combiners) {
    point.first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, zero);
    point.values = reduceInWarp(b, idx, accs, *combiners, lane, point.first);
  } else {
    point.values = reduceInThread(b, idx, accs);
  }
  return point;
}

void KernelBuilder::storePoints(OpBuilder &b, ArrayRef<Point> points) {
  Location loc = generic.getLoc();
  SmallVector<AffineMap> maps = generic.getIndexingMapsArray();
  unsigned numIn = generic.getNumDpsInputs();
  OpBuilder::InsertionGuard guard(b);
  if (Value first = points.front().first) {
    // Lane 0 stores the warp's results.
    auto store = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
    b.setInsertionPointToStart(store.thenBlock());
  }
  for (const Point &point : points) {
    SmallVector<Value> idx = point.idx;
    for (int64_t k = 0; k < buckets; ++k) {
      if (bucket)
        idx[*bucket] = arith::ConstantIndexOp::create(b, loc, k);
      for (auto [j, out] : llvm::enumerate(results))
        memref::StoreOp::create(b, loc, point.values[k * results.size() + j],
                                out, elementAt(b, maps[numIn + j], idx));
    }
  }
}

struct HostToGPU : flashlight::impl::HostToGPUBase<HostToGPU> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    SmallVector<func::FuncOp> hosts = flashlight::hostFunctions(module);
    if (hosts.empty())
      return;
    IRRewriter rewriter(ctx);
    // Every computation a generic.
    for (func::FuncOp func : hosts) {
      SmallVector<Operation *> ops;
      func.walk([&](Operation *op) {
        if (isa<linalg::LinalgOp>(op) && !isa<linalg::GenericOp>(op))
          ops.push_back(op);
        else if (isa<tensor::ExtractSliceOp, tensor::InsertSliceOp,
                     tensor::ConcatOp>(op))
          ops.push_back(op);
      });
      for (Operation *op : ops) {
        LogicalResult ok = success();
        if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
          ok = sliceToGeneric(rewriter, slice);
        else if (auto insert = dyn_cast<tensor::InsertSliceOp>(op))
          ok = insertSliceToGeneric(rewriter, insert);
        else if (auto concat = dyn_cast<tensor::ConcatOp>(op))
          ok = concatToGeneric(rewriter, concat);
        else {
          rewriter.setInsertionPoint(op);
          ok = linalg::generalizeNamedOp(rewriter, cast<linalg::LinalgOp>(op));
        }
        if (failed(ok))
          return signalPassFailure();
      }
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    auto gpuModule =
        gpu::GPUModuleOp::create(b, module.getLoc(), "flashlight_host");
    unsigned count = 0;
    for (func::FuncOp func : hosts) {
      for (Operation &op : func.getBody().front()) {
        if (isa<tensor::EmptyOp, arith::ConstantOp, tensor::CollapseShapeOp,
                tensor::ExpandShapeOp, tensor::ExtractOp, func::CallOp,
                func::ReturnOp>(op))
          continue;
        auto generic = dyn_cast<linalg::GenericOp>(op);
        if (!generic) {
          op.emitError("'")
              << op.getName() << "' is not supported on the reference path";
          return signalPassFailure();
        }
        if (!generic.hasPureTensorSemantics()) {
          generic.emitError("the reference path takes generics on tensors");
          return signalPassFailure();
        }
        std::string name = "host" + std::to_string(count++);
        FailureOr<int64_t> grid =
            KernelBuilder(generic, gpuModule, name).build();
        if (failed(grid))
          return signalPassFailure();
        generic->setAttr("flashlight.kernel", b.getStringAttr(name));
        generic->setAttr("flashlight.grid", b.getI64IntegerAttr(*grid));
        generic->setAttr("flashlight.block",
                         b.getI64IntegerAttr(flashlight::kHostBlockSize));
        if (std::optional<std::string> einsum = einsumOf(generic))
          generic->setAttr("flashlight.einsum", b.getStringAttr(*einsum));
        if (std::optional<double> fill = fillValueOf(generic))
          generic->setAttr("flashlight.fill", b.getF64FloatAttr(*fill));
        if (std::optional<SmallVector<int64_t>> perm = permutationOf(generic))
          markCopy(
              generic, generic.getInputs(),
              {b.getNamedAttr("kind", b.getStringAttr("transpose")),
               b.getNamedAttr("permutation", b.getDenseI64ArrayAttr(*perm))});
      }
    }
  }
};

} // namespace
