//===- ElementExpr.cpp - Tensor programs as per-element expressions -------===//

#include "flashlight/Dialect/Attn/Analysis/ElementExpr.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace flashlight::attn;

StringRef ENode::combinerName() const {
  return op ? op->getName().getStringRef() : StringRef();
}

AffineExpr ElementGraph::newVar(int64_t extent) {
  if (extent == 1)
    return getAffineConstantExpr(0, ctx);
  extents.push_back(extent);
  return getAffineDimExpr(extents.size() - 1, ctx);
}

ENode *ElementGraph::make(ENode::Kind kind, Type type) {
  nodes.push_back(std::make_unique<ENode>());
  ENode *n = nodes.back().get();
  n->kind = kind;
  n->type = type;
  return n;
}

//===----------------------------------------------------------------------===//
// Index simplification with variable extents
//===----------------------------------------------------------------------===//

namespace {
/// `e` as sum(coef[var] * var) + constant, if it is linear.
bool decompose(AffineExpr e, DenseMap<unsigned, int64_t> &coef,
               int64_t &constant, int64_t scale = 1) {
  if (auto c = dyn_cast<AffineConstantExpr>(e)) {
    constant += scale * c.getValue();
    return true;
  }
  if (auto d = dyn_cast<AffineDimExpr>(e)) {
    coef[d.getPosition()] += scale;
    return true;
  }
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return false;
  if (bin.getKind() == AffineExprKind::Add)
    return decompose(bin.getLHS(), coef, constant, scale) &&
           decompose(bin.getRHS(), coef, constant, scale);
  if (bin.getKind() == AffineExprKind::Mul)
    if (auto c = dyn_cast<AffineConstantExpr>(bin.getRHS()))
      return decompose(bin.getLHS(), coef, constant, scale * c.getValue());
  return false;
}
} // namespace

std::optional<std::pair<int64_t, int64_t>>
ElementGraph::bounds(AffineExpr e) const {
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return std::make_pair(c.getValue(), c.getValue());
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return std::make_pair(int64_t(0), extents[d.getPosition()] - 1);
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return std::nullopt;
  auto l = bounds(bin.getLHS()), r = bounds(bin.getRHS());
  if (!l || !r)
    return std::nullopt;
  auto floorDiv = [](int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
  };
  switch (bin.getKind()) {
  case AffineExprKind::Add:
    return std::make_pair(l->first + r->first, l->second + r->second);
  case AffineExprKind::Mul: {
    if (r->first != r->second)
      return std::nullopt;
    int64_t a = l->first * r->first, b = l->second * r->first;
    return std::make_pair(std::min(a, b), std::max(a, b));
  }
  case AffineExprKind::FloorDiv:
    if (r->first != r->second || r->first <= 0)
      return std::nullopt;
    return std::make_pair(floorDiv(l->first, r->first),
                          floorDiv(l->second, r->first));
  case AffineExprKind::Mod:
    if (r->first != r->second || r->first <= 0)
      return std::nullopt;
    if (l->first >= 0 && l->second < r->first)
      return l;
    return std::make_pair(int64_t(0), r->first - 1);
  default:
    return std::nullopt;
  }
}

