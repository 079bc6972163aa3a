//===- ATenLowering.cpp - ATen operator calls to linalg on tensors -------===//
//
// One handler per ATen op, each written with a few tensor constructions
// (broadcasting elementwise, contraction, reduction, layout): the call
// becomes the literal linalg program, and attn-raise finds the attention in
// it as it does for JAX's. scaled_dot_product_attention is expanded into
// the textbook program rather than mapped to attn directly, so every
// attention takes the same road.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Import/ATen.h"

#include "flashlight/Import/TensorBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <nlohmann/json.hpp>

using namespace mlir;
using namespace flashlight;
using namespace flashlight::import;
using json = nlohmann::json;

namespace {

/// The tensors among `values` (the others are scalars).
SmallVector<Value> tensorsOf(ArrayRef<Value> values) {
  SmallVector<Value> tensors;
  for (Value v : values)
    if (isa<RankedTensorType>(v.getType()))
      tensors.push_back(v);
  return tensors;
}

bool isLowFloat(Type t) {
  return isa<FloatType>(t) && t.getIntOrFloatBitWidth() < 32;
}
} // namespace

class flashlight::ATenLowering::Impl {
public:
  explicit Impl(MLIRContext *ctx)
      : ctx(ctx), b(ctx), loc(UnknownLoc::get(ctx)) {}

  FailureOr<SmallVector<Value, 1>> lower(StringRef target, const json &call,
                                         ArrayRef<RankedTensorType> outs);
  /// Sets the call being lowered, for arguments and diagnostics.
  void at(const json *call, Location l, StringRef label) {
    node = call;
    loc = l;
    nodeName = label.str();
  }

  // Diagnostics, at the current call.
  InFlightDiagnostic error() { return emitNodeError(loc, nodeName); }
  LogicalResult fail(const Twine &message) { return error() << message; }

  // Reading arguments.
  FailureOr<Value> tensor(const json &arg);
  std::optional<double> number(const json &arg);
  FailureOr<SmallVector<int64_t>> ints(const json &arg);
  const json &arg(unsigned i, StringRef name);
  std::optional<int64_t> integer(const json &arg);
  int64_t normDim(int64_t d, int64_t rank) { return d < 0 ? d + rank : d; }
  /// A dim argument, normalized and checked against `rank`.
  FailureOr<int64_t> dimArg(const json &arg, int64_t rank);
  /// Fails unless every tensor in `operands` broadcasts to `out`.
  LogicalResult checkBroadcast(ArrayRef<Value> operands, RankedTensorType out);

  // Tensor constructions.
  Value broadcastTo(Value x, RankedTensorType to);
  Value elementwise(ArrayRef<Value> operands, RankedTensorType out,
                    Type compute,
                    function_ref<Value(OpBuilder &, Location, ValueRange)> fn);
  Value matmul(Value x, Value y, Type outElt);
  /// How a reduction combines: sum, max, and (all), or (any).
  enum class Combine { Sum, Max, And, Or };
  Value reduce(Value x, ArrayRef<int64_t> dims, bool keepDim, Type acc,
               Combine combine);
  Value softmax(Value x, int64_t dim, Type outElt);
  Value transpose(Value x, ArrayRef<int64_t> perm);
  Value whereKeep(Value keep, Value x, double otherwise);
  Type promote(ArrayRef<Value> operands);

  // ATen ops.
  FailureOr<Value> lowerOp(StringRef target, RankedTensorType out);
  FailureOr<Value> sdpa(RankedTensorType out);
  /// `searchsorted(sorted, values)`: per value, how many elements of the
  /// 1-D `sorted` are below it (`right`: at most it), a reduction over them.
  FailureOr<Value> searchsorted(RankedTensorType out);
  FailureOr<SmallVector<Value, 1>> split(StringRef target,
                                         ArrayRef<RankedTensorType> outs);
  FailureOr<Value> index(Value self, const json &indices, RankedTensorType out);
  /// `out[p] = self[at(p)]`: a generic over `out`'s dims reading the index
  /// tensors `indexTensors` through `maps`; `at` gives self's indices from
  /// the elements read.
  Value gather(
      Value self, RankedTensorType out, ArrayRef<Value> indexTensors,
      ArrayRef<AffineMap> maps,
      function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> at);
  /// Fails unless `t` is a tensor of integers (an index tensor).
  LogicalResult checkIndexTensor(Value t);

  MLIRContext *ctx;
  OpBuilder b;
  Location loc;
  const json *node = nullptr;
  std::string nodeName;
  llvm::StringMap<SmallVector<Value, 1>> values;
};

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

const json &ATenLowering::Impl::arg(unsigned i, StringRef name) {
  static const json null;
  const json &args = (*node)["args"];
  if (i < args.size())
    return args[i];
  if (!node->contains("kwargs"))
    return null;
  const json &kwargs = (*node)["kwargs"];
  if (kwargs.is_object() && kwargs.contains(name.str()))
    return kwargs[name.str()];
  return null;
}

FailureOr<Value> ATenLowering::Impl::tensor(const json &a) {
  if (!a.is_object() || !a.contains("ref") || !a["ref"].is_string())
    return fail("expected a tensor reference");
  std::string name = a["ref"];
  auto it = values.find(name);
  if (it == values.end())
    return fail("reference to unknown value '" + name + "'");
  int64_t index = a.contains("index") && a["index"].is_number_integer()
                      ? a["index"].get<int64_t>()
                      : 0;
  if (index < 0 || index >= (int64_t)it->second.size() || !it->second[index])
    return fail("value '" + name + "' has no usable output " + Twine(index));
  return it->second[index];
}

std::optional<double> ATenLowering::Impl::number(const json &a) {
  if (a.is_boolean())
    return a.get<bool>() ? 1.0 : 0.0;
  if (a.is_number())
    return a.get<double>();
  if (a.is_object() && a.contains("float") && a["float"].is_string()) {
    std::string f = a["float"];
    if (f == "inf")
      return INFINITY;
    if (f == "-inf")
      return -INFINITY;
    if (f == "nan")
      return NAN;
  }
  return std::nullopt;
}

std::optional<int64_t> ATenLowering::Impl::integer(const json &a) {
  if (a.is_boolean())
    return a.get<bool>() ? 1 : 0;
  if (a.is_number_integer())
    return a.get<int64_t>();
  return std::nullopt;
}

FailureOr<int64_t> ATenLowering::Impl::dimArg(const json &a, int64_t rank) {
  std::optional<int64_t> d = integer(a);
  if (!d)
    return fail("expected an integer dim");
  int64_t n = normDim(*d, rank);
  if (n < 0 || n >= rank)
    return fail("dim " + Twine(*d) + " out of range for rank " + Twine(rank));
  return n;
}

LogicalResult ATenLowering::Impl::checkBroadcast(ArrayRef<Value> operands,
                                                 RankedTensorType out) {
  for (Value v : operands) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      continue;
    int64_t lead = out.getRank() - t.getRank();
    bool ok = lead >= 0;
    for (int64_t k = 0; ok && k < t.getRank(); ++k)
      ok = t.getDimSize(k) == 1 || t.getDimSize(k) == out.getDimSize(lead + k);
    if (!ok)
      return fail("an operand does not broadcast to the declared output");
  }
  return success();
}

FailureOr<SmallVector<int64_t>> ATenLowering::Impl::ints(const json &a) {
  SmallVector<int64_t> v;
  if (a.is_number_integer()) {
    v.push_back(a.get<int64_t>());
    return v;
  }
  if (!a.is_array())
    return fail("expected a list of integers");
  for (const json &x : a) {
    if (!x.is_number_integer())
      return fail("expected a list of integers");
    v.push_back(x.get<int64_t>());
  }
  return v;
}

//===----------------------------------------------------------------------===//
// Tensor constructions
//===----------------------------------------------------------------------===//

/// Broadcasting (numpy rules, dims aligned on the right) read map of a
/// `from`-shaped operand over `to`'s dims.
static AffineMap broadcastMap(RankedTensorType from, RankedTensorType to) {
  SmallVector<AffineExpr> exprs;
  int64_t lead = to.getRank() - from.getRank();
  for (int64_t k = 0; k < from.getRank(); ++k)
    exprs.push_back(from.getDimSize(k) == 1 && to.getDimSize(lead + k) != 1
                        ? getAffineConstantExpr(0, to.getContext())
                        : getAffineDimExpr(lead + k, to.getContext()));
  return AffineMap::get(to.getRank(), 0, exprs, to.getContext());
}

Value ATenLowering::Impl::broadcastTo(Value x, RankedTensorType to) {
  auto from = cast<RankedTensorType>(x.getType());
  auto target = RankedTensorType::get(to.getShape(), from.getElementType());
  if (from == target)
    return x;
  return copyThroughMap(b, loc, x, broadcastMap(from, target), target);
}

