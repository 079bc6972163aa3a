//===- ConstantLoops.cpp - Unrolling StableHLO loops of known trip count --===//
//
// A small evaluator of integer StableHLO arithmetic (the loop counters,
// clamps and index tables JAX emits around `dynamic_slice`) and the unroller
// built on it. Only integer values of a few thousand elements are
// evaluated: float data and index predicates (masks) stay computations for
// the raise to read.
//
//===----------------------------------------------------------------------===//

#include "ConstantLoops.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using llvm::APInt;

namespace {

/// Values larger than this are not evaluated.
constexpr int64_t kMaxElements = 4096;

/// The row-major strides of `shape`.
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = (int64_t)shape.size() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// The multi-index of flat position `i` in `shape`.
SmallVector<int64_t> unflatten(int64_t i, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> idx(shape.size());
  for (int64_t d = (int64_t)shape.size() - 1; d >= 0; --d) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

/// Evaluates integer values of a function body, memoized.
class IntEvaluator {
public:
  /// The value of `v` as constant integers, or null.
  DenseIntElementsAttr evaluate(Value v) {
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    DenseIntElementsAttr result = compute(v);
    memo[v] = result;
    return result;
  }

  /// Forgets every value (before operations are erased).
  void clear() { memo.clear(); }

private:
  DenseIntElementsAttr compute(Value v);
  std::optional<APInt> binary(StringRef name, const APInt &a, const APInt &b,
                              bool isUnsigned);
  DenseIntElementsAttr elementwise(Operation *op, RankedTensorType type);
  DenseIntElementsAttr reshuffle(Operation *op, RankedTensorType type);

  llvm::DenseMap<Value, DenseIntElementsAttr> memo;
};

/// The integer tensor type of `v` when it is small enough to evaluate.
RankedTensorType smallIntTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() || !isa<IntegerType>(t.getElementType()) ||
      t.getNumElements() > kMaxElements)
    return {};
  return t;
}

std::optional<APInt> IntEvaluator::binary(StringRef name, const APInt &a,
                                          const APInt &b, bool isUnsigned) {
  if (name == "add")
    return a + b;
  if (name == "subtract")
    return a - b;
  if (name == "multiply")
    return a * b;
  if (name == "and")
    return a & b;
  if (name == "or")
    return a | b;
  if (name == "xor")
    return a ^ b;
  if (name == "maximum")
    return (isUnsigned ? a.uge(b) : a.sge(b)) ? a : b;
  if (name == "minimum")
    return (isUnsigned ? a.ule(b) : a.sle(b)) ? a : b;
  if ((name == "divide" || name == "remainder") && !b.isZero()) {
    if (name == "divide")
      return isUnsigned ? a.udiv(b) : a.sdiv(b);
    return isUnsigned ? a.urem(b) : a.srem(b);
  }
  return std::nullopt;
}