AffineExpr ElementGraph::simplify(AffineExpr e) const {
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return e;
  AffineExpr lhs = simplify(bin.getLHS()), rhs = simplify(bin.getRHS());
  switch (bin.getKind()) {
  case AffineExprKind::Add:
    // (x floordiv c) * c + x mod c = x (a split dim merged back).
    for (auto [a, m] : {std::make_pair(lhs, rhs), std::make_pair(rhs, lhs)}) {
      auto mul = dyn_cast<AffineBinaryOpExpr>(a);
      auto mod = dyn_cast<AffineBinaryOpExpr>(m);
      if (!mul || !mod || mul.getKind() != AffineExprKind::Mul ||
          mod.getKind() != AffineExprKind::Mod)
        continue;
      auto div = dyn_cast<AffineBinaryOpExpr>(mul.getLHS());
      if (div && div.getKind() == AffineExprKind::FloorDiv &&
          div.getLHS() == mod.getLHS() && div.getRHS() == mod.getRHS() &&
          mul.getRHS() == mod.getRHS())
        return mod.getLHS();
    }
    return lhs + rhs;
  case AffineExprKind::Mul:
    return lhs * rhs;
  case AffineExprKind::CeilDiv:
    return lhs.ceilDiv(rhs);
  default:
    break;
  }
  auto divisor = dyn_cast<AffineConstantExpr>(rhs);
  // A value known to lie in [0, c): x floordiv c = 0, x mod c = x.
  if (divisor && divisor.getValue() > 0)
    if (auto range = bounds(lhs);
        range && range->first >= 0 && range->second < divisor.getValue())
      return bin.getKind() == AffineExprKind::FloorDiv
                 ? getAffineConstantExpr(0, ctx)
                 : lhs;
  DenseMap<unsigned, int64_t> coef;
  int64_t constant = 0;
  bool isDiv = bin.getKind() == AffineExprKind::FloorDiv;
  if (!divisor || divisor.getValue() <= 0 || !decompose(lhs, coef, constant))
    return isDiv ? lhs.floorDiv(rhs) : lhs % rhs;
  // Split into multiples of the divisor and a remainder part; if the
  // remainder part provably lies in [0, c), the division is exact.
  int64_t c = divisor.getValue();
  AffineExpr quotient = getAffineConstantExpr(constant / c, ctx);
  AffineExpr rest = getAffineConstantExpr(constant % c, ctx);
  int64_t lo = constant % c, hi = constant % c;
  if (constant % c != 0 && constant < 0)
    return isDiv ? lhs.floorDiv(rhs) : lhs % rhs;
  for (auto [var, k] : coef) {
    AffineExpr v = getAffineDimExpr(var, ctx);
    if (k % c == 0) {
      quotient = quotient + v * (k / c);
      continue;
    }
    rest = rest + v * k;
    int64_t span = k * (extents[var] - 1);
    lo += std::min<int64_t>(0, span);
    hi += std::max<int64_t>(0, span);
  }
  if (lo < 0 || hi >= c)
    return isDiv ? lhs.floorDiv(rhs) : lhs % rhs;
  return isDiv ? quotient : rest;
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

/// Whether `v`, in the body of `generic`, depends on an output block
/// argument (an accumulator).
static bool readsAccumulator(linalg::GenericOp generic, Value v) {
  Block *body = generic.getBody();
  SmallVector<Value> stack = {v};
  llvm::DenseSet<Value> seen;
  while (!stack.empty()) {
    Value x = stack.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      if (arg.getOwner() == body &&
          arg.getArgNumber() >= generic.getNumDpsInputs())
        return true;
      continue;
    }
    Operation *def = x.getDefiningOp();
    if (def && def->getBlock() == body)
      stack.append(def->operand_begin(), def->operand_end());
  }
  return false;
}

ENode *ElementGraph::scalarOutside(Value v) {
  if (auto c = v.getDefiningOp<arith::ConstantOp>()) {
    ENode *n = make(ENode::Kind::Const, v.getType());
    n->value = c.getValue();
    return n;
  }
  if (auto extract = v.getDefiningOp<tensor::ExtractOp>()) {
    SmallVector<AffineExpr> idx;
    for (Value i : extract.getIndices()) {
      auto c = i.getDefiningOp<arith::ConstantIndexOp>();
      if (!c) {
        lastError = "a scalar is extracted at a computed index";
        return nullptr;
      }
      idx.push_back(getAffineConstantExpr(c.value(), ctx));
    }
    return element(extract.getTensor(), idx);
  }
  lastError = "a scalar comes from outside the tensor program";
  return nullptr;
}

ENode *ElementGraph::foldConstant(ENode *n) {
  SmallVector<Attribute> attrs;
  for (ENode *operand : n->operands) {
    if (operand->kind != ENode::Kind::Const)
      return nullptr;
    attrs.push_back(operand->value);
  }
  // The op's own folder: `sqrt(64.0)` is 8.0 whatever computed the 64.
  SmallVector<OpFoldResult> folded;
  if (failed(n->op->fold(attrs, folded)) || folded.size() != 1)
    return nullptr;
  auto value = dyn_cast_if_present<TypedAttr>(dyn_cast<Attribute>(folded[0]));
  if (!value || value.getType() != n->type)
    return nullptr;
  ENode *c = make(ENode::Kind::Const, n->type);
  c->value = value;
  return c;
}

