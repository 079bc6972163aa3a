//===- StableHLOToLinalg.cpp - StableHLO to linalg on tensors -------------===//
//
// Converts the operations the `stablehlo` import dialect read into
// linalg/tensor/arith/math on tensors, the common input of attn-raise.
// Operations are unregistered, so this is a walk over names rather than
// typed patterns; every rejection is an error located at the operation.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Import/Passes.h"
#include "flashlight/Import/TensorBuilders.h"

#include "ConstantLoops.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSwitch.h"

namespace flashlight {
#define GEN_PASS_DEF_IMPORTSTABLEHLO
#include "flashlight/Import/Passes.h.inc"
} // namespace flashlight

using namespace mlir;
using namespace flashlight::import;

namespace {

/// The static ranked tensor type of integers or floats of `v`, or null.
RankedTensorType staticTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() && t.getElementType().isIntOrFloat()
             ? t
             : RankedTensorType();
}

/// `stablehlo.compare` on scalars.
FailureOr<Value> emitCompare(OpBuilder &b, Operation *op, ValueRange args) {
  Location loc = op->getLoc();
  auto dirAttr = op->getAttrOfType<StringAttr>("comparison_direction");
  if (!dirAttr)
    return op->emitError("expected a comparison_direction");
  StringRef dir = dirAttr.getValue();
  auto typeAttr = op->getAttrOfType<StringAttr>("compare_type");
  Type t = args[0].getType();
  if (isa<FloatType>(t)) {
    std::optional<arith::CmpFPredicate> p =
        llvm::StringSwitch<std::optional<arith::CmpFPredicate>>(dir)
            .Case("EQ", arith::CmpFPredicate::OEQ)
            .Case("NE", arith::CmpFPredicate::UNE)
            .Case("GE", arith::CmpFPredicate::OGE)
            .Case("GT", arith::CmpFPredicate::OGT)
            .Case("LE", arith::CmpFPredicate::OLE)
            .Case("LT", arith::CmpFPredicate::OLT)
            .Default(std::nullopt);
    if (!p)
      return op->emitError("unknown comparison direction '") << dir << "'";
    return Value(arith::CmpFOp::create(b, loc, *p, args[0], args[1]));
  }
  bool isUnsigned =
      t.isInteger(1) || (typeAttr && typeAttr.getValue() == "UNSIGNED");
  using P = arith::CmpIPredicate;
  std::optional<P> p = llvm::StringSwitch<std::optional<P>>(dir)
                           .Case("EQ", P::eq)
                           .Case("NE", P::ne)
                           .Case("GE", isUnsigned ? P::uge : P::sge)
                           .Case("GT", isUnsigned ? P::ugt : P::sgt)
                           .Case("LE", isUnsigned ? P::ule : P::sle)
                           .Case("LT", isUnsigned ? P::ult : P::slt)
                           .Default(std::nullopt);
  if (!p)
    return op->emitError("unknown comparison direction '") << dir << "'";
  return Value(arith::CmpIOp::create(b, loc, *p, args[0], args[1]));
}