DenseIntElementsAttr IntEvaluator::elementwise(Operation *op,
                                               RankedTensorType type) {
  StringRef name = op->getName().getStringRef().drop_front(10);
  SmallVector<DenseIntElementsAttr> args;
  for (Value operand : op->getOperands()) {
    DenseIntElementsAttr a = evaluate(operand);
    // A scalar, or one element per result element (malformed text may
    // declare anything).
    if (!a || (a.getNumElements() != 1 &&
               a.getNumElements() != type.getNumElements()))
      return {};
    args.push_back(a);
  }
  // Scalars broadcast (JAX's pretty form keeps them only in clamp).
  auto at = [&](unsigned k, int64_t i) {
    return args[k].getNumElements() == 1 ? *args[k].value_begin<APInt>()
                                         : args[k].getValues<APInt>()[i];
  };
  Type elementType = type.getElementType();
  unsigned width = elementType.getIntOrFloatBitWidth();
  bool isUnsigned = elementType.isUnsignedInteger() || width == 1;
  SmallVector<APInt> out;
  for (int64_t i = 0, e = type.getNumElements(); i < e; ++i) {
    std::optional<APInt> r;
    if (name == "compare" && args.size() == 2) {
      Type argType = getElementTypeOrSelf(op->getOperand(0).getType());
      auto kind = op->getAttrOfType<StringAttr>("compare_type");
      bool u = argType.isUnsignedInteger() || argType.isInteger(1) ||
               (kind && kind.getValue() == "UNSIGNED");
      APInt a = at(0, i), b = at(1, i);
      auto dir = op->getAttrOfType<StringAttr>("comparison_direction");
      std::optional<bool> holds =
          llvm::StringSwitch<std::optional<bool>>(dir ? dir.getValue() : "")
              .Case("EQ", a == b)
              .Case("NE", a != b)
              .Case("LT", u ? a.ult(b) : a.slt(b))
              .Case("LE", u ? a.ule(b) : a.sle(b))
              .Case("GT", u ? a.ugt(b) : a.sgt(b))
              .Case("GE", u ? a.uge(b) : a.sge(b))
              .Default(std::nullopt);
      if (holds)
        r = APInt(1, *holds);
    } else if (name == "select" && args.size() == 3) {
      r = at(0, i).isZero() ? at(2, i) : at(1, i);
    } else if (name == "clamp" && args.size() == 3) {
      APInt lo = at(0, i), x = at(1, i), hi = at(2, i);
      r = isUnsigned ? (x.ult(lo)   ? lo
                        : x.ugt(hi) ? hi
                                    : x)
                     : (x.slt(lo)   ? lo
                        : x.sgt(hi) ? hi
                                    : x);
    } else if (name == "convert" && args.size() == 1) {
      bool fromUnsigned = getElementTypeOrSelf(op->getOperand(0).getType())
                              .isUnsignedInteger() ||
                          at(0, i).getBitWidth() == 1;
      r = fromUnsigned ? at(0, i).zextOrTrunc(width)
                       : at(0, i).sextOrTrunc(width);
      if (width == 1)
        r = APInt(1, !at(0, i).isZero());
    } else if (name == "negate" && args.size() == 1) {
      r = -at(0, i);
    } else if (name == "not" && args.size() == 1) {
      r = ~at(0, i);
    } else if (name == "abs" && args.size() == 1) {
      r = at(0, i).abs();
    } else if (args.size() == 2) {
      r = binary(name, at(0, i), at(1, i), isUnsigned);
    }
    if (!r || r->getBitWidth() != width)
      return {};
    out.push_back(*r);
  }
  return DenseIntElementsAttr::get(type, out);
}