Value ATenLowering::Impl::elementwise(
    ArrayRef<Value> operands, RankedTensorType out, Type compute,
    function_ref<Value(OpBuilder &, Location, ValueRange)> fn) {
  // Tensors are generic inputs; scalars are captured by the body.
  SmallVector<Value> tensors;
  SmallVector<AffineMap> maps;
  for (Value v : operands)
    if (auto t = dyn_cast<RankedTensorType>(v.getType())) {
      tensors.push_back(v);
      maps.push_back(broadcastMap(t, out));
    }
  return mapElements(
      b, loc, out, tensors, maps,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        SmallVector<Value> scalars;
        unsigned next = 0;
        for (Value v : operands) {
          Value s = isa<RankedTensorType>(v.getType()) ? args[next++] : v;
          scalars.push_back(castScalar(nb, l, s, compute));
        }
        return castScalar(nb, l, fn(nb, l, scalars), out.getElementType());
      });
}

Type ATenLowering::Impl::promote(ArrayRef<Value> operands) {
  Type best;
  for (Value v : operands) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    Type e = t ? t.getElementType() : v.getType();
    if (!best || (isa<FloatType>(e) && !isa<FloatType>(best)) ||
        (isa<FloatType>(e) == isa<FloatType>(best) &&
         e.getIntOrFloatBitWidth() > best.getIntOrFloatBitWidth()))
      best = e;
    else if (e != best && isa<FloatType>(e) && isa<FloatType>(best) &&
             e.getIntOrFloatBitWidth() == best.getIntOrFloatBitWidth())
      best = b.getF32Type(); // f16 with bf16
  }
  return best;
}

Value ATenLowering::Impl::matmul(Value x, Value y, Type outElt) {
  auto a = cast<RankedTensorType>(x.getType());
  auto c = cast<RankedTensorType>(y.getType());
  // [..., n, k] @ [..., k, m]; batch dims broadcast.
  int64_t batch = std::max(a.getRank(), c.getRank()) - 2;
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < batch; ++d) {
    int64_t da = d - (batch - (a.getRank() - 2));
    int64_t dc = d - (batch - (c.getRank() - 2));
    int64_t sa = da >= 0 ? a.getDimSize(da) : 1;
    int64_t sc = dc >= 0 ? c.getDimSize(dc) : 1;
    shape.push_back(std::max(sa, sc));
  }
  int64_t n = a.getDimSize(a.getRank() - 2), m = c.getDimSize(c.getRank() - 1);
  shape.push_back(n);
  shape.push_back(m);
  // Loops: batch..., n, m, k.
  int64_t loops = batch + 3;
  auto operandMap = [&](RankedTensorType t, bool lhs) {
    SmallVector<AffineExpr> exprs;
    int64_t lead = batch - (t.getRank() - 2);
    for (int64_t d = 0; d < t.getRank() - 2; ++d)
      exprs.push_back(t.getDimSize(d) == 1 && shape[lead + d] != 1
                          ? b.getAffineConstantExpr(0)
                          : b.getAffineDimExpr(lead + d));
    exprs.push_back(b.getAffineDimExpr(lhs ? batch : batch + 2));
    exprs.push_back(b.getAffineDimExpr(lhs ? batch + 2 : batch + 1));
    return AffineMap::get(loops, 0, exprs, ctx);
  };
  SmallVector<AffineExpr> outExprs;
  for (int64_t d = 0; d < batch + 2; ++d)
    outExprs.push_back(b.getAffineDimExpr(d));
  return contract(b, loc, x, y, operandMap(a, true), operandMap(c, false),
                  AffineMap::get(loops, 0, outExprs, ctx),
                  RankedTensorType::get(shape, outElt));
}

Value ATenLowering::Impl::reduce(Value x, ArrayRef<int64_t> dims, bool keepDim,
                                 Type acc, Combine combine) {
  bool isMax = combine == Combine::Max;
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> kept, keptDims;
  SmallVector<AffineExpr> outExprs;
  SmallVector<utils::IteratorType> iters;
  for (int64_t d = 0; d < t.getRank(); ++d) {
    bool reduced = llvm::is_contained(dims, d);
    iters.push_back(reduced ? utils::IteratorType::reduction
                            : utils::IteratorType::parallel);
    if (!reduced) {
      kept.push_back(t.getDimSize(d));
      outExprs.push_back(b.getAffineDimExpr(d));
    }
    keptDims.push_back(reduced ? 1 : t.getDimSize(d));
  }
  auto outType = RankedTensorType::get(kept, acc);
  double start = isMax ? -INFINITY : combine == Combine::And ? 1.0 : 0.0;
  if (isMax && !isa<FloatType>(acc))
    start = double(std::numeric_limits<int64_t>::min());
  Value init = linalg::FillOp::create(b, loc, constantOf(b, loc, acc, start),
                                      emptyLike(b, loc, outType))
                   .getResult(0);
  auto generic = linalg::GenericOp::create(
      b, loc, outType, x, init,
      {b.getMultiDimIdentityMap(t.getRank()),
       AffineMap::get(t.getRank(), 0, outExprs, ctx)},
      iters, [&](OpBuilder &nb, Location l, ValueRange args) {
        Value v = castScalar(nb, l, args[0], acc);
        Value r;
        if (combine == Combine::And)
          r = arith::AndIOp::create(nb, l, args[1], v);
        else if (combine == Combine::Or)
          r = arith::OrIOp::create(nb, l, args[1], v);
        else if (isMax)
          r = isa<FloatType>(acc)
                  ? Value(arith::MaximumFOp::create(nb, l, args[1], v))
                  : Value(arith::MaxSIOp::create(nb, l, args[1], v));
        else
          r = isa<FloatType>(acc)
                  ? Value(arith::AddFOp::create(nb, l, args[1], v))
                  : Value(arith::AddIOp::create(nb, l, args[1], v));
        linalg::YieldOp::create(nb, l, r);
      });
  Value out = generic.getResult(0);
  if (!keepDim)
    return out;
  return reshapeTensor(b, loc, out, RankedTensorType::get(keptDims, acc));
}

Value ATenLowering::Impl::softmax(Value x, int64_t dim, Type outElt) {
  // In f32 for f16/bf16 inputs, as PyTorch computes it.
  auto t = cast<RankedTensorType>(x.getType());
  Type compute =
      isLowFloat(t.getElementType()) ? b.getF32Type() : t.getElementType();
  auto full = RankedTensorType::get(t.getShape(), compute);
  Value m = reduce(x, {dim}, /*keepDim=*/true, compute, Combine::Max);
  Value e = elementwise({x, m}, full, compute,
                        [](OpBuilder &nb, Location l, ValueRange s) {
                          return math::ExpOp::create(
                              nb, l, arith::SubFOp::create(nb, l, s[0], s[1]));
                        });
  Value sum = reduce(e, {dim}, /*keepDim=*/true, compute, Combine::Sum);
  return elementwise({e, sum}, RankedTensorType::get(t.getShape(), outElt),
                     compute, [](OpBuilder &nb, Location l, ValueRange s) {
                       return arith::DivFOp::create(nb, l, s[0], s[1]);
                     });
}

Value ATenLowering::Impl::transpose(Value x, ArrayRef<int64_t> perm) {
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape;
  SmallVector<AffineExpr> exprs(t.getRank());
  for (auto [i, p] : llvm::enumerate(perm)) {
    shape.push_back(t.getDimSize(p));
    exprs[p] = b.getAffineDimExpr(i);
  }
  return copyThroughMap(b, loc, x, AffineMap::get(t.getRank(), 0, exprs, ctx),
                        RankedTensorType::get(shape, t.getElementType()));
}

Value ATenLowering::Impl::whereKeep(Value keep, Value x, double otherwise) {
  auto t = cast<RankedTensorType>(x.getType());
  Value other = constantOf(b, loc, t.getElementType(), otherwise);
  return elementwise({keep, x, other}, t, t.getElementType(),
                     [&](OpBuilder &nb, Location l, ValueRange s) {
                       Value k = castScalar(nb, l, s[0], nb.getI1Type());
                       return arith::SelectOp::create(nb, l, k, s[1], s[2]);
                     });
}

//===----------------------------------------------------------------------===//
// Gathers
//===----------------------------------------------------------------------===//

/// Integer `i`, read from an index tensor, as an index into a dim of `size`:
/// negative values count from the end (PyTorch's rule). The result is then
/// clamped into the dim, so that an index PyTorch would reject still reads
/// in bounds on the GPU.
static Value dimIndex(OpBuilder &b, Location loc, Value i, int64_t size) {
  Value x = arith::IndexCastOp::create(b, loc, b.getIndexType(), i);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zero);
  Value wrapped = arith::AddIOp::create(
      b, loc, x, arith::ConstantIndexOp::create(b, loc, size));
  x = arith::SelectOp::create(b, loc, negative, wrapped, x);
  x = arith::MaxSIOp::create(b, loc, x, zero);
  return arith::MinSIOp::create(
      b, loc, x, arith::ConstantIndexOp::create(b, loc, size - 1));
}

LogicalResult ATenLowering::Impl::checkIndexTensor(Value t) {
  Type e = cast<RankedTensorType>(t.getType()).getElementType();
  if (!isa<IntegerType>(e) || e.isInteger(1))
    return fail("index tensors must hold integers (a boolean mask selects a "
                "data-dependent number of elements)");
  return success();
}