ENode *ElementGraph::evalBody(Operation *op, ArrayRef<AffineExpr> loops,
                              Value v, DenseMap<Value, ENode *> &scalars) {
  if (ENode *known = scalars.lookup(v))
    return known;
  auto generic = cast<linalg::GenericOp>(op);
  Block *body = generic.getBody();
  auto applyMap = [&](AffineMap map) {
    SmallVector<AffineExpr> idx;
    for (AffineExpr e : map.getResults())
      idx.push_back(simplify(e.replaceDims(loops)));
    return idx;
  };
  ENode *result = nullptr;
  if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == body) {
    OpOperand *operand = generic.getMatchingOpOperand(arg);
    if (!isa<RankedTensorType>(operand->get().getType()))
      return scalarOutside(operand->get());
    result = element(operand->get(),
                     applyMap(generic.getMatchingIndexingMap(operand)));
  } else if (v.getParentBlock() != body) {
    result = scalarOutside(v);
  } else {
    Operation *def = v.getDefiningOp();
    if (auto index = dyn_cast<linalg::IndexOp>(def)) {
      result = make(ENode::Kind::Index, v.getType());
      result->index = loops[index.getDim()];
    } else if (auto c = dyn_cast<arith::ConstantOp>(def)) {
      result = make(ENode::Kind::Const, v.getType());
      result->value = c.getValue();
    } else if (auto extract = dyn_cast<tensor::ExtractOp>(def)) {
      if (extract.getTensor().getParentBlock() == body) {
        lastError = "a tensor is built inside a linalg body";
        return nullptr;
      }
      SmallVector<ENode *> idx;
      SmallVector<AffineExpr> affine;
      for (Value i : extract.getIndices()) {
        ENode *n = evalBody(op, loops, i, scalars);
        if (!n)
          return nullptr;
        idx.push_back(n);
        if (n->kind == ENode::Kind::Index)
          affine.push_back(n->index);
        else if (auto c = n->kind == ENode::Kind::Const
                              ? dyn_cast<IntegerAttr>(n->value)
                              : IntegerAttr())
          affine.push_back(getAffineConstantExpr(c.getInt(), ctx));
      }
      // At affine indices an extract is an element like any other: look
      // through it (a gather's index tensor computed from iotas).
      if (affine.size() == idx.size()) {
        result = element(extract.getTensor(), affine);
      } else {
        result = make(ENode::Kind::Extract, v.getType());
        result->tensor = extract.getTensor();
        result->operands = idx;
      }
    } else if (def->getNumResults() == 1 && def->getNumRegions() == 0) {
      result = make(ENode::Kind::Op, v.getType());
      result->op = def;
      for (Value operand : def->getOperands()) {
        ENode *n = evalBody(op, loops, operand, scalars);
        if (!n)
          return nullptr;
        result->operands.push_back(n);
      }
      if (ENode *folded = foldConstant(result))
        result = folded;
    } else {
      lastError = ("'" + def->getName().getStringRef() +
                   "' in a linalg body is not understood")
                      .str();
      return nullptr;
    }
  }
  if (result)
    scalars[v] = result;
  return result;
}