/// The scalar form of elementwise `op` on `args`, producing `resultType`.
FailureOr<Value> emitScalar(OpBuilder &b, Operation *op, ValueRange args,
                            Type resultType) {
  Location loc = op->getLoc();
  StringRef name = op->getName().getStringRef();
  if (!name.consume_front("stablehlo."))
    name.consume_front("chlo.");
  Type t = args.empty() ? resultType : args[0].getType();
  bool isFloat = isa<FloatType>(t);
  bool isBool = t.isInteger(1);
  auto expect = [&](size_t n) -> LogicalResult {
    if (args.size() == n)
      return success();
    return op->emitError() << "'" << op->getName() << "' expects " << n
                           << " operands, got " << args.size();
  };
  // Binary ops: the float op, the integer op and the boolean op.
  auto binary = [&](auto fop, auto iop, auto bop) -> FailureOr<Value> {
    if (failed(expect(2)))
      return failure();
    using F = decltype(fop);
    using I = decltype(iop);
    using B = decltype(bop);
    if (isFloat) {
      if constexpr (std::is_same_v<F, std::nullptr_t>)
        return op->emitError() << "'" << op->getName() << "' on floats";
      else
        return Value(F::create(b, loc, args[0], args[1]));
    }
    if (isBool && !std::is_same_v<B, std::nullptr_t>) {
      if constexpr (!std::is_same_v<B, std::nullptr_t>)
        return Value(B::create(b, loc, args[0], args[1]));
    }
    if constexpr (std::is_same_v<I, std::nullptr_t>)
      return op->emitError() << "'" << op->getName() << "' on integers";
    else
      return Value(I::create(b, loc, args[0], args[1]));
  };
  // Unary float math.
  auto unary = [&](auto fop) -> FailureOr<Value> {
    if (failed(expect(1)))
      return failure();
    if (!isFloat)
      return op->emitError() << "'" << op->getName() << "' needs floats";
    return Value(decltype(fop)::create(b, loc, args[0]));
  };
  using namespace arith;
  std::nullptr_t none = nullptr;
  if (name == "add")
    return binary(AddFOp(), AddIOp(), OrIOp());
  if (name == "subtract")
    return binary(SubFOp(), SubIOp(), none);
  if (name == "multiply")
    return binary(MulFOp(), MulIOp(), AndIOp());
  if (name == "divide")
    return binary(DivFOp(), DivSIOp(), none);
  if (name == "remainder")
    return binary(RemFOp(), RemSIOp(), none);
  if (name == "maximum")
    return binary(MaximumFOp(), MaxSIOp(), OrIOp());
  if (name == "minimum")
    return binary(MinimumFOp(), MinSIOp(), AndIOp());
  if (name == "power")
    return binary(math::PowFOp(), math::IPowIOp(), none);
  if (name == "atan2")
    return binary(math::Atan2Op(), none, none);
  if (name == "and")
    return binary(none, AndIOp(), AndIOp());
  if (name == "or")
    return binary(none, OrIOp(), OrIOp());
  if (name == "xor")
    return binary(none, XOrIOp(), XOrIOp());
  if (name == "exponential")
    return unary(math::ExpOp());
  if (name == "exponential_minus_one")
    return unary(math::ExpM1Op());
  if (name == "log")
    return unary(math::LogOp());
  if (name == "log_plus_one")
    return unary(math::Log1pOp());
  if (name == "tanh")
    return unary(math::TanhOp());
  if (name == "sqrt")
    return unary(math::SqrtOp());
  if (name == "rsqrt")
    return unary(math::RsqrtOp());
  if (name == "cbrt")
    return unary(math::CbrtOp());
  if (name == "sine")
    return unary(math::SinOp());
  if (name == "cosine")
    return unary(math::CosOp());
  if (name == "tan")
    return unary(math::TanOp());
  if (name == "floor")
    return unary(math::FloorOp());
  if (name == "ceil")
    return unary(math::CeilOp());
  if (name == "round_nearest_even")
    return unary(math::RoundEvenOp());
  if (name == "round_nearest_afz")
    return unary(math::RoundOp());
  if (name == "erf")
    return unary(math::ErfOp());
  if (name == "sinh")
    return unary(math::SinhOp());
  if (name == "cosh")
    return unary(math::CoshOp());
  if (name == "asin")
    return unary(math::AsinOp());
  if (name == "acos")
    return unary(math::AcosOp());
  if (name == "atan")
    return unary(math::AtanOp());
  if (name == "asinh")
    return unary(math::AsinhOp());
  if (name == "acosh")
    return unary(math::AcoshOp());
  if (name == "atanh")
    return unary(math::AtanhOp());
  if (name == "square") {
    // CHLO's definition: x * x (integers too).
    if (failed(expect(1)))
      return failure();
    if (isFloat)
      return Value(MulFOp::create(b, loc, args[0], args[0]));
    return Value(MulIOp::create(b, loc, args[0], args[0]));
  }
  if (name == "is_finite" || name == "is_inf" || name == "is_pos_inf" ||
      name == "is_neg_inf") {
    if (failed(expect(1)))
      return failure();
    if (!isFloat)
      return op->emitError() << "'" << op->getName() << "' needs floats";
    Value inf = constantOf(b, loc, t, INFINITY);
    Value x = args[0];
    if (name == "is_finite") // |x| < inf is false for NaN and +-inf
      return Value(CmpFOp::create(b, loc, CmpFPredicate::OLT,
                                  math::AbsFOp::create(b, loc, x), inf));
    if (name == "is_inf")
      x = math::AbsFOp::create(b, loc, x);
    if (name == "is_neg_inf")
      inf = constantOf(b, loc, t, -INFINITY);
    return Value(CmpFOp::create(b, loc, CmpFPredicate::OEQ, x, inf));
  }
  if (name == "sign") {
    if (failed(expect(1)))
      return failure();
    Value x = args[0];
    if (isFloat) {
      // +-1 by the sign bit; +-0 and NaN are returned as they are.
      Value zero = constantOf(b, loc, t, 0.0);
      Value one =
          math::CopySignOp::create(b, loc, constantOf(b, loc, t, 1.0), x);
      Value keep = CmpFOp::create(b, loc, CmpFPredicate::UEQ, x, zero);
      return Value(SelectOp::create(b, loc, keep, x, one));
    }
    // (x > 0) - (x < 0)
    Value zero = constantOf(b, loc, t, 0);
    Value pos = ExtUIOp::create(
        b, loc, t, CmpIOp::create(b, loc, CmpIPredicate::sgt, x, zero));
    Value neg = ExtUIOp::create(
        b, loc, t, CmpIOp::create(b, loc, CmpIPredicate::slt, x, zero));
    return Value(SubIOp::create(b, loc, pos, neg));
  }
  if (name == "logistic") {
    if (failed(expect(1)))
      return failure();
    // 1 / (1 + exp(-x))
    Value one = constantOf(b, loc, t, 1.0);
    Value e = math::ExpOp::create(b, loc, NegFOp::create(b, loc, args[0]));
    return Value(DivFOp::create(b, loc, one, AddFOp::create(b, loc, one, e)));
  }
  if (name == "negate") {
    if (failed(expect(1)))
      return failure();
    if (isFloat)
      return Value(NegFOp::create(b, loc, args[0]));
    return Value(SubIOp::create(b, loc, constantOf(b, loc, t, 0), args[0]));
  }
  if (name == "not") {
    if (failed(expect(1)))
      return failure();
    if (isFloat)
      return op->emitError("'stablehlo.not' on floats");
    return Value(XOrIOp::create(b, loc, args[0], constantOf(b, loc, t, -1)));
  }
  if (name == "abs") {
    if (failed(expect(1)))
      return failure();
    if (isFloat)
      return Value(math::AbsFOp::create(b, loc, args[0]));
    return Value(math::AbsIOp::create(b, loc, args[0]));
  }
  if (name == "convert") {
    if (failed(expect(1)))
      return failure();
    return castScalar(b, loc, args[0], resultType);
  }
  if (name == "select") {
    if (failed(expect(3)))
      return failure();
    return Value(SelectOp::create(b, loc, args[0], args[1], args[2]));
  }
  if (name == "clamp") {
    if (failed(expect(3)))
      return failure();
    t = args[1].getType();
    if (isa<FloatType>(t))
      return Value(MinimumFOp::create(
          b, loc, MaximumFOp::create(b, loc, args[1], args[0]), args[2]));
    return Value(MinSIOp::create(
        b, loc, MaxSIOp::create(b, loc, args[1], args[0]), args[2]));
  }
  if (name == "compare") {
    if (failed(expect(2)))
      return failure();
    return emitCompare(b, op, args);
  }
  return op->emitError() << "'" << op->getName()
                         << "' is not supported by the StableHLO importer";
}

/// One converter per operation; `convert` dispatches on the name.
class Converter {
public:
  explicit Converter(MLIRContext *ctx) : b(ctx) {}

  /// Replaces `op` (a stablehlo operation) by its linalg/tensor/arith form.
  LogicalResult convert(Operation *op);

private:
  FailureOr<Value> elementwise(Operation *op, RankedTensorType result);
  FailureOr<Value> broadcastInDim(Operation *op, RankedTensorType result);
  FailureOr<Value> transpose(Operation *op, RankedTensorType result);
  FailureOr<Value> iota(Operation *op, RankedTensorType result);
  FailureOr<Value> dotGeneral(Operation *op, RankedTensorType result);
  FailureOr<SmallVector<Value>> reduce(Operation *op);
  FailureOr<Value> reshape(Operation *op, RankedTensorType result);
  FailureOr<Value> slice(Operation *op, RankedTensorType result);
  FailureOr<Value> dynamicSlice(Operation *op, RankedTensorType result);
  FailureOr<Value> dynamicUpdateSlice(Operation *op, RankedTensorType result);
  FailureOr<Value> gather(Operation *op, RankedTensorType result);
  FailureOr<Value> pad(Operation *op, RankedTensorType result);
  FailureOr<Value> reduceWindow(Operation *op, RankedTensorType result);
  FailureOr<SmallVector<Value>> applyReducer(OpBuilder &nb, Operation *op,
                                             Block &body, ValueRange accs,
                                             ValueRange elems);