Value ATenLowering::Impl::gather(
    Value self, RankedTensorType out, ArrayRef<Value> indexTensors,
    ArrayRef<AffineMap> maps,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange)> at) {
  // Self is read with tensor.extract in the body, not as an input: its
  // indices are data. attn-raise sees a capture read at computed indices.
  return mapElements(b, loc, out, indexTensors, maps,
                     [&](OpBuilder &nb, Location l, ValueRange loaded) {
                       return tensor::ExtractOp::create(nb, l, self,
                                                        at(nb, l, loaded))
                           .getResult();
                     });
}

/// index.Tensor(self, indices): PyTorch's advanced indexing. `indices` has
/// one entry per leading dim of self, null for a dim taken whole (what
/// `x[:, idx]` exports as). The index tensors broadcast together; their
/// dims replace the indexed dims when those are adjacent, and come first
/// otherwise.
FailureOr<Value> ATenLowering::Impl::index(Value self, const json &indices,
                                           RankedTensorType out) {
  auto st = cast<RankedTensorType>(self.getType());
  int64_t rank = st.getRank();
  if (!indices.is_array() || indices.empty() || (int64_t)indices.size() > rank)
    return fail("index needs a list of at most " + Twine(rank) +
                " indices (null for a dim taken whole)");
  SmallVector<Value> tensors;
  SmallVector<int64_t> dims; // the indexed dims of self
  for (auto [d, entry] : llvm::enumerate(indices)) {
    if (entry.is_null())
      continue;
    FailureOr<Value> t = tensor(entry);
    if (failed(t) || failed(checkIndexTensor(*t)))
      return failure();
    tensors.push_back(*t);
    dims.push_back(d);
  }
  if (tensors.empty())
    return fail("index needs at least one index tensor");
  SmallVector<int64_t> shape; // the index tensors broadcast together
  for (Value t : tensors) {
    ArrayRef<int64_t> s = cast<RankedTensorType>(t.getType()).getShape();
    if (s.size() > shape.size())
      shape.insert(shape.begin(), s.size() - shape.size(), 1);
    for (auto [k, size] : llvm::enumerate(s)) {
      int64_t &r = shape[shape.size() - s.size() + k];
      if (r == 1)
        r = size;
      else if (size != 1 && size != r)
        return fail("the index tensors do not broadcast together");
    }
  }
  bool adjacent = dims.back() - dims.front() + 1 == (int64_t)dims.size();
  int64_t first = adjacent ? dims.front() : 0;
  SmallVector<int64_t> outShape, outDimOf(rank, -1);
  auto keep = [&](int64_t d) {
    outDimOf[d] = outShape.size();
    outShape.push_back(st.getDimSize(d));
  };
  for (int64_t d = 0; d < first; ++d)
    keep(d);
  int64_t at = outShape.size();
  llvm::append_range(outShape, shape);
  for (int64_t d = first; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      keep(d);
  if (ArrayRef<int64_t>(outShape) != out.getShape() ||
      out.getElementType() != st.getElementType())
    return fail("index: the declared output is not self indexed by the "
                "broadcast index tensors");
  SmallVector<AffineMap> maps;
  for (Value t : tensors) {
    auto tt = cast<RankedTensorType>(t.getType());
    SmallVector<AffineExpr> exprs;
    int64_t lead = at + shape.size() - tt.getRank();
    for (int64_t k = 0; k < tt.getRank(); ++k)
      exprs.push_back(tt.getDimSize(k) == 1 && out.getDimSize(lead + k) != 1
                          ? b.getAffineConstantExpr(0)
                          : b.getAffineDimExpr(lead + k));
    maps.push_back(AffineMap::get(out.getRank(), 0, exprs, ctx));
  }
  return gather(
      self, out, tensors, maps,
      [&](OpBuilder &nb, Location l, ValueRange loaded) {
        SmallVector<Value> idx;
        for (int64_t d = 0; d < rank; ++d) {
          auto *it = llvm::find(dims, d);
          idx.push_back(
              it != dims.end()
                  ? dimIndex(nb, l, loaded[it - dims.begin()], st.getDimSize(d))
                  : Value(linalg::IndexOp::create(nb, l, outDimOf[d])));
        }
        return idx;
      });
}

//===----------------------------------------------------------------------===//
// ATen ops
//===----------------------------------------------------------------------===//

/// scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal,
/// scale, enable_gqa) as the math it defines.
FailureOr<Value> ATenLowering::Impl::sdpa(RankedTensorType out) {
  FailureOr<Value> q = tensor(arg(0, "query")), k = tensor(arg(1, "key")),
                   v = tensor(arg(2, "value"));
  if (failed(q) || failed(k) || failed(v))
    return failure();
  auto qt = cast<RankedTensorType>(q->getType());
  auto kt = cast<RankedTensorType>(k->getType());
  int64_t rank = qt.getRank();
  auto vt = cast<RankedTensorType>(v->getType());
  if (rank < 2 || kt.getRank() != rank || vt.getRank() != rank ||
      qt.getDimSize(rank - 1) != kt.getDimSize(rank - 1) ||
      kt.getDimSize(rank - 2) != vt.getDimSize(rank - 2) ||
      (rank >= 3 && kt.getShape().take_front(rank - 3) !=
                        qt.getShape().take_front(rank - 3)))
    return fail("scaled_dot_product_attention: q, k, v shapes do not agree");
  std::optional<double> dropout = number(arg(4, "dropout_p"));
  if (dropout && *dropout != 0.0)
    return fail("dropout_p must be 0 (inference)");
  // GQA: KV head h serves query heads h*G .. h*G+G-1 (repeat_interleave).
  if (rank >= 3 && qt.getDimSize(rank - 3) != kt.getDimSize(rank - 3)) {
    if (!number(arg(7, "enable_gqa")).value_or(0))
      return fail("q and k have different head counts without enable_gqa");
    int64_t hq = qt.getDimSize(rank - 3), hkv = kt.getDimSize(rank - 3);
    if (hkv == 0 || hq % hkv)
      return fail("query heads are not a multiple of the KV heads");
    for (Value *x : {&*k, &*v}) {
      auto t = cast<RankedTensorType>(x->getType());
      SmallVector<int64_t> shape(t.getShape());
      shape.insert(shape.begin() + rank - 2, hq / hkv);
      SmallVector<AffineExpr> exprs;
      for (int64_t d = 0; d <= rank; ++d)
        if (d != rank - 2)
          exprs.push_back(b.getAffineDimExpr(d));
      Value expanded =
          copyThroughMap(b, loc, *x, AffineMap::get(rank + 1, 0, exprs, ctx),
                         RankedTensorType::get(shape, t.getElementType()));
      shape.erase(shape.begin() + rank - 2);
      shape[rank - 3] = hq;
      *x = reshapeTensor(b, loc, expanded,
                         RankedTensorType::get(shape, t.getElementType()));
    }
  }
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[rank - 1], perm[rank - 2]);
  Value s = matmul(*q, transpose(*k, perm), b.getF32Type());
  auto st = cast<RankedTensorType>(s.getType());
  double scale =
      number(arg(6, "scale"))
          .value_or(1.0 / std::sqrt(double(qt.getDimSize(rank - 1))));
  Value factor = constantOf(b, loc, b.getF32Type(), scale);
  s = elementwise({s, factor}, st, b.getF32Type(),
                  [](OpBuilder &nb, Location l, ValueRange x) {
                    return arith::MulFOp::create(nb, l, x[0], x[1]);
                  });
  if (number(arg(5, "is_causal")).value_or(0)) {
    // keep j <= i (top-left aligned, as PyTorch's is_causal is).
    auto mask = RankedTensorType::get(
        {st.getDimSize(rank - 2), st.getDimSize(rank - 1)}, b.getI1Type());
    Value keep = mapElements(
        b, loc, mask, {}, {}, [](OpBuilder &nb, Location l, ValueRange) {
          Value i = linalg::IndexOp::create(nb, l, 0);
          Value j = linalg::IndexOp::create(nb, l, 1);
          return arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sle, j, i);
        });
    s = whereKeep(keep, s, -INFINITY);
  }
  const json &maskArg = arg(3, "attn_mask");
  if (!maskArg.is_null()) {
    FailureOr<Value> mask = tensor(maskArg);
    if (failed(mask))
      return failure();
    auto mt = cast<RankedTensorType>(mask->getType());
    if (mt.getElementType().isInteger(1))
      s = whereKeep(*mask, s, -INFINITY);
    else
      s = elementwise({s, *mask}, st, b.getF32Type(),
                      [](OpBuilder &nb, Location l, ValueRange x) {
                        return arith::AddFOp::create(nb, l, x[0], x[1]);
                      });
  }
  Value p = softmax(s, rank - 1, qt.getElementType());
  return matmul(p, *v, out.getElementType());
}