/// An element of a chain of insert_slices: the destination with the
/// sources written into boxes (a concatenation where the boxes split one
/// dim).
ENode *ElementGraph::elementOfInsertSlice(Operation *op, Value tensor,
                                          ArrayRef<AffineExpr> indices,
                                          Type elt) {
  auto insert = cast<tensor::InsertSliceOp>(op);
  ENode *result = nullptr;
  // The destination with sources written into boxes. Boxes that span
  // every dim but one are pieces of a concatenation along it: TOSA's
  // concat becomes a chain of these into an empty tensor, flattened here
  // (disjoint boxes; the destination fills the gaps).
  RankedTensorType destType = insert.getDestType();
  using Piece = ConcatPiece;
  SmallVector<Piece> boxes;
  std::optional<unsigned> dim;
  Value base = tensor;
  while (auto box = base.getDefiningOp<tensor::InsertSliceOp>()) {
    ArrayRef<int64_t> offsets = box.getStaticOffsets(),
                      sizes = box.getStaticSizes();
    if (ShapedType::isDynamicShape(offsets) ||
        ShapedType::isDynamicShape(sizes) ||
        llvm::any_of(box.getStaticStrides(),
                     [](int64_t s) { return s != 1; }) ||
        box.getSourceType().getRank() != destType.getRank()) {
      lastError = "an insert_slice is dynamic, strided or rank-reducing";
      return nullptr;
    }
    SmallVector<unsigned> partial;
    for (unsigned d = 0; d < destType.getRank(); ++d)
      if (offsets[d] != 0 || sizes[d] != destType.getDimSize(d))
        partial.push_back(d);
    if (partial.empty()) { // the whole tensor: what the boxes above leave
      base = box.getSource();
      break;
    }
    if (partial.size() > 1 || (dim && *dim != partial.front())) {
      lastError = "insert_slices write boxes within several dims";
      return nullptr;
    }
    dim = partial.front();
    // A one-wide box past the start reads its source at 0.
    boxes.push_back({offsets[*dim], offsets[*dim] + sizes[*dim],
                     box.getSource(), offsets[*dim],
                     sizes[*dim] == 1 && offsets[*dim] != 0});
    base = box.getDest();
  }
  if (!dim) {
    result = element(base, indices);
  } else {
    llvm::sort(boxes, [](const Piece &a, const Piece &b) {
      return a.begin < b.begin;
    });
    SmallVector<Piece> pieces;
    int64_t at = 0, n = destType.getDimSize(*dim);
    for (const Piece &box : boxes) {
      if (box.begin < at) {
        lastError = "insert_slices write overlapping boxes";
        return nullptr;
      }
      if (box.begin > at)
        pieces.push_back({at, box.begin, base, 0, false});
      pieces.push_back(box);
      at = box.end;
    }
    if (at < n)
      pieces.push_back({at, n, base, 0, false});
    result = concatOfPieces(pieces, *dim, indices, elt);
  }
  return result;
}

/// A Concat node along `dim` over `pieces` (ordered, adjacent), or the
/// element of the one piece the index stays in.
ENode *ElementGraph::concatOfPieces(ArrayRef<ConcatPiece> pieces, unsigned dim,
                                    ArrayRef<AffineExpr> indices, Type elt) {
  auto range = bounds(indices[dim]);
  ENode *result = make(ENode::Kind::Concat, elt);
  result->index = indices[dim];
  for (const ConcatPiece &piece : pieces) {
    SmallVector<AffineExpr> idx(indices);
    idx[dim] = piece.atZero ? getAffineConstantExpr(0, ctx)
                            : simplify(indices[dim] - piece.shift);
    // An index that stays inside one piece reads just that piece.
    if (range && range->first >= piece.begin && range->second < piece.end)
      return element(piece.tensor, idx);
    ENode *e = element(piece.tensor, idx);
    if (!e)
      return nullptr;
    result->offsets.push_back(piece.begin);
    result->operands.push_back(e);
  }
  result->offsets.push_back(pieces.back().end);
  return result;
}

/// An element of a concatenation: a Concat node over the pieces the
/// index may fall in, or the one piece it stays in.
ENode *ElementGraph::elementOfConcat(Operation *op, Value tensor,
                                     ArrayRef<AffineExpr> indices, Type elt) {
  auto concat = cast<tensor::ConcatOp>(op);
  int64_t dim = concat.getDim();
  SmallVector<ConcatPiece> pieces;
  int64_t offset = 0;
  for (Value piece : concat.getInputs()) {
    int64_t size = cast<RankedTensorType>(piece.getType()).getDimSize(dim);
    // A piece is read only where the index lies in it: in a piece one
    // wide (a column appended to the keys) the index is 0.
    pieces.push_back({offset, offset + size, piece, offset, size == 1});
    offset += size;
  }
  return concatOfPieces(pieces, dim, indices, elt);
}