  OpBuilder b;
};

FailureOr<DenseI64ArrayAttr> i64Array(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<DenseI64ArrayAttr>(name);
  if (!attr)
    return op->emitError() << "expected an i64 array '" << name << "'";
  return attr;
}

FailureOr<int64_t> i64Attr(Operation *op, StringRef name) {
  auto attr = op->getAttrOfType<IntegerAttr>(name);
  if (!attr)
    return op->emitError() << "expected an integer '" << name << "'";
  return attr.getInt();
}

FailureOr<Value> Converter::elementwise(Operation *op,
                                        RankedTensorType result) {
  Location loc = op->getLoc();
  int64_t rank = result.getRank();
  SmallVector<AffineMap> maps;
  for (Value v : op->getOperands()) {
    RankedTensorType t = staticTensor(v);
    if (t.getRank() == 0 && rank > 0)
      maps.push_back(AffineMap::get(rank, 0, {}, b.getContext()));
    else if (t.getShape() == result.getShape())
      maps.push_back(b.getMultiDimIdentityMap(rank));
    else
      return op->emitError() << "operand shape " << t
                             << " does not match the result " << result;
  }
  maps.push_back(b.getMultiDimIdentityMap(rank));
  LogicalResult status = success();
  auto generic = linalg::GenericOp::create(
      b, loc, result, op->getOperands(), emptyLike(b, loc, result), maps,
      parallelIterators(rank), [&](OpBuilder &nb, Location l, ValueRange args) {
        FailureOr<Value> v =
            emitScalar(nb, op, args.drop_back(), result.getElementType());
        if (failed(v)) {
          status = failure();
          v = args.back();
        }
        linalg::YieldOp::create(nb, l, *v);
      });
  if (failed(status)) {
    generic->erase();
    return failure();
  }
  return generic.getResult(0);
}

FailureOr<Value> Converter::broadcastInDim(Operation *op,
                                           RankedTensorType result) {
  FailureOr<DenseI64ArrayAttr> dims = i64Array(op, "broadcast_dimensions");
  if (failed(dims) || op->getNumOperands() != 1)
    return failure();
  RankedTensorType in = staticTensor(op->getOperand(0));
  if ((int64_t)dims->size() != in.getRank())
    return op->emitError("broadcast_dimensions must name every operand dim");
  SmallVector<AffineExpr> exprs;
  for (auto [k, d] : llvm::enumerate(dims->asArrayRef())) {
    if (d < 0 || d >= result.getRank())
      return op->emitError()
             << "broadcast dimension " << d << " is out of range";
    if (in.getDimSize(k) == result.getDimSize(d))
      exprs.push_back(b.getAffineDimExpr(d));
    else if (in.getDimSize(k) == 1)
      exprs.push_back(b.getAffineConstantExpr(0));
    else
      return op->emitError()
             << "operand dim " << k << " (size " << in.getDimSize(k)
             << ") cannot broadcast to result dim " << d << " (size "
             << result.getDimSize(d) << ")";
  }
  AffineMap map = AffineMap::get(result.getRank(), 0, exprs, b.getContext());
  return copyThroughMap(b, op->getLoc(), op->getOperand(0), map, result);
}

FailureOr<Value> Converter::transpose(Operation *op, RankedTensorType result) {
  FailureOr<DenseI64ArrayAttr> perm = i64Array(op, "permutation");
  if (failed(perm) || op->getNumOperands() != 1)
    return failure();
  int64_t rank = result.getRank();
  SmallVector<AffineExpr> exprs(rank);
  if ((int64_t)perm->size() != rank)
    return op->emitError("permutation must name every dim");
  for (auto [i, p] : llvm::enumerate(perm->asArrayRef())) {
    if (p < 0 || p >= rank || exprs[p])
      return op->emitError("permutation is not a permutation");
    exprs[p] = b.getAffineDimExpr(i);
  }
  AffineMap map = AffineMap::get(rank, 0, exprs, b.getContext());
  return copyThroughMap(b, op->getLoc(), op->getOperand(0), map, result);
}

FailureOr<Value> Converter::iota(Operation *op, RankedTensorType result) {
  FailureOr<int64_t> dim = i64Attr(op, "iota_dimension");
  if (failed(dim))
    return failure();
  if (*dim < 0 || *dim >= result.getRank())
    return op->emitError("iota_dimension is out of range");
  Type elt = result.getElementType();
  Location loc = op->getLoc();
  auto generic = linalg::GenericOp::create(
      b, loc, result, ValueRange(), emptyLike(b, loc, result),
      {b.getMultiDimIdentityMap(result.getRank())},
      parallelIterators(result.getRank()),
      [&](OpBuilder &nb, Location l, ValueRange) {
        Value i = linalg::IndexOp::create(nb, l, *dim);
        Value v = isa<FloatType>(elt)
                      ? castScalar(nb, l,
                                   arith::IndexCastOp::create(
                                       nb, l, nb.getI64Type(), i),
                                   elt)
                      : Value(arith::IndexCastOp::create(nb, l, elt, i));
        linalg::YieldOp::create(nb, l, v);
      });
  return generic.getResult(0);
}