FailureOr<Value> ATenLowering::Impl::searchsorted(RankedTensorType out) {
  FailureOr<Value> sorted = tensor(arg(0, "sorted_sequence"));
  FailureOr<Value> values = tensor(arg(1, "self"));
  if (failed(sorted) || failed(values))
    return failure();
  if (!arg(5, "sorter").is_null())
    return fail("searchsorted with a sorter is not supported");
  auto sortedType = cast<RankedTensorType>(sorted->getType());
  auto valuesType = cast<RankedTensorType>(values->getType());
  if (sortedType.getRank() != 1)
    return fail("searchsorted over a sorted sequence of rank " +
                Twine(sortedType.getRank()) + " (only 1-D is supported)");
  if (valuesType.getShape() != out.getShape() ||
      !isa<IntegerType>(out.getElementType()))
    return fail("searchsorted's result is not an integer tensor of the "
                "values' shape");
  // `right` (or side = "right"): the first index whose element exceeds the
  // value; else the first whose element is not below it.
  const json &side = arg(4, "side");
  bool right = number(arg(3, "right")).value_or(0) != 0 ||
               (side.is_string() && side.get<std::string>() == "right");
  Type compute = promote({*sorted, *values});
  int64_t rank = valuesType.getRank();
  SmallVector<AffineExpr> all;
  for (int64_t d = 0; d < rank; ++d)
    all.push_back(b.getAffineDimExpr(d));
  Value init = linalg::FillOp::create(
                   b, loc, constantOf(b, loc, out.getElementType(), 0),
                   emptyLike(b, loc, out))
                   .getResult(0);
  SmallVector<utils::IteratorType> iters = parallelIterators(rank);
  iters.push_back(utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, out, ValueRange{*sorted, *values}, init,
             {AffineMap::get(rank + 1, 0, b.getAffineDimExpr(rank)),
              AffineMap::get(rank + 1, 0, all, ctx),
              AffineMap::get(rank + 1, 0, all, ctx)},
             iters,
             [&](OpBuilder &nb, Location l, ValueRange s) {
               Value e = castScalar(nb, l, s[0], compute);
               Value v = castScalar(nb, l, s[1], compute);
               Value below = isa<FloatType>(compute)
                                 ? Value(arith::CmpFOp::create(
                                       nb, l,
                                       right ? arith::CmpFPredicate::OLE
                                             : arith::CmpFPredicate::OLT,
                                       e, v))
                                 : Value(arith::CmpIOp::create(
                                       nb, l,
                                       right ? arith::CmpIPredicate::sle
                                             : arith::CmpIPredicate::slt,
                                       e, v));
               Value one = castScalar(nb, l, below, s[2].getType());
               Value count = arith::AddIOp::create(nb, l, s[2], one);
               linalg::YieldOp::create(nb, l, count);
             })
      .getResult(0);
}