/// An element of a generic's result: its body evaluated at the loops
/// the indices fix, a Reduce over each reduction loop.
ENode *ElementGraph::elementOfGeneric(Operation *op, Value tensor,
                                      ArrayRef<AffineExpr> indices, Type elt) {
  auto generic = cast<linalg::GenericOp>(op);
  ENode *result = nullptr;
  unsigned r = cast<OpResult>(tensor).getResultNumber();
  OpOperand *init = generic.getDpsInitOperand(r);
  AffineMap outMap = generic.getMatchingIndexingMap(init);
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  SmallVector<AffineExpr> loops(generic.getNumLoops());
  for (auto [p, e] : llvm::enumerate(outMap.getResults())) {
    // A constant writes a unit dim (torch-mlir's keepdim reductions).
    if (isa<AffineConstantExpr>(e))
      continue;
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim) {
      lastError = "an output indexing map is not a projected permutation";
      return nullptr;
    }
    loops[dim.getPosition()] = indices[p];
  }
  SmallVector<AffineExpr> reductionVars;
  for (auto [l, e] : llvm::enumerate(loops))
    if (!e) {
      if (ShapedType::isDynamic(ranges[l])) {
        lastError = "a reduction has a dynamic extent";
        return nullptr;
      }
      e = newVar(ranges[l]);
      reductionVars.push_back(e);
    }
  DenseMap<Value, ENode *> scalars;
  Value yielded = generic.getBody()->getTerminator()->getOperand(r);
  BlockArgument acc = generic.getRegionOutputArgs()[r];
  if (reductionVars.empty()) {
    result = evalBody(generic, loops, yielded, scalars);
  } else {
    // yielded = combine(acc, x): a Reduce of x over the new variables.
    Operation *combine = yielded.getDefiningOp();
    if (!combine || combine->getNumOperands() != 2 ||
        combine->getBlock() != generic.getBody() ||
        !llvm::is_contained(combine->getOperands(), Value(acc))) {
      lastError = "a reduction is not of the form combine(acc, x)";
      return nullptr;
    }
    Value x = combine->getOperand(0) == acc ? combine->getOperand(1)
                                            : combine->getOperand(0);
    // x must not read any accumulator (the other outputs of a multi-
    // result reduction, like max.dim's argmax, may).
    if (readsAccumulator(generic, x)) {
      lastError = "a reduction's element reads an accumulator";
      return nullptr;
    }
    ENode *body = evalBody(generic, loops, x, scalars);
    ENode *initNode = element(init->get(), indices);
    if (!body || !initNode)
      return nullptr;
    // Reduce innermost-last, each over one variable; a variable of
    // extent 1 was folded to 0 and needs no Reduce.
    SmallVector<unsigned> vars;
    for (AffineExpr e : reductionVars)
      if (auto d = dyn_cast<AffineDimExpr>(e))
        vars.push_back(d.getPosition());
    // Several dims: a sum nests one Reduce per variable, the inner ones
    // from 0 (sum((-2, -1)), e.g. over the points of IPA's distances).
    if (vars.size() > 1 && !isa<arith::AddFOp>(combine)) {
      lastError = "a reduction over several dimensions that is not a sum";
      return nullptr;
    }
    if (vars.empty()) {
      result = make(ENode::Kind::Op, elt);
      result->op = combine;
      result->operands = combine->getOperand(0) == acc
                             ? SmallVector<ENode *>{initNode, body}
                             : SmallVector<ENode *>{body, initNode};
    }
    for (auto [n, var] : llvm::enumerate(llvm::reverse(vars))) {
      ENode *start = initNode;
      if (n + 1 < vars.size()) {
        start = make(ENode::Kind::Const, elt);
        start->value = FloatAttr::get(elt, 0.0);
      }
      result = make(ENode::Kind::Reduce, elt);
      result->op = combine;
      result->var = var;
      result->operands = {body, start};
      body = result;
    }
  }
  return result;
}