FailureOr<Value> Converter::dotGeneral(Operation *op, RankedTensorType result) {
  auto dims = op->getAttrOfType<DictionaryAttr>("dot_dimension_numbers");
  if (!dims || op->getNumOperands() != 2)
    return op->emitError("expected two operands and dot_dimension_numbers");
  auto get = [&](StringRef name) {
    auto a = dims.getAs<DenseI64ArrayAttr>(name);
    return a ? a.asArrayRef() : ArrayRef<int64_t>();
  };
  ArrayRef<int64_t> lb = get("lhs_batching_dimensions"),
                    rb = get("rhs_batching_dimensions"),
                    lc = get("lhs_contracting_dimensions"),
                    rc = get("rhs_contracting_dimensions");
  RankedTensorType lhs = staticTensor(op->getOperand(0));
  RankedTensorType rhs = staticTensor(op->getOperand(1));
  if (lb.size() != rb.size() || lc.size() != rc.size())
    return op->emitError("lhs and rhs dimension lists differ in length");
  auto inRange = [](ArrayRef<int64_t> v, int64_t rank) {
    return llvm::all_of(v, [&](int64_t d) { return d >= 0 && d < rank; });
  };
  if (!inRange(lb, lhs.getRank()) || !inRange(lc, lhs.getRank()) ||
      !inRange(rb, rhs.getRank()) || !inRange(rc, rhs.getRank()))
    return op->emitError("dot_general dimension out of range");
  // Each operand dim is batching, contracting or free, never two of them.
  auto distinct = [](ArrayRef<int64_t> batch, ArrayRef<int64_t> contract) {
    SmallVector<int64_t> all(batch);
    all.append(contract.begin(), contract.end());
    llvm::sort(all);
    return std::adjacent_find(all.begin(), all.end()) == all.end();
  };
  if (!distinct(lb, lc) || !distinct(rb, rc))
    return op->emitError("a dimension is named twice in dot_general's "
                         "batching and contracting dimensions");
  // Loop dims: batch, lhs free, rhs free (the result's order), contracting.
  int64_t nb = lb.size(), nc = lc.size();
  int64_t lhsFree = lhs.getRank() - nb - nc, rhsFree = rhs.getRank() - nb - nc;
  int64_t outRank = nb + lhsFree + rhsFree;
  if (outRank != result.getRank())
    return op->emitError() << "result rank " << result.getRank()
                           << ", expected " << outRank;
  int64_t loops = outRank + nc;
  auto operandMap = [&](RankedTensorType t, ArrayRef<int64_t> batch,
                        ArrayRef<int64_t> contract, int64_t freeStart,
                        SmallVectorImpl<int64_t> &sizes) -> AffineMap {
    SmallVector<AffineExpr> exprs;
    int64_t free = freeStart;
    for (int64_t d = 0; d < t.getRank(); ++d) {
      int64_t loop;
      if (auto *it = llvm::find(batch, d); it != batch.end())
        loop = it - batch.begin();
      else if (auto *it = llvm::find(contract, d); it != contract.end())
        loop = outRank + (it - contract.begin());
      else
        loop = free++;
      exprs.push_back(b.getAffineDimExpr(loop));
      sizes[loop] = t.getDimSize(d);
    }
    return AffineMap::get(loops, 0, exprs, b.getContext());
  };
  SmallVector<int64_t> lhsSizes(loops, -1), rhsSizes(loops, -1);
  AffineMap lhsMap = operandMap(lhs, lb, lc, nb, lhsSizes);
  AffineMap rhsMap = operandMap(rhs, rb, rc, nb + lhsFree, rhsSizes);
  for (int64_t l = 0; l < loops; ++l)
    if (lhsSizes[l] >= 0 && rhsSizes[l] >= 0 && lhsSizes[l] != rhsSizes[l])
      return op->emitError("batching or contracting dimension sizes differ");
  SmallVector<AffineExpr> outExprs;
  for (int64_t d = 0; d < outRank; ++d)
    outExprs.push_back(b.getAffineDimExpr(d));
  AffineMap outMap = AffineMap::get(loops, 0, outExprs, b.getContext());

  // f16/bf16 products accumulate in f32 (then round), as XLA does.
  return contract(b, op->getLoc(), op->getOperand(0), op->getOperand(1), lhsMap,
                  rhsMap, outMap, result);
}

FailureOr<SmallVector<Value>> Converter::reduce(Operation *op) {
  FailureOr<DenseI64ArrayAttr> dims = i64Array(op, "dimensions");
  if (failed(dims))
    return failure();
  unsigned n = op->getNumResults();
  if (op->getNumOperands() != 2 * n || op->getNumRegions() != 1 ||
      op->getRegion(0).getBlocks().size() != 1)
    return op->emitError("expected N inputs, N inits and one reducer block");
  Block &body = op->getRegion(0).front();
  if (body.getNumArguments() != 2 * n)
    return op->emitError("the reducer must take 2 x ") << n << " arguments";
  RankedTensorType in = staticTensor(op->getOperand(0));
  int64_t rank = in.getRank();
  SmallVector<utils::IteratorType> iters = parallelIterators(rank);
  SmallVector<AffineExpr> outExprs;
  for (int64_t d = 0; d < rank; ++d) {
    if (llvm::is_contained(dims->asArrayRef(), d))
      iters[d] = utils::IteratorType::reduction;
    else
      outExprs.push_back(b.getAffineDimExpr(d));
  }
  AffineMap inMap = b.getMultiDimIdentityMap(rank);
  AffineMap outMap = AffineMap::get(rank, 0, outExprs, b.getContext());
  Location loc = op->getLoc();
  SmallVector<Value> inits;
  SmallVector<Type> resultTypes;
  SmallVector<AffineMap> maps;
  for (unsigned i = 0; i < n; ++i) {
    RankedTensorType t = staticTensor(op->getResult(i));
    RankedTensorType input = staticTensor(op->getOperand(i));
    if (input.getShape() != in.getShape() ||
        t.getRank() != (int64_t)outExprs.size())
      return op->emitError("reduce inputs and results do not agree in shape");
    Value scalar =
        tensor::ExtractOp::create(b, loc, op->getOperand(n + i), ValueRange());
    inits.push_back(linalg::FillOp::create(b, loc, scalar, emptyLike(b, loc, t))
                        .getResult(0));
    resultTypes.push_back(t);
    maps.push_back(inMap);
  }
  for (unsigned i = 0; i < n; ++i)
    maps.push_back(outMap);
  LogicalResult status = success();
  auto generic = linalg::GenericOp::create(
      b, loc, resultTypes, op->getOperands().take_front(n), inits, maps, iters,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        // The linalg body's arguments are (elements..., accumulators...).
        FailureOr<SmallVector<Value>> next =
            applyReducer(nb, op, body, args.drop_front(n), args.take_front(n));
        if (failed(next)) {
          status = failure();
          linalg::YieldOp::create(nb, l, args.drop_front(n));
          return;
        }
        linalg::YieldOp::create(nb, l, *next);
      });
  if (failed(status)) {
    generic->erase();
    return op->emitError("could not convert the reducer");
  }
  return SmallVector<Value>(generic.getResults());
}