FailureOr<Value> ATenLowering::Impl::lowerOp(StringRef target,
                                             RankedTensorType out) {
  // "aten.<op>.<overload>" -> "<op>"; the overload only says which
  // arguments are tensors, which the arguments themselves tell.
  StringRef op = target;
  // Custom operators whose meaning is documented: attention-gym's
  // `approx::tanh` is tanh, computed with PTX's tanh.approx.f32 (the
  // kernels compute tanh in f32). Any other is an error that names it.
  if (op == "approx.tanh.default")
    op = "aten.tanh.default";
  if (!op.consume_front("aten."))
    return fail("unsupported target '" + target +
                "' (a custom operator: only ATen operators and "
                "approx.tanh are known)");
  op = op.take_until([](char c) { return c == '.'; });
  Type elt = out.getElementType();

  // Elementwise, with broadcasting; scalars are arguments too.
  auto operands = [&](ArrayRef<std::pair<unsigned, StringRef>> which)
      -> FailureOr<SmallVector<Value>> {
    SmallVector<Value> vals;
    for (auto [i, name] : which) {
      const json &a = arg(i, name);
      if (std::optional<double> x = number(a)) {
        vals.push_back(constantOf(b, loc, b.getF64Type(), *x));
        continue;
      }
      FailureOr<Value> t = tensor(a);
      if (failed(t))
        return failure();
      vals.push_back(*t);
    }
    return vals;
  };
  using Fn = function_ref<Value(OpBuilder &, Location, ValueRange)>;
  auto apply = [&](ArrayRef<std::pair<unsigned, StringRef>> which, Type compute,
                   Fn fn) -> FailureOr<Value> {
    FailureOr<SmallVector<Value>> vals = operands(which);
    if (failed(vals))
      return failure();
    // A double scalar does not widen a tensor's type (PyTorch's rule).
    SmallVector<Value> tensors = tensorsOf(*vals);
    if (failed(checkBroadcast(*vals, out)))
      return failure();
    Type c = compute ? compute : (tensors.empty() ? elt : promote(tensors));
    if (isa<FloatType>(elt) && !isa<FloatType>(c))
      c = elt; // int tensor * float scalar
    return elementwise(*vals, out, c, fn);
  };
  std::pair<unsigned, StringRef> x{0, "self"}, y{1, "other"};
  auto floatOrInt = [](auto fop, auto iop) {
    return [=](OpBuilder &nb, Location l, ValueRange s) -> Value {
      if (isa<FloatType>(s[0].getType()))
        return decltype(fop)::create(nb, l, s[0], s[1]);
      return decltype(iop)::create(nb, l, s[0], s[1]);
    };
  };
  auto unaryF = [&](auto fop) -> FailureOr<Value> {
    Type c = isa<FloatType>(elt) ? elt : b.getF32Type();
    return apply({x}, c, [&](OpBuilder &nb, Location l, ValueRange s) {
      return decltype(fop)::create(nb, l, s[0]).getResult();
    });
  };
  using namespace arith;

  if (op == "add" || op == "sub" || op == "rsub") {
    std::optional<double> alpha = number(arg(2, "alpha"));
    return apply({x, y}, Type(), [&](OpBuilder &nb, Location l, ValueRange s) {
      Value other = s[1];
      if (alpha && *alpha != 1.0)
        other =
            isa<FloatType>(other.getType())
                ? Value(MulFOp::create(
                      nb, l, other, constantOf(nb, l, other.getType(), *alpha)))
                : Value(MulIOp::create(
                      nb, l, other,
                      constantOf(nb, l, other.getType(), *alpha)));
      if (op == "add")
        return floatOrInt(AddFOp(), AddIOp())(nb, l, {s[0], other});
      if (op == "sub")
        return floatOrInt(SubFOp(), SubIOp())(nb, l, {s[0], other});
      return floatOrInt(SubFOp(), SubIOp())(nb, l, {other, s[0]});
    });
  }
  if (op == "mul")
    return apply({x, y}, Type(), floatOrInt(MulFOp(), MulIOp()));
  if (op == "div") {
    const json &mode = arg(2, "rounding_mode");
    std::string rounding = mode.is_object() ? mode.value("str", "") : "";
    if (!mode.is_null() && rounding != "floor" && rounding != "trunc")
      return fail("div with rounding mode '" + rounding + "'");
    if (rounding.empty())
      return apply({x, y}, isa<FloatType>(elt) ? elt : b.getF32Type(),
                   floatOrInt(DivFOp(), DivSIOp()));
    // Rounded quotients keep the operands' type (integers stay integers).
    return apply({x, y}, Type(),
                 [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                   Value d = castScalar(nb, l, s[1], s[0].getType());
                   if (isa<FloatType>(s[0].getType())) {
                     Value q = DivFOp::create(nb, l, s[0], d);
                     if (rounding == "floor")
                       return math::FloorOp::create(nb, l, q);
                     return math::TruncOp::create(nb, l, q);
                   }
                   if (rounding == "floor")
                     return FloorDivSIOp::create(nb, l, s[0], d);
                   return DivSIOp::create(nb, l, s[0], d);
                 });
  }
  if (op == "maximum")
    return apply({x, y}, Type(), floatOrInt(MaximumFOp(), MaxSIOp()));
  if (op == "minimum")
    return apply({x, y}, Type(), floatOrInt(MinimumFOp(), MinSIOp()));
  if (op == "pow")
    return apply({x, {1, "exponent"}}, Type(),
                 [](OpBuilder &nb, Location l, ValueRange s) {
                   return math::PowFOp::create(nb, l, s[0], s[1]).getResult();
                 });
  if (op == "neg")
    return apply({x}, Type(), [](OpBuilder &nb, Location l, ValueRange s) {
      if (isa<FloatType>(s[0].getType()))
        return NegFOp::create(nb, l, s[0]).getResult();
      return SubIOp::create(nb, l, constantOf(nb, l, s[0].getType(), 0), s[0])
          .getResult();
    });
  if (op == "exp")
    return unaryF(math::ExpOp());
  if (op == "log")
    return unaryF(math::LogOp());
  if (op == "tanh")
    return unaryF(math::TanhOp());
  if (op == "sqrt")
    return unaryF(math::SqrtOp());
  if (op == "rsqrt")
    return unaryF(math::RsqrtOp());
  if (op == "cos")
    return unaryF(math::CosOp());
  if (op == "sin")
    return unaryF(math::SinOp());
  if (op == "exp2")
    return unaryF(math::Exp2Op());
  if (op == "log2")
    return unaryF(math::Log2Op());
  if (op == "log1p")
    return unaryF(math::Log1pOp());
  if (op == "expm1")
    return unaryF(math::ExpM1Op());
  if (op == "erf")
    return unaryF(math::ErfOp());
  if (op == "floor")
    return unaryF(math::FloorOp());
  if (op == "ceil")
    return unaryF(math::CeilOp());
  if (op == "round")
    return unaryF(math::RoundEvenOp());
  if (op == "trunc")
    return unaryF(math::TruncOp());
  if (op == "gelu") {
    // erf form: x/2 (1 + erf(x / sqrt 2)); tanh form: x/2 (1 + tanh(
    // sqrt(2/pi) (x + 0.044715 x^3))).
    const json &mode = arg(1, "approximate");
    bool tanhForm = mode.is_object() && mode.value("str", "") == "tanh";
    Type c = isa<FloatType>(elt) ? elt : b.getF32Type();
    return apply({x}, c, [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
      Type t = s[0].getType();
      auto k = [&](double v) { return constantOf(nb, l, t, v); };
      Value inner;
      if (tanhForm) {
        Value cube =
            MulFOp::create(nb, l, s[0], MulFOp::create(nb, l, s[0], s[0]));
        Value arg = MulFOp::create(
            nb, l, k(std::sqrt(2.0 / M_PI)),
            AddFOp::create(nb, l, s[0],
                           MulFOp::create(nb, l, k(0.044715), cube)));
        inner = math::TanhOp::create(nb, l, arg);
      } else {
        inner = math::ErfOp::create(nb, l,
                                    MulFOp::create(nb, l, s[0], k(M_SQRT1_2)));
      }
      Value half = MulFOp::create(nb, l, s[0], k(0.5));
      return MulFOp::create(nb, l, half, AddFOp::create(nb, l, k(1.0), inner));
    });
  }
  if (op == "clamp" || op == "clamp_min" || op == "clamp_max") {
    // Bounds are scalars or tensors; a missing one does not bound.
    SmallVector<std::pair<unsigned, StringRef>> which = {x};
    bool hasMin = op != "clamp_max" && !arg(1, "min").is_null();
    bool hasMax = op == "clamp_max" ? !arg(1, "max").is_null()
                                    : op == "clamp" && !arg(2, "max").is_null();
    if (hasMin)
      which.push_back({1, "min"});
    if (hasMax)
      which.push_back({op == "clamp_max" ? 1u : 2u, "max"});
    return apply(which, Type(),
                 [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                   Value v = s[0];
                   bool isFloat = isa<FloatType>(v.getType());
                   auto bound = [&](Value c, bool lower) -> Value {
                     c = castScalar(nb, l, c, v.getType());
                     if (isFloat)
                       return lower ? Value(MaximumFOp::create(nb, l, v, c))
                                    : Value(MinimumFOp::create(nb, l, v, c));
                     return lower ? Value(MaxSIOp::create(nb, l, v, c))
                                  : Value(MinSIOp::create(nb, l, v, c));
                   };
                   unsigned next = 1;
                   if (hasMin)
                     v = bound(s[next++], true);
                   if (hasMax)
                     v = bound(s[next], false);
                   return v;
                 });
  }
  if (op == "remainder" || op == "fmod") {
    // remainder: Python's, the sign of the divisor; fmod: C's, the sign of
    // the dividend.
    bool python = op == "remainder";
    return apply(
        {x, y}, Type(), [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
          Type t = s[0].getType();
          Value d = castScalar(nb, l, s[1], t);
          if (isa<FloatType>(t)) {
            if (!python)
              return RemFOp::create(nb, l, s[0], d);
            Value q =
                math::FloorOp::create(nb, l, DivFOp::create(nb, l, s[0], d));
            return SubFOp::create(nb, l, s[0], MulFOp::create(nb, l, q, d));
          }
          Value r = RemSIOp::create(nb, l, s[0], d);
          if (!python)
            return r;
          Value zero = constantOf(nb, l, t, 0);
          Value nonzero = CmpIOp::create(nb, l, CmpIPredicate::ne, r, zero);
          Value signs = XOrIOp::create(
              nb, l, CmpIOp::create(nb, l, CmpIPredicate::slt, r, zero),
              CmpIOp::create(nb, l, CmpIPredicate::slt, d, zero));
          Value fix = AndIOp::create(nb, l, nonzero, signs);
          return SelectOp::create(nb, l, fix, AddIOp::create(nb, l, r, d), r);
        });
  }
  if (op == "floor_divide")
    return apply(
        {x, y}, Type(), [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
          Value d = castScalar(nb, l, s[1], s[0].getType());
          if (isa<FloatType>(s[0].getType()))
            return math::FloorOp::create(nb, l, DivFOp::create(nb, l, s[0], d));
          return FloorDivSIOp::create(nb, l, s[0], d);
        });
  if (op == "__rshift__" || op == "bitwise_right_shift" || op == "__lshift__" ||
      op == "bitwise_left_shift") {
    bool right = op.contains("right") || op == "__rshift__";
    if (!isa<IntegerType>(elt))
      return fail("shifts need integers");
    return apply({x, y}, elt,
                 [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                   Value n = castScalar(nb, l, s[1], s[0].getType());
                   if (right)
                     return ShRSIOp::create(nb, l, s[0], n);
                   return ShLIOp::create(nb, l, s[0], n);
                 });
  }
  if (op == "abs") {
    // Integers stay integers (a relative position's distance): through f32
    // they would round past 2^24.
    if (isa<IntegerType>(elt) && !elt.isInteger(1))
      return apply({x}, elt, [](OpBuilder &nb, Location l, ValueRange s) {
        return math::AbsIOp::create(nb, l, s[0]).getResult();
      });
    return unaryF(math::AbsFOp());
  }
  if (op == "sigmoid" || op == "reciprocal")
    return apply(
        {x}, isa<FloatType>(elt) ? elt : b.getF32Type(),
        [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
          Value one = constantOf(nb, l, s[0].getType(), 1.0);
          if (op == "reciprocal")
            return DivFOp::create(nb, l, one, s[0]);
          // 1 / (1 + exp(-x))
          Value e = math::ExpOp::create(nb, l, NegFOp::create(nb, l, s[0]));
          return DivFOp::create(nb, l, one, AddFOp::create(nb, l, one, e));
        });
  if (op == "eq" || op == "ne" || op == "ge" || op == "gt" || op == "le" ||
      op == "lt") {
    FailureOr<SmallVector<Value>> vals = operands({x, y});
    if (failed(vals))
      return failure();
    if (failed(checkBroadcast(*vals, out)))
      return failure();
    Type c = promote(tensorsOf(*vals));
    auto fp = StringSwitch<CmpFPredicate>(op)
                  .Case("eq", CmpFPredicate::OEQ)
                  .Case("ne", CmpFPredicate::UNE)
                  .Case("ge", CmpFPredicate::OGE)
                  .Case("gt", CmpFPredicate::OGT)
                  .Case("le", CmpFPredicate::OLE)
                  .Default(CmpFPredicate::OLT);
    auto ip = StringSwitch<CmpIPredicate>(op)
                  .Case("eq", CmpIPredicate::eq)
                  .Case("ne", CmpIPredicate::ne)
                  .Case("ge", CmpIPredicate::sge)
                  .Case("gt", CmpIPredicate::sgt)
                  .Case("le", CmpIPredicate::sle)
                  .Default(CmpIPredicate::slt);
    return elementwise(*vals, out, c,
                       [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                         if (isa<FloatType>(s[0].getType()))
                           return CmpFOp::create(nb, l, fp, s[0], s[1]);
                         return CmpIOp::create(nb, l, ip, s[0], s[1]);
                       });
  }
  // Logical ops read any value as a truth value (nonzero); bitwise ops act
  // on the integers' bits (on bool tensors, the same thing).
  auto truth = [](OpBuilder &nb, Location l, Value v) -> Value {
    Type t = v.getType();
    if (t.isInteger(1))
      return v;
    if (isa<FloatType>(t))
      return CmpFOp::create(nb, l, CmpFPredicate::UNE, v,
                            constantOf(nb, l, t, 0.0));
    return CmpIOp::create(nb, l, CmpIPredicate::ne, v, constantOf(nb, l, t, 0));
  };
  if (op == "logical_not")
    return apply({x}, b.getI1Type(),
                 [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                   Value v = truth(nb, l, s[0]);
                   return XOrIOp::create(nb, l, v,
                                         constantOf(nb, l, v.getType(), 1));
                 });
  if (op == "bitwise_not") {
    if (!isa<IntegerType>(elt))
      return fail("bitwise_not needs integers or bools");
    return apply({x}, elt, [&](OpBuilder &nb, Location l, ValueRange s) {
      return XOrIOp::create(nb, l, s[0], constantOf(nb, l, s[0].getType(), -1))
          .getResult();
    });
  }
  if (op == "logical_and" || op == "logical_or" || op == "logical_xor")
    return apply({x, y}, b.getI1Type(),
                 [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                   Value a = truth(nb, l, s[0]), c = truth(nb, l, s[1]);
                   if (op == "logical_and")
                     return AndIOp::create(nb, l, a, c);
                   if (op == "logical_or")
                     return OrIOp::create(nb, l, a, c);
                   return XOrIOp::create(nb, l, a, c);
                 });
  if (op == "bitwise_and" || op == "bitwise_or" || op == "bitwise_xor" ||
      op == "__and__" || op == "__or__" || op == "__xor__") {
    if (!isa<IntegerType>(elt))
      return fail("'" + target + "' needs integers or bools");
    return apply({x, y}, elt,
                 [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                   Value c = castScalar(nb, l, s[1], s[0].getType());
                   if (op.contains("and"))
                     return AndIOp::create(nb, l, s[0], c);
                   if (op.contains("or") && !op.contains("xor"))
                     return OrIOp::create(nb, l, s[0], c);
                   return XOrIOp::create(nb, l, s[0], c);
                 });
  }
  if (op == "where" || op == "masked_fill") {
    bool fill = op == "masked_fill";
    FailureOr<SmallVector<Value>> vals =
        fill ? operands({{1, "mask"}, {2, "value"}, x})
             : operands({{0, "condition"}, {1, "self"}, {2, "other"}});
    if (succeeded(vals) && failed(checkBroadcast(*vals, out)))
      return failure();
    if (failed(vals))
      return failure();
    return elementwise(*vals, out, elt,
                       [](OpBuilder &nb, Location l, ValueRange s) -> Value {
                         Value c = castScalar(nb, l, s[0], nb.getI1Type());
                         return SelectOp::create(nb, l, c, s[1], s[2]);
                       });
  }
  if (op == "_to_copy" || op == "to" || op == "type_as" || op == "clone" ||
      op == "contiguous" || op == "alias" || op == "detach" ||
      op == "lift_fresh_copy")
    return apply({x}, Type(),
                 [](OpBuilder &, Location, ValueRange s) { return s[0]; });

  // Layout.
  // `self`, for the ops below that take a tensor first (no diagnostic yet
  // for the ones that do not).
  const json &first = arg(0, "self");
  bool hasSelf = first.is_object() && first.contains("ref");
  FailureOr<Value> self = hasSelf ? tensor(first) : FailureOr<Value>(failure());
  auto needSelf = [&]() -> LogicalResult {
    if (succeeded(self))
      return success();
    if (!hasSelf)
      (void)fail("'" + target + "' expects a tensor as its first argument");
    return failure();
  };
  auto selfType = succeeded(self) ? dyn_cast<RankedTensorType>(self->getType())
                                  : RankedTensorType();
  if (op == "view" || op == "_unsafe_view" || op == "reshape" ||
      op == "unsqueeze" || op == "squeeze" || op == "flatten") {
    if (failed(needSelf()))
      return failure();
    if (selfType.getNumElements() != out.getNumElements())
      return fail("a reshape changes the number of elements");
    return reshapeTensor(b, loc, *self, out);
  }
  if (op == "transpose" || op == "permute" || op == "t") {
    if (failed(needSelf()))
      return failure();
    int64_t rank = selfType.getRank();
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d)
      perm.push_back(d);
    if (op == "permute") {
      FailureOr<SmallVector<int64_t>> dims = ints(arg(1, "dims"));
      if (failed(dims) || (int64_t)dims->size() != rank)
        return fail("permute needs one dim per dimension");
      for (auto [i, d] : llvm::enumerate(*dims))
        perm[i] = normDim(d, rank);
    } else if (rank >= 2) {
      FailureOr<int64_t> a = op == "t" ? 0 : dimArg(arg(1, "dim0"), rank);
      FailureOr<int64_t> c = op == "t" ? 1 : dimArg(arg(2, "dim1"), rank);
      if (failed(a) || failed(c))
        return failure();
      std::swap(perm[*a], perm[*c]);
    }
    SmallVector<int64_t> sorted(perm);
    llvm::sort(sorted);
    for (int64_t d = 0; d < rank; ++d)
      if (sorted[d] != d)
        return fail("not a permutation");
    return transpose(*self, perm);
  }
  if (op == "expand" || op == "broadcast_to") {
    if (failed(needSelf()))
      return failure();
    if (failed(checkBroadcast(*self, out)))
      return failure();
    return broadcastTo(*self, out);
  }

  // Products and reductions.
  if (op == "matmul" || op == "bmm" || op == "mm") {
    if (failed(needSelf()))
      return failure();
    FailureOr<Value> other = tensor(arg(1, "other"));
    if (failed(other))
      return failure();
    auto ot = cast<RankedTensorType>(other->getType());
    if (selfType.getRank() < 2 || ot.getRank() < 2)
      return fail("matrix-vector products are not supported");
    if (selfType.getDimSize(selfType.getRank() - 1) !=
        ot.getDimSize(ot.getRank() - 2))
      return fail("matmul inner dims differ");
    for (int64_t d = 0; d < std::min(selfType.getRank(), ot.getRank()) - 2;
         ++d) {
      int64_t x = selfType.getDimSize(selfType.getRank() - 3 - d);
      int64_t y2 = ot.getDimSize(ot.getRank() - 3 - d);
      if (x != y2 && x != 1 && y2 != 1)
        return fail("matmul batch dims do not broadcast");
    }
    return matmul(*self, *other, elt);
  }
  if (op == "addmm" || op == "baddbmm") {
    // beta * self + alpha * (mat1 @ mat2) (nn.Linear's decomposition).
    if (failed(needSelf()))
      return failure();
    FailureOr<Value> m1 = tensor(arg(1, op == "addmm" ? "mat1" : "batch1"));
    FailureOr<Value> m2 = tensor(arg(2, op == "addmm" ? "mat2" : "batch2"));
    if (failed(m1) || failed(m2))
      return failure();
    auto t1 = cast<RankedTensorType>(m1->getType());
    auto t2 = cast<RankedTensorType>(m2->getType());
    if (t1.getRank() < 2 || t2.getRank() != t1.getRank() ||
        t1.getDimSize(t1.getRank() - 1) != t2.getDimSize(t2.getRank() - 2))
      return fail("'" + target + "' operands do not multiply");
    double beta = number(arg(3, "beta")).value_or(1.0);
    double alpha = number(arg(4, "alpha")).value_or(1.0);
    Value product = matmul(*m1, *m2, elt);
    if (failed(checkBroadcast({*self, product}, out)))
      return failure();
    Type c = isa<FloatType>(elt) ? elt : b.getF32Type();
    return elementwise(
        {*self, product}, out, c,
        [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
          Type t = s[0].getType();
          Value a = s[0], p = s[1];
          if (beta != 1.0)
            a = MulFOp::create(nb, l, a, constantOf(nb, l, t, beta));
          if (alpha != 1.0)
            p = MulFOp::create(nb, l, p, constantOf(nb, l, t, alpha));
          if (beta == 0.0)
            return p;
          return AddFOp::create(nb, l, a, p);
        });
  }
  if (op == "cumsum") {
    // out[..i..] = sum_{k <= i} self[..k..]: a reduction over a second
    // index k along the dim, reading self through an affine map.
    if (failed(needSelf()))
      return failure();
    int64_t rank = selfType.getRank();
    FailureOr<int64_t> dim = dimArg(arg(1, "dim"), rank);
    if (failed(dim))
      return failure();
    if (out.getShape() != selfType.getShape())
      return fail("cumsum changes the shape");
    Type acc = isLowFloat(elt) ? b.getF32Type() : elt;
    SmallVector<AffineExpr> in, res;
    for (int64_t d = 0; d < rank; ++d) {
      in.push_back(b.getAffineDimExpr(d == *dim ? rank : d));
      res.push_back(b.getAffineDimExpr(d));
    }
    auto accType = RankedTensorType::get(out.getShape(), acc);
    Value init = linalg::FillOp::create(b, loc, constantOf(b, loc, acc, 0),
                                        emptyLike(b, loc, accType))
                     .getResult(0);
    SmallVector<utils::IteratorType> iters = parallelIterators(rank);
    iters.push_back(utils::IteratorType::reduction);
    Value sums =
        linalg::GenericOp::create(
            b, loc, accType, *self, init,
            {AffineMap::get(rank + 1, 0, in, ctx),
             AffineMap::get(rank + 1, 0, res, ctx)},
            iters,
            [&](OpBuilder &nb, Location l, ValueRange s) {
              Value i = linalg::IndexOp::create(nb, l, *dim);
              Value k = linalg::IndexOp::create(nb, l, rank);
              Value upTo = CmpIOp::create(nb, l, CmpIPredicate::sle, k, i);
              Value v = castScalar(nb, l, s[0], acc);
              v = SelectOp::create(nb, l, upTo, v, constantOf(nb, l, acc, 0));
              Value sum = isa<FloatType>(acc)
                              ? Value(AddFOp::create(nb, l, s[1], v))
                              : Value(AddIOp::create(nb, l, s[1], v));
              linalg::YieldOp::create(nb, l, sum);
            })
            .getResult(0);
    return elementwise(
        {sums}, out, acc,
        [](OpBuilder &, Location, ValueRange s) { return s[0]; });
  }
  if (op == "amax" || op == "sum" || op == "max" || op == "mean" ||
      op == "all" || op == "any") {
    if (failed(needSelf()))
      return failure();
    // No dim (`sum.default`, `all.default`): every dim.
    SmallVector<int64_t> dims;
    if (arg(1, "dim").is_null()) {
      for (int64_t d = 0; d < selfType.getRank(); ++d)
        dims.push_back(d);
    } else {
      FailureOr<SmallVector<int64_t>> given = ints(arg(1, "dim"));
      if (failed(given))
        return failure();
      for (int64_t d : *given) {
        FailureOr<int64_t> n = dimArg(d, selfType.getRank());
        if (failed(n))
          return failure();
        dims.push_back(*n);
      }
    }
    bool keep = number(arg(2, "keepdim")).value_or(0);
    Combine combine = op == "sum" || op == "mean" ? Combine::Sum
                      : op == "all"               ? Combine::And
                      : op == "any"               ? Combine::Or
                                                  : Combine::Max;
    Type acc = combine == Combine::And || combine == Combine::Or ? b.getI1Type()
               : isLowFloat(elt) || op == "mean" ? b.getF32Type()
                                                 : elt;
    Value r = reduce(*self, dims, keep, acc, combine);
    auto rt = cast<RankedTensorType>(r.getType());
    if (rt.getShape() != out.getShape())
      return fail("reduction result shape differs from the declared one");
    if (op != "mean")
      return elementwise(
          {r}, out, acc,
          [](OpBuilder &, Location, ValueRange s) -> Value { return s[0]; });
    int64_t count = 1;
    for (int64_t d : dims)
      count *= selfType.getDimSize(d);
    Value n = constantOf(b, loc, acc, double(count));
    return elementwise({r, n}, out, acc,
                       [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
                         return DivFOp::create(nb, l, s[0], s[1]);
                       });
  }
  if (op == "softmax" || op == "_softmax" || op == "_safe_softmax") {
    if (failed(needSelf()))
      return failure();
    FailureOr<int64_t> dim = dimArg(arg(1, "dim"), selfType.getRank());
    if (failed(dim))
      return failure();
    return softmax(*self, *dim, elt);
  }
  if (op == "scaled_dot_product_attention")
    return sdpa(out);
  if (op == "searchsorted")
    return searchsorted(out);

  // Creation.
  if (op == "full" || op == "ones" || op == "zeros" || op == "scalar_tensor" ||
      op == "new_ones" || op == "new_zeros" || op == "full_like" ||
      op == "ones_like" || op == "zeros_like" || op == "empty" ||
      op == "empty_like" || op == "new_empty") {
    // Empty tensors are zeros: unspecified contents, specified here.
    double value = op.contains("ones") ? 1.0 : 0.0;
    if (op == "full")
      value = number(arg(1, "fill_value")).value_or(0);
    if (op == "full_like")
      value = number(arg(1, "fill_value")).value_or(0);
    if (op == "scalar_tensor")
      value = number(arg(0, "s")).value_or(0);
    return linalg::FillOp::create(b, loc, constantOf(b, loc, elt, value),
                                  emptyLike(b, loc, out))
        .getResult(0);
  }
  if (op == "arange") {
    // arange(end) / arange(start, end[, step]): element i = start + i*step.
    std::optional<double> a0 = number(arg(0, "start")),
                          a1 = number(arg(1, "end")),
                          a2 = number(arg(2, "step"));
    double start = a1 ? a0.value_or(0) : 0, step = a1 ? a2.value_or(1) : 1;
    if (out.getRank() != 1)
      return fail("arange must be one-dimensional");
    // Integers stay integers (masks built from aranges stay analyzable).
    bool integral = !isa<FloatType>(elt) && start == std::floor(start) &&
                    step == std::floor(step);
    Type compute = integral ? elt : b.getF64Type();
    return mapElements(
        b, loc, out, {}, {},
        [&](OpBuilder &nb, Location l, ValueRange) -> Value {
          Value i = IndexCastOp::create(nb, l, nb.getI64Type(),
                                        linalg::IndexOp::create(nb, l, 0));
          i = castScalar(nb, l, i, compute);
          Value s0 = constantOf(nb, l, compute, start);
          Value st = constantOf(nb, l, compute, step);
          Value v = integral
                        ? Value(AddIOp::create(nb, l, s0,
                                               MulIOp::create(nb, l, i, st)))
                        : Value(AddFOp::create(nb, l, s0,
                                               MulFOp::create(nb, l, i, st)));
          return castScalar(nb, l, v, elt);
        });
  }
  if (op == "tril" || op == "triu") {
    if (failed(needSelf()))
      return failure();
    int64_t diag = integer(arg(1, "diagonal")).value_or(0);
    int64_t rank = selfType.getRank();
    if (rank < 2)
      return fail("tril/triu need two dims");
    return mapElements(
        b, loc, out, *self, b.getMultiDimIdentityMap(rank),
        [&](OpBuilder &nb, Location l, ValueRange s) -> Value {
          Value i = linalg::IndexOp::create(nb, l, rank - 2);
          Value j = linalg::IndexOp::create(nb, l, rank - 1);
          // tril keeps j - i <= diagonal, triu j - i >= diagonal.
          Value d = SubIOp::create(nb, l, j, i);
          Value c = ConstantIndexOp::create(nb, l, diag);
          Value keep = CmpIOp::create(
              nb, l, op == "tril" ? CmpIPredicate::sle : CmpIPredicate::sge, d,
              c);
          return SelectOp::create(nb, l, keep, s[0], constantOf(nb, l, elt, 0));
        });
  }
  if (op == "slice" || op == "select") {
    if (failed(needSelf()))
      return failure();
    int64_t rank = selfType.getRank();
    FailureOr<int64_t> dimOr = dimArg(arg(1, "dim"), rank);
    if (failed(dimOr))
      return failure();
    int64_t dim = *dimOr;
    int64_t size = selfType.getDimSize(dim);
    int64_t start, step = 1;
    if (op == "select") {
      start = normDim(integer(arg(2, "index")).value_or(0), size);
    } else {
      start = integer(arg(2, "start")).value_or(0);
      start = std::clamp<int64_t>(normDim(start, size), 0, size);
      step = integer(arg(4, "step")).value_or(1);
    }
    if (start < 0 || start >= size || step < 1)
      return fail("slice bounds out of range");
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
    SmallVector<int64_t> sizes(selfType.getShape());
    offsets[dim] = start;
    strides[dim] = step;
    sizes[dim] = op == "select" ? 1 : out.getDimSize(dim);
    if (start + (sizes[dim] - 1) * step >= size)
      return fail("slice bounds out of range");
    auto sliced = RankedTensorType::get(sizes, elt);
    Value v = tensor::ExtractSliceOp::create(
        b, loc, sliced, *self, ValueRange(), ValueRange(), ValueRange(),
        b.getDenseI64ArrayAttr(offsets), b.getDenseI64ArrayAttr(sizes),
        b.getDenseI64ArrayAttr(strides));
    return reshapeTensor(b, loc, v, out);
  }
  if (op == "constant_pad_nd") {
    // pad = (last_lo, last_hi, second_last_lo, ...): per padded dim, a
    // concatenation with filled pieces; negative amounts crop.
    if (failed(needSelf()))
      return failure();
    FailureOr<SmallVector<int64_t>> pad = ints(arg(1, "pad"));
    if (failed(pad))
      return failure();
    int64_t rank = selfType.getRank();
    if (pad->size() % 2 || (int64_t)pad->size() > 2 * rank)
      return fail("constant_pad_nd needs (low, high) pairs for at most every "
                  "dim");
    double value = number(arg(2, "value")).value_or(0.0);
    SmallVector<int64_t> low(rank, 0), high(rank, 0);
    for (size_t p = 0; p < pad->size(); p += 2) {
      low[rank - 1 - p / 2] = (*pad)[p];
      high[rank - 1 - p / 2] = (*pad)[p + 1];
    }
    Value cur =
        padWithPieces(b, loc, *self, low, high, [&](RankedTensorType pt) {
          return linalg::FillOp::create(b, loc, constantOf(b, loc, elt, value),
                                        emptyLike(b, loc, pt))
              .getResult(0);
        });
    if (!cur)
      return fail("constant_pad_nd crops more than the dim holds");
    if (cur.getType() != out)
      return fail("constant_pad_nd result differs from the declared one");
    return cur;
  }
  if (op == "slice_scatter") {
    // self with src written into self[.., start:end:step, ..] (step 1).
    if (failed(needSelf()))
      return failure();
    FailureOr<Value> src = tensor(arg(1, "src"));
    if (failed(src))
      return failure();
    int64_t rank = selfType.getRank();
    FailureOr<int64_t> dim =
        dimArg(arg(2, "dim").is_null() ? json(0) : arg(2, "dim"), rank);
    if (failed(dim))
      return failure();
    auto st = cast<RankedTensorType>(src->getType());
    int64_t size = selfType.getDimSize(*dim);
    int64_t start = std::clamp<int64_t>(
        normDim(integer(arg(3, "start")).value_or(0), size), 0, size);
    if (integer(arg(5, "step")).value_or(1) != 1)
      return fail("slice_scatter with a step other than 1 is not supported");
    if (st.getRank() != rank || start + st.getDimSize(*dim) > size ||
        st.getElementType() != elt || out != selfType)
      return fail("slice_scatter source does not fit its slice");
    for (int64_t d = 0; d < rank; ++d)
      if (d != *dim && st.getDimSize(d) != selfType.getDimSize(d))
        return fail("slice_scatter source does not fit its slice");
    SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
    offsets[*dim] = start;
    return Value(tensor::InsertSliceOp::create(
        b, loc, *src, *self, ValueRange(), ValueRange(), ValueRange(),
        b.getDenseI64ArrayAttr(offsets), b.getDenseI64ArrayAttr(st.getShape()),
        b.getDenseI64ArrayAttr(strides)));
  }
  if (op == "cat") {
    const json &list = arg(0, "tensors");
    if (!list.is_array() || list.empty())
      return fail("cat needs a list of tensors");
    FailureOr<int64_t> dimOr = dimArg(
        arg(1, "dim").is_null() ? json(0) : arg(1, "dim"), out.getRank());
    if (failed(dimOr))
      return failure();
    int64_t dim = *dimOr;
    SmallVector<Value> parts;
    for (const json &t : list) {
      FailureOr<Value> v = tensor(t);
      if (failed(v))
        return failure();
      parts.push_back(*v);
    }
    int64_t total = 0;
    for (Value v : parts) {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getRank() != out.getRank() || t.getElementType() != elt)
        return fail("cat parts do not match the result");
      total += t.getDimSize(dim);
    }
    if (total != out.getDimSize(dim))
      return fail("cat sizes do not add up to the result");
    return Value(tensor::ConcatOp::create(b, loc, dim, parts));
  }
  if (op == "index") {
    if (failed(needSelf()))
      return failure();
    return index(*self, arg(1, "indices"), out);
  }
  if (op == "embedding") {
    // embedding(weight, indices, ...): rows of weight; the other arguments
    // only change the gradient.
    if (failed(needSelf()))
      return failure();
    if (selfType.getRank() != 2)
      return fail("embedding needs a two-dimensional weight");
    return index(*self, json::array({arg(1, "indices")}), out);
  }
  if (op == "gather" || op == "index_select") {
    // gather: out[p] = self[p with p[dim] = index[p]], out shaped as index;
    // index_select: self with dim read at index[p[dim]].
    if (failed(needSelf()))
      return failure();
    int64_t rank = selfType.getRank();
    FailureOr<int64_t> dimOr = dimArg(arg(1, "dim"), rank);
    FailureOr<Value> idx = tensor(arg(2, "index"));
    if (failed(dimOr) || failed(idx) || failed(checkIndexTensor(*idx)))
      return failure();
    int64_t dim = *dimOr;
    auto indexType = cast<RankedTensorType>(idx->getType());
    bool isGather = op == "gather";
    SmallVector<int64_t> shape(selfType.getShape());
    if (isGather) {
      if (indexType.getRank() != rank)
        return fail("gather: index and self differ in rank");
      for (int64_t d = 0; d < rank; ++d)
        if (d != dim && indexType.getDimSize(d) > selfType.getDimSize(d))
          return fail("gather: index is larger than self in dim " + Twine(d));
      shape.assign(indexType.getShape().begin(), indexType.getShape().end());
    } else {
      if (indexType.getRank() > 1)
        return fail("index_select: index must have at most one dim");
      shape[dim] = indexType.getNumElements();
    }
    if (ArrayRef<int64_t>(shape) != out.getShape() ||
        out.getElementType() != elt || selfType.getElementType() != elt)
      return fail("'" + target +
                  "' declares a different result than it computes");
    AffineMap map = isGather ? b.getMultiDimIdentityMap(rank)
                    : indexType.getRank() == 0
                        ? AffineMap::get(rank, 0, {}, ctx)
                        : AffineMap::get(rank, 0, b.getAffineDimExpr(dim));
    return gather(
        *self, out, *idx, map,
        [&](OpBuilder &nb, Location l, ValueRange loaded) {
          SmallVector<Value> at;
          for (int64_t d = 0; d < rank; ++d)
            at.push_back(
                d == dim ? dimIndex(nb, l, loaded[0], selfType.getDimSize(d))
                         : Value(linalg::IndexOp::create(nb, l, d)));
          return at;
        });
  }
  if (op == "repeat_interleave") {
    if (failed(needSelf()))
      return failure();
    std::optional<int64_t> repeats = integer(arg(1, "repeats"));
    int64_t rank = selfType.getRank();
    FailureOr<int64_t> dimOr = dimArg(arg(2, "dim"), rank);
    if (!repeats || *repeats < 1 || failed(dimOr))
      return fail("repeat_interleave needs constant repeats and a dim");
    int64_t dim = *dimOr;
    SmallVector<int64_t> shape(selfType.getShape());
    shape.insert(shape.begin() + dim + 1, *repeats);
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d <= rank; ++d)
      if (d != dim + 1)
        exprs.push_back(b.getAffineDimExpr(d));
    Value expanded =
        copyThroughMap(b, loc, *self, AffineMap::get(rank + 1, 0, exprs, ctx),
                       RankedTensorType::get(shape, elt));
    return reshapeTensor(b, loc, expanded, out);
  }
  return fail("ATen op '" + target +
              "' is not supported by the PyTorch importers");
}