ENode *ElementGraph::element(Value tensor, ArrayRef<AffineExpr> indices) {
  std::pair<const void *, std::vector<const void *>> key;
  key.first = tensor.getAsOpaquePointer();
  for (AffineExpr e : indices)
    key.second.push_back(e.getAsOpaquePointer());
  if (auto it = memo.find(key); it != memo.end())
    return it->second;

  auto type = cast<RankedTensorType>(tensor.getType());
  // Every dim indexed: a caller that reads a tensor through fewer (or
  // missing) index expressions than its rank has not modelled it.
  if (int64_t(indices.size()) != type.getRank() ||
      llvm::any_of(indices, [](AffineExpr e) { return !e; })) {
    lastError = "a tensor is read with indices that do not match its rank";
    return nullptr;
  }
  Type elt = type.getElementType();
  auto leaf = [&] {
    ENode *n = make(ENode::Kind::Leaf, elt);
    n->tensor = tensor;
    n->indices.assign(indices.begin(), indices.end());
    return n;
  };
  ENode *result = nullptr;
  Operation *def = tensor.getDefiningOp();
  if (!def) {
    result = leaf();
  } else if (auto c = dyn_cast<arith::ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (dense && dense.isSplat()) {
      result = make(ENode::Kind::Const, elt);
      result->value = dense.getSplatValue<Attribute>();
    } else {
      result = leaf();
    }
  } else if (auto fill = dyn_cast<linalg::FillOp>(def)) {
    result = scalarOutside(fill.getInputs()[0]);
  } else if (auto castOp = dyn_cast<tensor::CastOp>(def)) {
    result = element(castOp.getSource(), indices);
  } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def)) {
    SmallVector<AffineExpr> src;
    for (ReassociationIndices group : expand.getReassociationIndices()) {
      AffineExpr linear = getAffineConstantExpr(0, ctx);
      for (int64_t r : group)
        linear = linear * type.getDimSize(r) + indices[r];
      src.push_back(simplify(linear));
    }
    result = element(expand.getSrc(), src);
  } else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def)) {
    auto srcType = collapse.getSrcType();
    // A collapse to rank 0 has no groups: its source dims are all 1, read
    // at 0.
    SmallVector<AffineExpr> src(srcType.getRank(),
                                getAffineConstantExpr(0, ctx));
    for (auto [g, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      int64_t stride = 1;
      for (int64_t s : llvm::reverse(group)) {
        src[s] = simplify(indices[g].floorDiv(stride) % srcType.getDimSize(s));
        stride *= srcType.getDimSize(s);
      }
    }
    result = element(collapse.getSrc(), src);
  } else if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
    if (ShapedType::isDynamicShape(slice.getStaticStrides()) ||
        ShapedType::isDynamicShape(slice.getStaticOffsets())) {
      lastError = "a slice has dynamic offsets or strides";
      return nullptr;
    }
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    SmallVector<AffineExpr> src;
    unsigned next = 0;
    for (unsigned d = 0; d < slice.getSourceType().getRank(); ++d) {
      int64_t offset = slice.getStaticOffsets()[d];
      if (dropped.test(d)) {
        src.push_back(getAffineConstantExpr(offset, ctx));
        continue;
      }
      src.push_back(
          simplify(indices[next++] * slice.getStaticStrides()[d] + offset));
    }
    result = element(slice.getSource(), src);
  } else if (isa<tensor::InsertSliceOp>(def)) {
    result = elementOfInsertSlice(def, tensor, indices, elt);
  } else if (isa<tensor::ConcatOp>(def)) {
    result = elementOfConcat(def, tensor, indices, elt);
  } else if (isa<linalg::GenericOp>(def)) {
    result = elementOfGeneric(def, tensor, indices, elt);
  } else if (isa<tensor::EmptyOp>(def)) {
    lastError = "an uninitialized tensor is read";
    return nullptr;
  } else {
    result = leaf();
  }
  if (result) {
    memo[key] = result;
    // A computed element (a projection, RoPE, a norm) can still be read
    // from the tensor that holds it.
    if (result->kind != ENode::Kind::Leaf && def &&
        isa<linalg::GenericOp, tensor::ConcatOp, tensor::InsertSliceOp>(def))
      origins.try_emplace(
          result, tensor,
          SmallVector<AffineExpr>(indices.begin(), indices.end()));
  }
  return result;
}