FailureOr<Value> Converter::reshape(Operation *op, RankedTensorType result) {
  Location loc = op->getLoc();
  Value in = op->getOperand(0);
  RankedTensorType src = staticTensor(in);
  if (src.getNumElements() != result.getNumElements())
    return op->emitError("reshape changes the number of elements");
  if (src.getShape() == result.getShape())
    return in;
  return reshapeTensor(b, loc, in, result);
}

FailureOr<Value> Converter::slice(Operation *op, RankedTensorType result) {
  FailureOr<DenseI64ArrayAttr> start = i64Array(op, "start_indices");
  FailureOr<DenseI64ArrayAttr> limit = i64Array(op, "limit_indices");
  FailureOr<DenseI64ArrayAttr> strides = i64Array(op, "strides");
  if (failed(start) || failed(limit) || failed(strides))
    return failure();
  RankedTensorType src = staticTensor(op->getOperand(0));
  int64_t rank = src.getRank();
  if ((int64_t)start->size() != rank || (int64_t)limit->size() != rank ||
      (int64_t)strides->size() != rank)
    return op->emitError("slice bounds must name every dim");
  SmallVector<int64_t> sizes;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t s = (*start)[d], l = (*limit)[d], t = (*strides)[d];
    if (s < 0 || l > src.getDimSize(d) || s > l || t < 1)
      return op->emitError() << "slice bounds out of range in dim " << d;
    sizes.push_back((l - s + t - 1) / t);
  }
  if (ArrayRef<int64_t>(sizes) != result.getShape())
    return op->emitError("slice result shape does not match its bounds");
  return Value(tensor::ExtractSliceOp::create(
      b, op->getLoc(), result, op->getOperand(0), ValueRange(), ValueRange(),
      ValueRange(), b.getDenseI64ArrayAttr(*start),
      b.getDenseI64ArrayAttr(sizes), b.getDenseI64ArrayAttr(*strides)));
}

/// XLA gather, element by element: the output's batch dims pick a start
/// index vector from `indices`, its offset dims walk the slice.
/// The start indices of a dynamic slice or update (operands from `first`
/// on), clamped as StableHLO specifies so that `sizes` fits in `shape`.
/// Indices must be constants: loop counters are, once loops are unrolled.
static FailureOr<SmallVector<int64_t>> constantStarts(Operation *op,
                                                      unsigned first,
                                                      ArrayRef<int64_t> shape,
                                                      ArrayRef<int64_t> sizes) {
  if (op->getNumOperands() != first + shape.size() ||
      sizes.size() != shape.size())
    return op->emitError("expected one start index per dimension");
  SmallVector<int64_t> starts;
  for (auto [d, dim] : llvm::enumerate(shape)) {
    DenseIntElementsAttr index;
    if (!matchPattern(op->getOperand(first + d), m_Constant(&index)) ||
        index.getNumElements() != 1)
      return op->emitError() << "start index " << d
                             << " is not a compile-time constant (only "
                                "indices computed from constants and loop "
                                "counters are supported)";
    if (sizes[d] > dim)
      return op->emitError() << "slice size exceeds dimension " << d;
    int64_t start = (*index.value_begin<APInt>()).getSExtValue();
    starts.push_back(std::clamp<int64_t>(start, 0, dim - sizes[d]));
  }
  return starts;
}

FailureOr<Value> Converter::dynamicSlice(Operation *op,
                                         RankedTensorType result) {
  RankedTensorType src = staticTensor(op->getOperand(0));
  FailureOr<SmallVector<int64_t>> starts =
      constantStarts(op, 1, src.getShape(), result.getShape());
  if (failed(starts))
    return failure();
  SmallVector<int64_t> ones(result.getRank(), 1);
  return Value(tensor::ExtractSliceOp::create(
      b, op->getLoc(), result, op->getOperand(0), ValueRange(), ValueRange(),
      ValueRange(), b.getDenseI64ArrayAttr(*starts),
      b.getDenseI64ArrayAttr(result.getShape()), b.getDenseI64ArrayAttr(ones)));
}

FailureOr<Value> Converter::dynamicUpdateSlice(Operation *op,
                                               RankedTensorType result) {
  RankedTensorType update = staticTensor(op->getOperand(1));
  if (!update || update.getRank() != result.getRank())
    return op->emitError("the update must have the result's rank");
  FailureOr<SmallVector<int64_t>> starts =
      constantStarts(op, 2, result.getShape(), update.getShape());
  if (failed(starts))
    return failure();
  SmallVector<int64_t> ones(result.getRank(), 1);
  return Value(tensor::InsertSliceOp::create(
      b, op->getLoc(), op->getOperand(1), op->getOperand(0), ValueRange(),
      ValueRange(), ValueRange(), b.getDenseI64ArrayAttr(*starts),
      b.getDenseI64ArrayAttr(update.getShape()), b.getDenseI64ArrayAttr(ones)));
}

