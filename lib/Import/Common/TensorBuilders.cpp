//===- TensorBuilders.cpp - Building linalg on tensors for importers ------===//

#include "flashlight/Import/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

using namespace mlir;

Value flashlight::import::constantOf(OpBuilder &b, Location loc, Type type,
                                     double value) {
  if (isa<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
  return arith::ConstantOp::create(b, loc,
                                   b.getIntegerAttr(type, int64_t(value)));
}

Value flashlight::import::castScalar(OpBuilder &b, Location loc, Value x,
                                     Type to) {
  Type from = x.getType();
  if (from == to)
    return x;
  auto fromF = dyn_cast<FloatType>(from);
  auto toF = dyn_cast<FloatType>(to);
  if (fromF && toF) {
    if (fromF.getWidth() == toF.getWidth()) { // f16 <-> bf16 through f32.
      x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
      fromF = b.getF32Type();
    }
    if (fromF.getWidth() < toF.getWidth())
      return arith::ExtFOp::create(b, loc, to, x);
    return arith::TruncFOp::create(b, loc, to, x);
  }
  if (toF)
    return from.isInteger(1) ? Value(arith::UIToFPOp::create(b, loc, to, x))
                             : Value(arith::SIToFPOp::create(b, loc, to, x));
  if (fromF) {
    if (to.isInteger(1))
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, x,
                                   constantOf(b, loc, from, 0));
    return arith::FPToSIOp::create(b, loc, to, x);
  }
  unsigned fw = from.getIntOrFloatBitWidth(), tw = to.getIntOrFloatBitWidth();
  if (tw == 1)
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, x,
                                 constantOf(b, loc, from, 0));
  if (fw == 1)
    return arith::ExtUIOp::create(b, loc, to, x);
  if (fw < tw)
    return arith::ExtSIOp::create(b, loc, to, x);
  return arith::TruncIOp::create(b, loc, to, x);
}

Value flashlight::import::emptyLike(OpBuilder &b, Location loc,
                                    RankedTensorType type) {
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 type.getElementType());
}

SmallVector<utils::IteratorType>
flashlight::import::parallelIterators(int64_t rank) {
  return SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel);
}

Value flashlight::import::mapElements(
    OpBuilder &b, Location loc, RankedTensorType result, ValueRange operands,
    ArrayRef<AffineMap> maps,
    function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  SmallVector<AffineMap> all(maps);
  all.push_back(b.getMultiDimIdentityMap(result.getRank()));
  auto generic = linalg::GenericOp::create(
      b, loc, result, operands, emptyLike(b, loc, result), all,
      parallelIterators(result.getRank()),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        linalg::YieldOp::create(nb, l, body(nb, l, args.drop_back()));
      });
  return generic.getResult(0);
}

Value flashlight::import::copyThroughMap(OpBuilder &b, Location loc,
                                         Value input, AffineMap map,
                                         RankedTensorType result) {
  return mapElements(
      b, loc, result, input, map,
      [](OpBuilder &, Location, ValueRange args) { return args[0]; });
}

Value flashlight::import::reshapeTensor(OpBuilder &b, Location loc, Value input,
                                        RankedTensorType result) {
  auto src = cast<RankedTensorType>(input.getType());
  if (src.getShape() == result.getShape())
    return input;
  if (auto re = getReassociationIndicesForReshape(src, result)) {
    if (src.getRank() > result.getRank())
      return tensor::CollapseShapeOp::create(b, loc, result, input, *re);
    return tensor::ExpandShapeOp::create(b, loc, result, input, *re);
  }
  // Otherwise through one dimension.
  auto flat =
      RankedTensorType::get({src.getNumElements()}, src.getElementType());
  auto all = [](int64_t rank) {
    ReassociationIndices r;
    for (int64_t i = 0; i < rank; ++i)
      r.push_back(i);
    return SmallVector<ReassociationIndices>{r};
  };
  Value collapsed =
      tensor::CollapseShapeOp::create(b, loc, flat, input, all(src.getRank()));
  return tensor::ExpandShapeOp::create(b, loc, result, collapsed,
                                       all(result.getRank()));
}

Value flashlight::import::contract(OpBuilder &b, Location loc, Value lhs,
                                   Value rhs, AffineMap lhsMap,
                                   AffineMap rhsMap, AffineMap outMap,
                                   RankedTensorType result) {
  Type elt = result.getElementType();
  Type acc = elt;
  if (auto f = dyn_cast<FloatType>(elt); f && f.getWidth() < 32)
    acc = b.getF32Type();
  auto accType = RankedTensorType::get(result.getShape(), acc);
  Value init = linalg::FillOp::create(b, loc, constantOf(b, loc, acc, 0),
                                      emptyLike(b, loc, accType))
                   .getResult(0);
  SmallVector<utils::IteratorType> iters =
      parallelIterators(lhsMap.getNumDims());
  for (unsigned l = result.getRank(); l < iters.size(); ++l)
    iters[l] = utils::IteratorType::reduction;
  auto generic = linalg::GenericOp::create(
      b, loc, accType, ValueRange{lhs, rhs}, init, {lhsMap, rhsMap, outMap},
      iters, [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = castScalar(nb, l, args[0], acc);
        Value y = castScalar(nb, l, args[1], acc);
        Value sum =
            isa<FloatType>(acc)
                ? Value(arith::AddFOp::create(
                      nb, l, args[2], arith::MulFOp::create(nb, l, x, y)))
                : Value(arith::AddIOp::create(
                      nb, l, args[2], arith::MulIOp::create(nb, l, x, y)));
        linalg::YieldOp::create(nb, l, sum);
      });
  Value out = generic.getResult(0);
  if (acc == elt)
    return out;
  AffineMap id = b.getMultiDimIdentityMap(result.getRank());
  return mapElements(b, loc, result, out, id,
                     [&](OpBuilder &nb, Location l, ValueRange args) {
                       return castScalar(nb, l, args[0], elt);
                     });
}

Value flashlight::import::padWithPieces(
    OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> low,
    ArrayRef<int64_t> high, function_ref<Value(RankedTensorType)> filled) {
  Value cur = x;
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  for (int64_t d = 0; d < rank; ++d) {
    int64_t lo = low[d], hi = high[d];
    auto t = cast<RankedTensorType>(cur.getType());
    int64_t size = t.getDimSize(d);
    int64_t cropLo = std::max<int64_t>(-lo, 0),
            cropHi = std::max<int64_t>(-hi, 0);
    if (cropLo + cropHi > size)
      return Value();
    if (cropLo || cropHi) {
      SmallVector<int64_t> offsets(rank, 0), sizes(t.getShape()),
          strides(rank, 1);
      offsets[d] = cropLo;
      sizes[d] = size - cropLo - cropHi;
      cur = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get(sizes, t.getElementType()), cur,
          ValueRange(), ValueRange(), ValueRange(),
          b.getDenseI64ArrayAttr(offsets), b.getDenseI64ArrayAttr(sizes),
          b.getDenseI64ArrayAttr(strides));
    }
    auto piece = [&](int64_t extent) {
      SmallVector<int64_t> shape(
          cast<RankedTensorType>(cur.getType()).getShape());
      shape[d] = extent;
      return filled(RankedTensorType::get(shape, t.getElementType()));
    };
    SmallVector<Value> pieces;
    if (lo > 0)
      pieces.push_back(piece(lo));
    pieces.push_back(cur);
    if (hi > 0)
      pieces.push_back(piece(hi));
    if (pieces.size() > 1)
      cur = tensor::ConcatOp::create(b, loc, d, pieces);
  }
  return cur;
}