/// Ops that move elements: iota, broadcast_in_dim, reshape, slice,
/// dynamic_slice.
DenseIntElementsAttr IntEvaluator::reshuffle(Operation *op,
                                             RankedTensorType type) {
  StringRef name = op->getName().getStringRef().drop_front(10);
  unsigned width = type.getElementTypeBitWidth();
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<APInt> out;
  if (name == "iota") {
    auto dim = op->getAttrOfType<IntegerAttr>("iota_dimension");
    if (!dim || dim.getInt() < 0 || dim.getInt() >= type.getRank())
      return {};
    for (int64_t i = 0, e = type.getNumElements(); i < e; ++i)
      out.push_back(APInt(width, unflatten(i, shape)[dim.getInt()]));
    return DenseIntElementsAttr::get(type, out);
  }
  if (op->getNumOperands() < 1)
    return {};
  DenseIntElementsAttr src = evaluate(op->getOperand(0));
  if (!src)
    return {};
  auto srcType = cast<RankedTensorType>(src.getType());
  SmallVector<APInt> in(src.getValues<APInt>());
  SmallVector<int64_t> srcStrides = stridesOf(srcType.getShape());
  if (name == "reshape")
    return int64_t(in.size()) == type.getNumElements()
               ? DenseIntElementsAttr::get(type, in)
               : DenseIntElementsAttr();
  // The source position each result element reads: per result dim, the
  // source dim it maps to and an offset.
  SmallVector<int64_t> srcDim(type.getRank(), -1), offset(type.getRank(), 0);
  if (name == "broadcast_in_dim") {
    auto dims = op->getAttrOfType<DenseI64ArrayAttr>("broadcast_dimensions");
    if (!dims || (int64_t)dims.size() != srcType.getRank())
      return {};
    for (auto [s, d] : llvm::enumerate(dims.asArrayRef()))
      if (d < type.getRank() && srcType.getDimSize(s) != 1)
        srcDim[d] = s;
  } else if (name == "slice") {
    auto start = op->getAttrOfType<DenseI64ArrayAttr>("start_indices");
    auto strides = op->getAttrOfType<DenseI64ArrayAttr>("strides");
    if (!start || !strides || (int64_t)start.size() != type.getRank() ||
        llvm::any_of(strides.asArrayRef(), [](int64_t s) { return s != 1; }))
      return {};
    for (int64_t d = 0; d < type.getRank(); ++d) {
      srcDim[d] = d;
      offset[d] = start[d];
    }
  } else if (name == "dynamic_slice") {
    if ((int64_t)op->getNumOperands() != 1 + type.getRank())
      return {};
    for (int64_t d = 0; d < type.getRank(); ++d) {
      DenseIntElementsAttr index = evaluate(op->getOperand(1 + d));
      if (!index || index.getNumElements() != 1)
        return {};
      int64_t limit = srcType.getDimSize(d) - type.getDimSize(d);
      srcDim[d] = d;
      offset[d] = std::clamp<int64_t>(
          (*index.value_begin<APInt>()).getSExtValue(), 0, limit);
    }
  } else {
    return {};
  }
  for (int64_t i = 0, e = type.getNumElements(); i < e; ++i) {
    SmallVector<int64_t> idx = unflatten(i, shape);
    int64_t pos = 0;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (srcDim[d] >= 0)
        pos += (idx[d] + offset[d]) * srcStrides[srcDim[d]];
    if (pos >= (int64_t)in.size())
      return {};
    out.push_back(in[pos].sextOrTrunc(width));
  }
  return DenseIntElementsAttr::get(type, out);
}

DenseIntElementsAttr IntEvaluator::compute(Value v) {
  RankedTensorType type = smallIntTensor(v);
  Operation *op = v.getDefiningOp();
  if (!type || !op || op->getNumResults() != 1)
    return {};
  StringRef name = op->getName().getStringRef();
  if (!name.starts_with("stablehlo."))
    return {};
  StringRef bare = name.drop_front(10);
  if (bare == "constant")
    return dyn_cast_or_null<DenseIntElementsAttr>(op->getAttr("value"));
  if (llvm::is_contained(
          {"iota", "broadcast_in_dim", "reshape", "slice", "dynamic_slice"},
          bare))
    return reshuffle(op, type);
  return elementwise(op, type);
}

/// A `stablehlo.constant` holding `value`, created by `b`.
Value makeConstant(OpBuilder &b, Location loc, DenseIntElementsAttr value) {
  OperationState state(loc, "stablehlo.constant");
  state.addAttribute("value", value);
  state.addTypes(value.getType());
  return b.create(state)->getResult(0);
}

/// Clones `block`'s operations before `at` with `map`, returning the cloned
/// terminator's operands (mapped).
SmallVector<Value> cloneBody(Block &block, Operation *at, IRMapping &map,
                             SmallVectorImpl<Operation *> &cloned) {
  // The terminator is unregistered: `without_terminator` does not know it.
  OpBuilder b(at);
  for (Operation &op : block)
    if (&op != &block.back())
      cloned.push_back(b.clone(op, map));
  SmallVector<Value> results;
  for (Value v : block.back().getOperands())
    results.push_back(map.lookupOrDefault(v));
  return results;
}