FailureOr<Value> Converter::gather(Operation *op, RankedTensorType result) {
  auto dims = op->getAttrOfType<DictionaryAttr>("dimension_numbers");
  FailureOr<DenseI64ArrayAttr> sliceSizes = i64Array(op, "slice_sizes");
  if (!dims || failed(sliceSizes) || op->getNumOperands() != 2)
    return op->emitError("expected gather dimension_numbers and slice_sizes");
  auto list = [&](StringRef name) {
    auto a = dims.getAs<DenseI64ArrayAttr>(name);
    return a ? SmallVector<int64_t>(a.asArrayRef()) : SmallVector<int64_t>();
  };
  SmallVector<int64_t> offsetDims = list("offset_dims"),
                       collapsed = list("collapsed_slice_dims"),
                       startMap = list("start_index_map");
  if (!list("operand_batching_dims").empty())
    return op->emitError("gather with batching dims is not supported");
  auto ivdAttr = dims.getAs<IntegerAttr>("index_vector_dim");
  RankedTensorType operand = staticTensor(op->getOperand(0));
  RankedTensorType indices = staticTensor(op->getOperand(1));
  int64_t ivd = ivdAttr ? ivdAttr.getInt() : indices.getRank();
  int64_t rank = result.getRank();
  if ((int64_t)sliceSizes->size() != operand.getRank())
    return op->emitError("slice_sizes must name every operand dim");
  // Operand dims that the offset dims walk, in order.
  SmallVector<int64_t> walked;
  for (int64_t d = 0; d < operand.getRank(); ++d)
    if (!llvm::is_contained(collapsed, d))
      walked.push_back(d);
  if (walked.size() != offsetDims.size())
    return op->emitError("offset_dims do not match the uncollapsed dims");
  if (ivd < 0 || ivd > indices.getRank())
    return op->emitError("index_vector_dim is out of range");
  int64_t vectorLen = ivd < indices.getRank() ? indices.getDimSize(ivd) : 1;
  if ((int64_t)startMap.size() != vectorLen)
    return op->emitError("start_index_map does not match the index vector");
  auto inRange = [](ArrayRef<int64_t> dims, int64_t rank) {
    return llvm::all_of(dims, [&](int64_t d) { return d >= 0 && d < rank; });
  };
  if (!inRange(startMap, operand.getRank()) ||
      !inRange(collapsed, operand.getRank()) || !inRange(offsetDims, rank))
    return op->emitError("gather dimension out of range");
  for (int64_t d = 0; d < operand.getRank(); ++d)
    if ((*sliceSizes)[d] < 0 || (*sliceSizes)[d] > operand.getDimSize(d))
      return op->emitError("slice size out of range in dim ") << d;
  // Batch dims of the output are the indices' dims but the vector's.
  if (rank - (int64_t)offsetDims.size() !=
      indices.getRank() - (ivd < indices.getRank() ? 1 : 0))
    return op->emitError("gather result rank does not match its indices");
  Location loc = op->getLoc();
  auto generic = linalg::GenericOp::create(
      b, loc, result, ValueRange(), emptyLike(b, loc, result),
      {b.getMultiDimIdentityMap(rank)}, parallelIterators(rank),
      [&](OpBuilder &nb, Location l, ValueRange) {
        SmallVector<Value> outIdx;
        SmallVector<Value> batchIdx;
        for (int64_t d = 0; d < rank; ++d) {
          outIdx.push_back(linalg::IndexOp::create(nb, l, d));
          if (!llvm::is_contained(offsetDims, d))
            batchIdx.push_back(outIdx.back());
        }
        SmallVector<Value> start(operand.getRank(),
                                 arith::ConstantIndexOp::create(nb, l, 0));
        for (int64_t k = 0; k < vectorLen; ++k) {
          SmallVector<Value> at(batchIdx);
          if (ivd < indices.getRank())
            at.insert(at.begin() + ivd,
                      arith::ConstantIndexOp::create(nb, l, k));
          Value s = tensor::ExtractOp::create(nb, l, op->getOperand(1), at);
          s = arith::IndexCastOp::create(nb, l, nb.getIndexType(), s);
          // Starts are clamped so that the slice stays in bounds.
          int64_t d = startMap[k];
          Value hi = arith::ConstantIndexOp::create(
              nb, l, operand.getDimSize(d) - (*sliceSizes)[d]);
          Value zero = arith::ConstantIndexOp::create(nb, l, 0);
          start[d] = arith::MinSIOp::create(
              nb, l, arith::MaxSIOp::create(nb, l, s, zero), hi);
        }
        SmallVector<Value> operandIdx(start);
        for (auto [k, d] : llvm::enumerate(walked))
          operandIdx[d] =
              arith::AddIOp::create(nb, l, start[d], outIdx[offsetDims[k]]);
        Value v =
            tensor::ExtractOp::create(nb, l, op->getOperand(0), operandIdx);
        linalg::YieldOp::create(nb, l, v);
      });
  return generic.getResult(0);
}

/// `pad` without interior padding, as a concatenation per padded dim of
/// the operand with filled pieces (negative amounts slice the operand): a
/// form attn-raise reads piece by piece.
FailureOr<Value> Converter::pad(Operation *op, RankedTensorType result) {
  FailureOr<DenseI64ArrayAttr> lo = i64Array(op, "edge_padding_low");
  FailureOr<DenseI64ArrayAttr> hi = i64Array(op, "edge_padding_high");
  FailureOr<DenseI64ArrayAttr> interior = i64Array(op, "interior_padding");
  if (failed(lo) || failed(hi) || failed(interior))
    return failure();
  RankedTensorType src = staticTensor(op->getOperand(0));
  int64_t rank = src.getRank();
  if ((int64_t)lo->size() != rank || (int64_t)hi->size() != rank ||
      (int64_t)interior->size() != rank)
    return op->emitError("pad amounts must name every dim");
  if (staticTensor(op->getOperand(1)).getRank() != 0)
    return op->emitError("the padding value must be a scalar (rank 0)");
  if (llvm::any_of(interior->asArrayRef(), [](int64_t x) { return x != 0; }))
    return op->emitError("interior padding is not supported");
  Location loc = op->getLoc();
  Value cur = padWithPieces(
      b, loc, op->getOperand(0), lo->asArrayRef(), hi->asArrayRef(),
      [&](RankedTensorType pt) {
        int64_t r = pt.getRank();
        return linalg::GenericOp::create(
                   b, loc, pt, op->getOperand(1), emptyLike(b, loc, pt),
                   {AffineMap::get(r, 0, {}, b.getContext()),
                    b.getMultiDimIdentityMap(r)},
                   parallelIterators(r),
                   [](OpBuilder &nb, Location l, ValueRange args) {
                     linalg::YieldOp::create(nb, l, args[0]);
                   })
            .getResult(0);
      });
  if (!cur)
    return op->emitError("padding crops more than a dim holds");
  if (cur.getType() != result)
    return op->emitError("pad result shape does not match its amounts");
  return cur;
}