/// `split_with_sizes`, `split` and `unbind`: consecutive slices along a
/// dim, one per declared output (their shapes give the sizes).
FailureOr<SmallVector<Value, 1>>
ATenLowering::Impl::split(StringRef target, ArrayRef<RankedTensorType> outs) {
  FailureOr<Value> self = tensor(arg(0, "self"));
  if (failed(self))
    return failure();
  auto st = cast<RankedTensorType>(self->getType());
  int64_t rank = st.getRank();
  bool unbind = target.starts_with("aten.unbind.");
  const json &dimJson = arg(unbind ? 1 : 2, "dim");
  FailureOr<int64_t> dim = dimArg(dimJson.is_null() ? json(0) : dimJson, rank);
  if (failed(dim))
    return failure();
  SmallVector<Value, 1> results;
  int64_t offset = 0;
  for (RankedTensorType out : outs) {
    SmallVector<int64_t> offsets(rank, 0), sizes(st.getShape()),
        strides(rank, 1);
    offsets[*dim] = offset;
    sizes[*dim] =
        unbind ? 1 : (out.getRank() == rank ? out.getDimSize(*dim) : -1);
    if (sizes[*dim] < 0 || offset + sizes[*dim] > st.getDimSize(*dim) ||
        out.getElementType() != st.getElementType())
      return fail("'" + target + "' outputs do not tile the dim");
    offset += sizes[*dim];
    Value piece = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get(sizes, st.getElementType()), *self,
        ValueRange(), ValueRange(), ValueRange(),
        b.getDenseI64ArrayAttr(offsets), b.getDenseI64ArrayAttr(sizes),
        b.getDenseI64ArrayAttr(strides));
    if (RankedTensorType(cast<RankedTensorType>(piece.getType())) != out) {
      if (cast<RankedTensorType>(piece.getType()).getNumElements() !=
          out.getNumElements())
        return fail("'" + target + "' outputs do not tile the dim");
      piece = reshapeTensor(b, loc, piece, out);
    }
    results.push_back(piece);
  }
  if (offset != st.getDimSize(*dim))
    return fail("'" + target + "' outputs do not cover the dim");
  return results;
}