/// Unrolls one while loop; the conditions' clones are appended to `dead`
/// (erased by the caller once nothing evaluates any more).
LogicalResult unroll(Operation *loop, IntEvaluator &eval, int64_t maxTrips,
                     SmallVectorImpl<Operation *> &dead) {
  // Each region: one block ending in `stablehlo.return` (unregistered, so
  // nothing checked that when parsing).
  auto wellFormed = [](Region &region) {
    return region.hasOneBlock() && !region.front().empty() &&
           region.front().back().getName().getStringRef() == "stablehlo.return";
  };
  if (loop->getNumRegions() != 2 || !wellFormed(loop->getRegion(0)) ||
      !wellFormed(loop->getRegion(1)))
    return loop->emitError("'stablehlo.while' needs a cond and a body "
                           "region, each one block ending in "
                           "stablehlo.return");
  Block &cond = loop->getRegion(0).front();
  Block &body = loop->getRegion(1).front();
  if (cond.getNumArguments() != loop->getNumOperands() ||
      body.getNumArguments() != loop->getNumOperands() ||
      cond.back().getNumOperands() != 1 ||
      body.back().getNumOperands() != loop->getNumResults())
    return loop->emitError("'stablehlo.while' regions do not match its "
                           "operands and results");
  // Types too: unrolled values replace the loop's results.
  if (cond.getArgumentTypes() != loop->getOperandTypes() ||
      body.getArgumentTypes() != loop->getOperandTypes() ||
      TypeRange(body.back().getOperandTypes()) != loop->getResultTypes() ||
      loop->getOperandTypes() != loop->getResultTypes())
    return loop->emitError("'stablehlo.while' iteration values change "
                           "type");
  SmallVector<Value> carried(loop->getOperands());
  for (int64_t trip = 0;; ++trip) {
    IRMapping map;
    map.map(cond.getArguments(), carried);
    SmallVector<Operation *> condOps;
    Value go = cloneBody(cond, loop, map, condOps).front();
    DenseIntElementsAttr value = eval.evaluate(go);
    dead.append(condOps.rbegin(), condOps.rend());
    if (!value || value.getNumElements() != 1)
      return loop->emitError(
          "'stablehlo.while': the loop condition is not a compile-time "
          "constant; only loops with a constant trip count are unrolled");
    if ((*value.value_begin<APInt>()).isZero())
      break;
    if (trip == maxTrips)
      return loop->emitError("'stablehlo.while' runs more than ")
             << maxTrips << " trips; not unrolled";
    map.clear();
    map.map(body.getArguments(), carried);
    SmallVector<Operation *> bodyOps;
    carried = cloneBody(body, loop, map, bodyOps);
  }
  loop->replaceAllUsesWith(carried);
  eval.clear();
  loop->erase();
  return success();
}

} // namespace

LogicalResult flashlight::shlo::unrollConstantLoops(ModuleOp module,
                                                    int64_t maxTrips) {
  IntEvaluator eval;
  SmallVector<Operation *> dead;
  // Outermost first; a nested loop is unrolled once its clones exist.
  for (int round = 0;; ++round) {
    SmallVector<Operation *> loops;
    module.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (op->getName().getStringRef() != "stablehlo.while")
        return WalkResult::advance();
      loops.push_back(op);
      return WalkResult::skip();
    });
    if (loops.empty())
      break;
    if (round == 16)
      return loops.front()->emitError("while loops nest too deeply");
    for (Operation *loop : loops)
      if (failed(unroll(loop, eval, maxTrips, dead)))
        return failure();
  }
  // Start indices that are constants after unrolling become literal ones.
  module.walk([&](Operation *op) {
    StringRef name = op->getName().getStringRef();
    unsigned first = name == "stablehlo.dynamic_slice"          ? 1
                     : name == "stablehlo.dynamic_update_slice" ? 2
                                                                : 0;
    if (!first)
      return;
    OpBuilder b(op);
    for (unsigned i = first; i < op->getNumOperands(); ++i) {
      Value index = op->getOperand(i);
      Operation *def = index.getDefiningOp();
      if (def && def->getName().getStringRef() == "stablehlo.constant")
        continue;
      if (DenseIntElementsAttr value = eval.evaluate(index))
        op->setOperand(i, makeConstant(b, op->getLoc(), value));
    }
  });
  eval.clear();
  for (Operation *op : dead)
    if (op->use_empty())
      op->erase();
  return success();
}