/// The scalar body of a reducer region (`stablehlo.return` of rank-0 ops on
/// its arguments, accumulators first) applied to `accs` and `elems`.
FailureOr<SmallVector<Value>>
Converter::applyReducer(OpBuilder &nb, Operation *op, Block &body,
                        ValueRange accs, ValueRange elems) {
  IRMapping scalars;
  unsigned n = accs.size();
  for (unsigned i = 0; i < n; ++i) {
    scalars.map(body.getArgument(i), accs[i]);
    scalars.map(body.getArgument(n + i), elems[i]);
  }
  for (Operation &inner : body) {
    SmallVector<Value> operands;
    for (Value v : inner.getOperands())
      operands.push_back(scalars.lookupOrNull(v));
    if (llvm::is_contained(operands, Value()))
      return inner.emitError("the reducer may only use its arguments and "
                             "its own results");
    if (inner.getName().getStringRef() == "stablehlo.return") {
      if (operands.size() != n)
        return inner.emitError("the reducer must return ") << n << " values";
      return operands;
    }
    if (inner.getNumResults() != 1 || !staticTensor(inner.getResult(0)) ||
        staticTensor(inner.getResult(0)).getRank() != 0)
      return inner.emitError("reducer ops must be scalar (rank-0) ops");
    FailureOr<Value> v =
        emitScalar(nb, &inner, operands,
                   staticTensor(inner.getResult(0)).getElementType());
    if (failed(v))
      return failure();
    scalars.map(inner.getResult(0), *v);
  }
  return op->emitError("the reducer has no stablehlo.return");
}

/// `reduce_window` (one input; JAX's cumsum, cumprod, cummax) as a
/// reduction over the window dims: output element `o` folds the operand at
/// `o * stride + w * dilation - low` over the window positions `w`, the
/// positions in the padding contributing the init value.
FailureOr<Value> Converter::reduceWindow(Operation *op,
                                         RankedTensorType result) {
  if (op->getNumOperands() != 2 || op->getNumRegions() != 1 ||
      op->getRegion(0).getBlocks().size() != 1 ||
      op->getRegion(0).front().getNumArguments() != 2)
    return op->emitError("reduce_window with one input, one init and a "
                         "two-argument reducer is supported");
  RankedTensorType src = staticTensor(op->getOperand(0));
  int64_t rank = src.getRank();
  auto list = [&](StringRef attrName, int64_t dflt) {
    SmallVector<int64_t> v(rank, dflt);
    if (auto a = op->getAttrOfType<DenseI64ArrayAttr>(attrName))
      v.assign(a.asArrayRef().begin(), a.asArrayRef().end());
    return v;
  };
  SmallVector<int64_t> window = list("window_dimensions", 1),
                       strides = list("window_strides", 1),
                       baseDil = list("base_dilations", 1),
                       winDil = list("window_dilations", 1);
  SmallVector<int64_t> low(rank, 0), high(rank, 0);
  if (auto padding = op->getAttrOfType<DenseIntElementsAttr>("padding")) {
    if (padding.getNumElements() != 2 * rank)
      return op->emitError("padding must hold a (low, high) pair per dim");
    auto values = llvm::to_vector(padding.getValues<int64_t>());
    for (int64_t d = 0; d < rank; ++d) {
      low[d] = values[2 * d];
      high[d] = values[2 * d + 1];
    }
  }
  if (!op->getAttrOfType<DenseI64ArrayAttr>("window_dimensions") ||
      (int64_t)window.size() != rank || (int64_t)strides.size() != rank ||
      (int64_t)baseDil.size() != rank || (int64_t)winDil.size() != rank)
    return op->emitError("reduce_window attributes must name every dim");
  if (llvm::any_of(baseDil, [](int64_t x) { return x != 1; }))
    return op->emitError("reduce_window with base dilations is not supported");
  if (result.getRank() != rank)
    return op->emitError("reduce_window result rank differs from its input");
  for (int64_t d = 0; d < rank; ++d) {
    if (window[d] < 1 || strides[d] < 1 || winDil[d] < 1)
      return op->emitError() << "window, stride and dilation of dim " << d
                             << " must be positive";
    int64_t span = (window[d] - 1) * winDil[d] + 1;
    int64_t padded = src.getDimSize(d) + low[d] + high[d];
    int64_t extent = padded < span ? 0 : (padded - span) / strides[d] + 1;
    if (extent != result.getDimSize(d))
      return op->emitError()
             << "reduce_window result dim " << d << " should be " << extent;
  }
  Location loc = op->getLoc();
  // The window dims are loops of their own, known to linalg through an
  // unread operand of the window's shape.
  Value windowShape =
      tensor::EmptyOp::create(b, loc, window, result.getElementType());
  SmallVector<AffineExpr> outExprs, winExprs;
  for (int64_t d = 0; d < rank; ++d) {
    outExprs.push_back(b.getAffineDimExpr(d));
    winExprs.push_back(b.getAffineDimExpr(rank + d));
  }
  SmallVector<utils::IteratorType> iters = parallelIterators(rank);
  iters.append(rank, utils::IteratorType::reduction);
  Value init = tensor::ExtractOp::create(b, loc, op->getOperand(1));
  Value filled = linalg::FillOp::create(b, loc, init, emptyLike(b, loc, result))
                     .getResult(0);
  Block &body = op->getRegion(0).front();
  LogicalResult status = success();
  auto generic = linalg::GenericOp::create(
      b, loc, result, windowShape, filled,
      {AffineMap::get(2 * rank, 0, winExprs, b.getContext()),
       AffineMap::get(2 * rank, 0, outExprs, b.getContext())},
      iters, [&](OpBuilder &nb, Location l, ValueRange args) {
        Value inside = arith::ConstantIntOp::create(nb, l, 1, 1);
        SmallVector<Value> at;
        for (int64_t d = 0; d < rank; ++d) {
          auto c = [&](int64_t x) {
            return arith::ConstantIndexOp::create(nb, l, x);
          };
          Value o = linalg::IndexOp::create(nb, l, d);
          Value w = linalg::IndexOp::create(nb, l, rank + d);
          Value idx = arith::AddIOp::create(
              nb, l, arith::MulIOp::create(nb, l, o, c(strides[d])),
              arith::MulIOp::create(nb, l, w, c(winDil[d])));
          idx = arith::SubIOp::create(nb, l, idx, c(low[d]));
          Value ge = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sge,
                                           idx, c(0));
          Value lt = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt,
                                           idx, c(src.getDimSize(d)));
          inside = arith::AndIOp::create(nb, l, inside,
                                         arith::AndIOp::create(nb, l, ge, lt));
          at.push_back(arith::MinSIOp::create(
              nb, l, arith::MaxSIOp::create(nb, l, idx, c(0)),
              c(src.getDimSize(d) - 1)));
        }
        Value x = tensor::ExtractOp::create(nb, l, op->getOperand(0), at);
        Value scalarInit =
            tensor::ExtractOp::create(nb, l, op->getOperand(1), ValueRange());
        x = arith::SelectOp::create(nb, l, inside, x, scalarInit);
        FailureOr<SmallVector<Value>> acc =
            applyReducer(nb, op, body, args[1], x);
        if (failed(acc)) {
          status = failure();
          acc = SmallVector<Value>{args[1]};
        }
        linalg::YieldOp::create(nb, l, *acc);
      });
  if (failed(status)) {
    generic->erase();
    return failure();
  }
  return generic.getResult(0);
}