FailureOr<SmallVector<Value, 1>>
ATenLowering::Impl::lower(StringRef target, const json &call,
                          ArrayRef<RankedTensorType> outs) {
  if (!call.is_object() || !call.contains("args") || !call["args"].is_array())
    return fail("a call needs a list of arguments");
  if (call.contains("kwargs") && !call["kwargs"].is_object() &&
      !call["kwargs"].is_null())
    return fail("keyword arguments must be an object");
  // Calls without results only assert (`_assert_tensor_metadata`).
  if (outs.empty()) {
    if (target.starts_with("aten._assert"))
      return SmallVector<Value, 1>();
    return fail("'" + target + "' has no output");
  }
  if (target.starts_with("aten.split_with_sizes.") ||
      target.starts_with("aten.split.") || target.starts_with("aten.unbind."))
    return split(target, outs);
  FailureOr<Value> v = lowerOp(target, outs.front());
  if (failed(v))
    return failure();
  if (v->getType() != outs.front())
    return fail("'" + target + "' computes a different type than the " +
                "declared output");
  // Extra results (max.dim's indices) have no value: a use is an error.
  SmallVector<Value, 1> results = {*v};
  results.resize(outs.size());
  return results;
}

//===----------------------------------------------------------------------===//
// ATenLowering
//===----------------------------------------------------------------------===//