ENode *ElementGraph::stored(ENode *node) {
  auto it = origins.find(node);
  if (it == origins.end())
    return nullptr;
  auto [tensor, indices] = it->second;
  ENode *n = make(ENode::Kind::Leaf, node->type);
  n->tensor = tensor;
  n->indices = indices;
  return n;
}

//===----------------------------------------------------------------------===//
// Queries
//===----------------------------------------------------------------------===//

bool ElementGraph::dependsOn(ENode *node, unsigned var) {
  auto key = std::make_pair(node, var);
  if (auto it = dependsMemo.find(key); it != dependsMemo.end())
    return it->second;
  bool result = false;
  switch (node->kind) {
  case ENode::Kind::Leaf:
    result = llvm::any_of(node->indices,
                          [&](AffineExpr e) { return e.isFunctionOfDim(var); });
    break;
  case ENode::Kind::Index:
    result = node->index.isFunctionOfDim(var);
    break;
  case ENode::Kind::Concat:
    result = node->index.isFunctionOfDim(var);
    [[fallthrough]];
  default:
    for (ENode *n : node->operands)
      result = result || dependsOn(n, var);
  }
  dependsMemo[key] = result;
  return result;
}

bool ElementGraph::contains(ENode *node, ENode *needle) {
  llvm::DenseSet<ENode *> seen;
  SmallVector<ENode *> stack = {node};
  while (!stack.empty()) {
    ENode *n = stack.pop_back_val();
    if (n == needle)
      return true;
    if (seen.insert(n).second)
      stack.append(n->operands.begin(), n->operands.end());
  }
  return false;
}

bool ElementGraph::equivalent(ENode *a, ENode *b, unsigned va, unsigned vb,
                              const DenseMap<ENode *, unsigned> &pieces) {
  DenseMap<unsigned, unsigned> vars;
  vars[va] = vb;
  return equivalentImpl(a, b, vars, pieces);
}

bool ElementGraph::equivalentImpl(ENode *a, ENode *b,
                                  DenseMap<unsigned, unsigned> &vars,
                                  const DenseMap<ENode *, unsigned> &pieces) {
  if (auto it = pieces.find(a); it != pieces.end())
    return equivalentImpl(a->operands[it->second], b, vars, pieces);
  if (a->kind != b->kind || a->type != b->type ||
      a->operands.size() != b->operands.size())
    return false;
  // Renamed, then simplified with the extents of `b`'s variables: a
  // variable compared on part of its range (a softmax's sum over the keys
  // and a sink column, against the keys alone) drops its `mod N`.
  auto rename = [&](AffineExpr e) {
    SmallVector<AffineExpr> dims;
    for (unsigned v = 0; v < extents.size(); ++v)
      dims.push_back(getAffineDimExpr(vars.count(v) ? vars[v] : v, ctx));
    return simplify(e.replaceDims(dims));
  };
  switch (a->kind) {
  case ENode::Kind::Leaf:
    if (a->tensor != b->tensor)
      return false;
    for (auto [x, y] : llvm::zip(a->indices, b->indices))
      if (rename(x) != simplify(y))
        return false;
    return true;
  case ENode::Kind::Const:
    return a->value == b->value;
  case ENode::Kind::Index:
    return rename(a->index) == simplify(b->index);
  case ENode::Kind::Op:
    if (a->op->getName() != b->op->getName() ||
        a->op->getAttrDictionary() != b->op->getAttrDictionary())
      return false;
    break;
  case ENode::Kind::Extract:
    if (a->tensor != b->tensor)
      return false;
    break;
  case ENode::Kind::Concat:
    if (a->offsets != b->offsets || rename(a->index) != simplify(b->index))
      return false;
    break;
  case ENode::Kind::Reduce:
    if (a->combinerName() != b->combinerName() ||
        extents[a->var] != extents[b->var])
      return false;
    vars[a->var] = b->var;
    break;
  }
  for (auto [x, y] : llvm::zip(a->operands, b->operands))
    if (!equivalentImpl(x, y, vars, pieces))
      return false;
  return true;
}