LogicalResult Converter::convert(Operation *op) {
  StringRef name = op->getName().getStringRef();
  if (!name.consume_front("stablehlo."))
    name.consume_front("chlo.");
  for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults()))
    if (!staticTensor(v))
      return op->emitError() << "'" << op->getName()
                             << "': only statically shaped tensors of "
                                "integers or floats are supported, got "
                             << v.getType();
  // Operand and result counts first: everything below relies on them.
  unsigned operands = op->getNumOperands(), results = op->getNumResults();
  std::optional<unsigned> arity =
      llvm::StringSwitch<std::optional<unsigned>>(name)
          .Cases({"constant", "iota"}, 0u)
          .Cases(
              {"broadcast_in_dim", "transpose", "reshape", "slice", "convert"},
              1u)
          .Cases({"dot_general", "gather", "compare", "pad", "reduce_window"},
                 2u)
          .Cases({"select", "clamp"}, 3u)
          .Default(std::nullopt);
  if ((arity && operands != *arity) ||
      (name == "concatenate" && operands == 0) ||
      (name == "reduce" && (results == 0 || operands != 2 * results)) ||
      (name != "reduce" && results != 1))
    return op->emitError() << "'" << op->getName() << "' with " << operands
                           << " operands and " << results
                           << " results is not supported";
  b.setInsertionPoint(op);
  if (name == "reduce") {
    FailureOr<SmallVector<Value>> results = reduce(op);
    if (failed(results))
      return failure();
    op->replaceAllUsesWith(*results);
    op->erase();
    return success();
  }
  RankedTensorType result = staticTensor(op->getResult(0));
  FailureOr<Value> value;
  if (name == "constant") {
    auto attr = op->getAttrOfType<ElementsAttr>("value");
    if (!attr || attr.getType() != result)
      return op->emitError("expected a 'value' of the result type");
    value = Value(arith::ConstantOp::create(b, op->getLoc(), result,
                                            cast<TypedAttr>(attr)));
  } else if (name == "broadcast_in_dim") {
    value = broadcastInDim(op, result);
  } else if (name == "transpose") {
    value = transpose(op, result);
  } else if (name == "iota") {
    value = iota(op, result);
  } else if (name == "dot_general") {
    value = dotGeneral(op, result);
  } else if (name == "reshape") {
    value = reshape(op, result);
  } else if (name == "slice") {
    value = slice(op, result);
  } else if (name == "dynamic_slice") {
    value = dynamicSlice(op, result);
  } else if (name == "dynamic_update_slice") {
    value = dynamicUpdateSlice(op, result);
  } else if (name == "gather") {
    value = gather(op, result);
  } else if (name == "pad") {
    value = pad(op, result);
  } else if (name == "reduce_window") {
    value = reduceWindow(op, result);
  } else if (name == "concatenate") {
    FailureOr<int64_t> dim = i64Attr(op, "dimension");
    if (failed(dim))
      return failure();
    if (*dim < 0 || *dim >= result.getRank())
      return op->emitError("concatenate dimension is out of range");
    int64_t total = 0;
    for (Value v : op->getOperands()) {
      RankedTensorType t = staticTensor(v);
      bool agree = t.getRank() == result.getRank() &&
                   t.getElementType() == result.getElementType();
      for (int64_t d = 0; agree && d < t.getRank(); ++d)
        agree = d == *dim || t.getDimSize(d) == result.getDimSize(d);
      if (!agree)
        return op->emitError("concatenate operands do not match the result");
      total += t.getDimSize(*dim);
    }
    if (total != result.getDimSize(*dim))
      return op->emitError("concatenate sizes do not add up to the result");
    value = Value(
        tensor::ConcatOp::create(b, op->getLoc(), *dim, op->getOperands()));
  } else {
    value = elementwise(op, result);
  }
  if (failed(value))
    return failure();
  op->getResult(0).replaceAllUsesWith(*value);
  op->erase();
  return success();
}

/// Inlines every call of a function defined in `module` (JAX's private
/// helpers), then erases the private functions nobody calls any more.
LogicalResult inlineCalls(ModuleOp module) {
  SymbolTable symbols(module);
  for (int round = 0;; ++round) {
    SmallVector<func::CallOp> calls;
    module.walk([&](func::CallOp call) { calls.push_back(call); });
    if (calls.empty())
      break;
    if (round == 64)
      return calls.front().emitError("calls nest too deeply (recursion?)");
    for (func::CallOp call : calls) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal() ||
          !llvm::hasSingleElement(callee.getBody()))
        return call.emitError("cannot inline a call to '")
               << call.getCallee() << "' (no single-block body here)";
      IRMapping map;
      Block &body = callee.getBody().front();
      map.map(body.getArguments(), call.getOperands());
      OpBuilder b(call);
      for (Operation &op : body.without_terminator())
        b.clone(op, map);
      for (auto [r, v] :
           llvm::zip(call.getResults(), body.getTerminator()->getOperands()))
        r.replaceAllUsesWith(map.lookupOrDefault(v));
      call.erase();
    }
  }
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (func.isPrivate() && SymbolTable::symbolKnownUseEmpty(func, module))
      func.erase();
  return success();
}

struct ImportStableHLOPass
    : flashlight::impl::ImportStableHLOBase<ImportStableHLOPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(inlineCalls(module)) ||
        failed(flashlight::shlo::unrollConstantLoops(module)))
      return signalPassFailure();
    Converter converter(&getContext());
    SmallVector<Operation *> work;
    // Outermost first: a reduce's region is consumed with the reduce.
    module.walk<WalkOrder::PreOrder>([&](Operation *op) {
      StringRef ns = op->getDialect() ? op->getDialect()->getNamespace() : "";
      if (ns == "stablehlo" || ns == "chlo") {
        work.push_back(op);
        return WalkResult::skip();
      }
      return WalkResult::advance();
    });
    for (Operation *op : work)
      if (failed(converter.convert(op)))
        return signalPassFailure();
  }
};

} // namespace