InFlightDiagnostic flashlight::emitNodeError(Location loc, StringRef label) {
  InFlightDiagnostic d = emitError(loc);
  if (!label.empty())
    d << "node '" << label << "': ";
  return d;
}

ATenLowering::ATenLowering(MLIRContext *ctx)
    : impl(std::make_unique<Impl>(ctx)) {}

ATenLowering::~ATenLowering() = default;

OpBuilder &ATenLowering::builder() { return impl->b; }

LogicalResult ATenLowering::define(StringRef name, ArrayRef<Value> results,
                                   Location loc) {
  if (impl->values.count(name))
    return emitError(loc) << "value '" << name << "' is defined twice";
  impl->values[name] = SmallVector<Value, 1>(results);
  return success();
}

FailureOr<SmallVector<Value, 1>>
ATenLowering::lower(StringRef target, const json &call,
                    ArrayRef<RankedTensorType> outs, Location loc,
                    StringRef label) {
  impl->at(&call, loc, label);
  FailureOr<SmallVector<Value, 1>> results = impl->lower(target, call, outs);
  impl->at(nullptr, loc, "");
  return results;
}

FailureOr<Value> ATenLowering::resolve(const json &ref, Location loc,
                                       StringRef label) {
  json wrapper = {{"args", json::array({ref})}};
  impl->at(&wrapper, loc, label);
  FailureOr<Value> v = impl->tensor(ref);
  impl->at(nullptr, loc, "");
  return v;
}
