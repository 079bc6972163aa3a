//===- MaskScoreAnalysis.cpp - Structure of mask and score regions --------===//
//
// A small symbolic evaluator over the region's arith ops: index values become
// affine forms in (b, h, q, k) -- or a floor division of one -- and i1 values
// become a formula of comparisons between such forms. The mask's formula is
// then matched against the structured shapes (band, prefix, chunk).
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"

#include <cmath>

#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Position of the four index arguments in a symbolic form: b, h, q, and the
/// fourth index (kv_idx, or d in an epilogue); then the constant term.
enum : unsigned { kB = 0, kH, kQ, kK, kConst, kNumTerms };

/// An index value: `sum(coeff[i] * index_i) + coeff[kConst]`, optionally
/// floor-divided by `divisor` (> 1). `known` is false for anything else.
struct Sym {
  bool known = false;
  std::array<int64_t, kNumTerms> coeff{};
  int64_t divisor = 1;
  /// Derived from a value loaded from a captured tensor.
  bool dataDependent = false;

  static Sym constant(int64_t c) {
    Sym s;
    s.known = true;
    s.coeff[kConst] = c;
    return s;
  }
  bool isAffine() const { return known && divisor == 1; }
  bool isConstant() const {
    return isAffine() && !coeff[kB] && !coeff[kH] && !coeff[kQ] && !coeff[kK];
  }
  /// The one index with coefficient 1 and no constant term, if any.
  std::optional<unsigned> singleIndex() const {
    if (!isAffine() || coeff[kConst])
      return std::nullopt;
    std::optional<unsigned> found;
    for (unsigned i = 0; i < kConst; ++i) {
      if (!coeff[i])
        continue;
      if (coeff[i] != 1 || found)
        return std::nullopt;
      found = i;
    }
    return found;
  }
  bool nonNegative() const {
    return known && llvm::all_of(coeff, [](int64_t c) { return c >= 0; });
  }
  /// Whether every value of the form fits in a signed `width`-bit integer,
  /// given that batch, head, query and key indices are below 2^31 (what the
  /// kernels' grids and the runtime accept).
  bool fitsSigned(unsigned width) const {
    if (!known)
      return false;
    double lo = double(coeff[kConst]), hi = lo;
    for (unsigned i = 0; i < kConst; ++i)
      (coeff[i] < 0 ? lo : hi) +=
          double(coeff[i]) * double((int64_t(1) << 31) - 1);
    double limit = std::ldexp(1.0, int(width) - 1);
    return lo >= -limit && hi < limit;
  }
};

/// A formula over comparisons. Atoms are normalized to `form pred 0`.
struct Pred {
  enum Kind { True, False, Atom, Chunk, And, Or, Not, Opaque } kind = Opaque;
  /// Atom: `form pred 0`, with `form` affine.
  Sym form;
  arith::CmpIPredicate predicate = arith::CmpIPredicate::eq;
  /// Chunk: q / divisor == k / divisor.
  int64_t divisor = 0;
  SmallVector<unsigned> children;
  bool dataDependent = false;
};

/// Symbolic evaluation of one region.
class RegionEvaluator {
public:
  RegionEvaluator(Block &block, unsigned numLeading, unsigned numCaptures,
                  StringRef regionName, SmallVectorImpl<CaptureAccess> &out)
      : block(block), numLeading(numLeading), regionName(regionName),
        accesses(out) {
    for (unsigned i = 0; i < 4; ++i) {
      Sym s;
      s.known = true;
      s.coeff[i] = 1;
      syms[block.getArgument(numLeading + i)] = s;
    }
    for (unsigned i = 0; i < numCaptures; ++i)
      captureIndex[block.getArgument(numLeading + 4 + i)] = i;
    for (Operation &op : block.without_terminator())
      visit(op);
  }

  Sym sym(Value v) const { return syms.lookup(v); }
  /// The formula of an i1 value (an opaque leaf for unknown values).
  unsigned pred(Value v) {
    auto it = preds.find(v);
    if (it != preds.end())
      return it->second;
    Pred p;
    p.dataDependent = dataDependent.contains(v);
    return add(std::move(p));
  }
  const Pred &node(unsigned i) const { return nodes[i]; }
  bool isDataDependent(Value v) const { return dataDependent.contains(v); }
  /// True if `v` is computed from block argument `arg`.
  bool dependsOn(Value v, unsigned arg) const {
    auto it = argDeps.find(v);
    return it != argDeps.end() && it->second.test(arg);
  }

private:
  unsigned add(Pred p) {
    nodes.push_back(std::move(p));
    return nodes.size() - 1;
  }

  void visit(Operation &op) {
    // Track which block arguments (logits included) each value derives from.
    llvm::BitVector deps(block.getNumArguments());
    bool loaded = false;
    for (Value operand : op.getOperands()) {
      if (auto arg = dyn_cast<BlockArgument>(operand);
          arg && arg.getOwner() == &block)
        deps.set(arg.getArgNumber());
      auto it = argDeps.find(operand);
      if (it != argDeps.end())
        deps |= it->second;
      loaded |= dataDependent.contains(operand);
    }
    if (auto extract = dyn_cast<tensor::ExtractOp>(op))
      loaded |= recordAccess(extract);
    // Nested regions are not evaluated: assume they read everything.
    if (op.getNumRegions() != 0) {
      deps.set();
      loaded |= !captureIndex.empty();
    }
    for (Value result : op.getResults()) {
      argDeps[result] = deps;
      if (loaded)
        dataDependent.insert(result);
    }
    if (op.getNumResults() != 1)
      return;
    Value result = op.getResult(0);
    if (result.getType().isInteger(1))
      visitPredicate(op, result, loaded);
    else if (result.getType().isIntOrIndex())
      visitIndex(op, result, loaded);
  }

  /// Records a read of a captured tensor; returns true if it is one.
  bool recordAccess(tensor::ExtractOp extract) {
    auto it = captureIndex.find(extract.getTensor());
    if (it == captureIndex.end())
      return false;
    CaptureAccess access{it->second, regionName, {}};
    bool epilogue = regionName == "epilogue";
    for (Value index : extract.getIndices()) {
      Sym s = sym(index);
      DimAccess dim{IndexRole::Computed};
      if (s.dataDependent)
        dim.role = IndexRole::Indirect;
      else if (s.isConstant())
        dim = {IndexRole::Constant, s.coeff[kConst]};
      else if (std::optional<unsigned> i = s.singleIndex())
        dim.role = *i == kB   ? IndexRole::Batch
                   : *i == kH ? IndexRole::Head
                   : *i == kQ ? IndexRole::Query
                   : epilogue ? IndexRole::Column
                              : IndexRole::Key;
      else if (s.isAffine())
        dim.role = IndexRole::Affine;
      access.dims.push_back(dim);
    }
    accesses.push_back(std::move(access));
    return true;
  }

  void visitIndex(Operation &op, Value result, bool loaded) {
    Sym out;
    APInt constant;
    auto binary = [&](auto fn) {
      Sym l = sym(op.getOperand(0)), r = sym(op.getOperand(1));
      if (l.known && r.known)
        out = fn(l, r);
    };
    if (matchPattern(result, m_ConstantInt(&constant))) {
      out = Sym::constant(constant.getSExtValue());
    } else if (isa<arith::AddIOp, arith::SubIOp>(op)) {
      int64_t sign = isa<arith::SubIOp>(op) ? -1 : 1;
      binary([&](Sym l, Sym r) {
        Sym s;
        if (!l.isAffine() || !r.isAffine())
          return s;
        s = l;
        for (unsigned i = 0; i < kNumTerms; ++i)
          s.coeff[i] += sign * r.coeff[i];
        return s;
      });
    } else if (isa<arith::MulIOp>(op)) {
      binary([&](Sym l, Sym r) {
        if (!l.isAffine() || !r.isAffine() ||
            (!l.isConstant() && !r.isConstant()))
          return Sym();
        if (l.isConstant())
          std::swap(l, r);
        for (int64_t &c : l.coeff)
          c *= r.coeff[kConst];
        return l;
      });
    } else if (isa<arith::FloorDivSIOp, arith::DivSIOp, arith::DivUIOp>(op)) {
      // Truncating division equals floor division for non-negative values.
      bool floors = isa<arith::FloorDivSIOp>(op);
      binary([&](Sym l, Sym r) {
        if (!l.isAffine() || !r.isConstant() || r.coeff[kConst] <= 0 ||
            (!floors && !l.nonNegative()))
          return Sym();
        l.divisor = r.coeff[kConst];
        return l;
      });
    } else if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
                   arith::ExtUIOp>(op)) {
      out = sym(op.getOperand(0));
    } else if (isa<arith::TruncIOp>(op)) {
      // Exact when every value fits the narrower type (torch-mlir's TOSA
      // output computes causal masks in i32).
      out = sym(op.getOperand(0));
      if (!out.fitsSigned(result.getType().getIntOrFloatBitWidth()))
        out = Sym();
    }
    out.dataDependent = loaded;
    if (loaded)
      out.known = false;
    syms[result] = out;
  }

  void visitPredicate(Operation &op, Value result, bool loaded) {
    Pred p;
    p.dataDependent = loaded;
    APInt constant;
    if (matchPattern(result, m_ConstantInt(&constant))) {
      p.kind = constant.isZero() ? Pred::False : Pred::True;
    } else if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      Sym l = sym(cmp.getLhs()), r = sym(cmp.getRhs());
      if (l.isAffine() && r.isAffine()) {
        bool isUnsigned = toSigned(cmp.getPredicate()) != cmp.getPredicate();
        // Indices are non-negative, so unsigned comparisons of non-negative
        // forms are the signed ones.
        if (!isUnsigned || (l.nonNegative() && r.nonNegative())) {
          p.kind = Pred::Atom;
          p.form = l;
          for (unsigned i = 0; i < kNumTerms; ++i)
            p.form.coeff[i] -= r.coeff[i];
          p.predicate = toSigned(cmp.getPredicate());
        }
      } else if (l.known && r.known && l.divisor > 1 &&
                 l.divisor == r.divisor &&
                 cmp.getPredicate() == arith::CmpIPredicate::eq) {
        // (q / C == k / C) in either order.
        Sym ln = l, rn = r;
        ln.divisor = rn.divisor = 1;
        std::optional<unsigned> li = ln.singleIndex(), ri = rn.singleIndex();
        if (li && ri &&
            ((*li == kQ && *ri == kK) || (*li == kK && *ri == kQ))) {
          p.kind = Pred::Chunk;
          p.divisor = l.divisor;
        }
      }
    } else if (isa<arith::AndIOp, arith::OrIOp>(op)) {
      p.kind = isa<arith::AndIOp>(op) ? Pred::And : Pred::Or;
      p.children = {pred(op.getOperand(0)), pred(op.getOperand(1))};
    } else if (isa<arith::XOrIOp>(op)) {
      // x ^ true = !x.
      for (unsigned i = 0; i < 2; ++i) {
        if (!matchPattern(op.getOperand(i), m_One()))
          continue;
        unsigned negated = negate(pred(op.getOperand(1 - i)));
        nodes[negated].dataDependent |= loaded;
        preds[result] = negated;
        return;
      }
    }
    preds[result] = add(std::move(p));
  }

  /// The node of !nodes[n]: an atom inverts its predicate, And and Or swap
  /// by De Morgan's laws, so that a mask written as the negation of what it
  /// drops (`masked_fill(~keep)`'s `~((j > i) & (j >= P))`) has the shape of
  /// what it keeps.
  unsigned negate(unsigned n) {
    // Memoized: a formula shared by several others (a DAG) is negated once.
    if (auto it = negations.find(n); it != negations.end())
      return it->second;
    unsigned negated = negateNode(n);
    negations[n] = negated;
    return negated;
  }
  unsigned negateNode(unsigned n) {
    Pred p = nodes[n];
    switch (p.kind) {
    case Pred::Atom:
      // !(a pred b) is (a !pred b).
      p.predicate = arith::invertPredicate(p.predicate);
      return add(std::move(p));
    case Pred::True:
    case Pred::False:
      p.kind = p.kind == Pred::True ? Pred::False : Pred::True;
      return add(std::move(p));
    case Pred::And:
    case Pred::Or:
      p.kind = p.kind == Pred::And ? Pred::Or : Pred::And;
      for (unsigned &child : p.children)
        child = negate(child);
      return add(std::move(p));
    case Pred::Not:
      return p.children.front();
    default: {
      Pred q;
      q.kind = Pred::Not;
      q.dataDependent = p.dataDependent;
      q.children = {n};
      return add(std::move(q));
    }
    }
  }

  static arith::CmpIPredicate toSigned(arith::CmpIPredicate p) {
    using P = arith::CmpIPredicate;
    switch (p) {
    case P::ult:
      return P::slt;
    case P::ule:
      return P::sle;
    case P::ugt:
      return P::sgt;
    case P::uge:
      return P::sge;
    default:
      return p;
    }
  }

  Block &block;
  unsigned numLeading;
  StringRef regionName;
  SmallVectorImpl<CaptureAccess> &accesses;
  DenseMap<Value, Sym> syms;
  DenseMap<Value, unsigned> preds;
  DenseMap<Value, unsigned> captureIndex;
  DenseMap<Value, llvm::BitVector> argDeps;
  llvm::DenseSet<Value> dataDependent;
  SmallVector<Pred> nodes;
  /// negate's results by node.
  DenseMap<unsigned, unsigned> negations;
};

/// The predicate `p'` with `a p b <=> b p' a`.
arith::CmpIPredicate swapSides(arith::CmpIPredicate p) {
  using P = arith::CmpIPredicate;
  switch (p) {
  case P::slt:
    return P::sgt;
  case P::sle:
    return P::sge;
  case P::sgt:
    return P::slt;
  case P::sge:
    return P::sle;
  default:
    return p;
  }
}

/// Adds the bound that `form pred 0` puts on d = q - k to `band`; fails if
/// the atom is not of the form `±(q - k) + c pred 0`.
bool addDiagonalBound(const Pred &atom, DiagonalBand &band) {
  using P = arith::CmpIPredicate;
  const Sym &f = atom.form;
  if (f.coeff[kB] || f.coeff[kH] || f.coeff[kQ] + f.coeff[kK] != 0 ||
      (f.coeff[kQ] != 1 && f.coeff[kQ] != -1))
    return false;
  // Rewrite as d pred x: (d + c pred 0) or (-d + c pred 0 <=> d swap(pred) c).
  P p = atom.predicate;
  int64_t x = -f.coeff[kConst];
  if (f.coeff[kQ] == -1) {
    x = f.coeff[kConst];
    p = swapSides(p);
  }
  auto raiseLo = [&](int64_t v) {
    band.lo = band.lo ? std::max(*band.lo, v) : v;
  };
  auto lowerHi = [&](int64_t v) {
    band.hi = band.hi ? std::min(*band.hi, v) : v;
  };
  switch (p) {
  case P::sge:
    raiseLo(x);
    return true;
  case P::sgt:
    raiseLo(x + 1);
    return true;
  case P::sle:
    lowerHi(x);
    return true;
  case P::slt:
    lowerHi(x - 1);
    return true;
  case P::eq:
    raiseLo(x);
    lowerHi(x);
    return true;
  default:
    return false;
  }
}

/// A prefix atom: `idx < length` of the key index, or of the query index
/// (onQueries).
struct PrefixAtom {
  int64_t length;
  bool onQueries;
};

/// If `atom` is `kv_idx < P` or `q_idx < P` (in any spelling), returns it.
std::optional<PrefixAtom> matchPrefix(const Pred &atom) {
  using P = arith::CmpIPredicate;
  const Sym &f = atom.form;
  if (atom.kind != Pred::Atom || f.coeff[kB] || f.coeff[kH] ||
      (f.coeff[kQ] != 0) == (f.coeff[kK] != 0))
    return std::nullopt;
  bool onQueries = f.coeff[kQ] != 0;
  int64_t coeff = onQueries ? f.coeff[kQ] : f.coeff[kK];
  if (coeff != 1 && coeff != -1)
    return std::nullopt;
  // i + c pred 0  <=>  i pred -c ;  -i + c pred 0  <=>  i pred' c.
  int64_t x = coeff == 1 ? -f.coeff[kConst] : f.coeff[kConst];
  P p = coeff == 1 ? atom.predicate : swapSides(atom.predicate);
  if (p == P::slt)
    return PrefixAtom{x, onQueries};
  if (p == P::sle)
    return PrefixAtom{x + 1, onQueries};
  return std::nullopt;
}

/// Flattens nested nodes of `kind` (And/Or) into their operands.
/// Each node once: a formula shared by several others (`x & x`, a DAG) is
/// visited once, which also drops repeated operands (x & x is x).
void flatten(const RegionEvaluator &eval, unsigned root, Pred::Kind kind,
             SmallVectorImpl<unsigned> &out, DenseSet<unsigned> &seen) {
  if (!seen.insert(root).second)
    return;
  const Pred &p = eval.node(root);
  if (p.kind != kind) {
    out.push_back(root);
    return;
  }
  for (unsigned child : p.children)
    flatten(eval, child, kind, out, seen);
}
void flatten(const RegionEvaluator &eval, unsigned root, Pred::Kind kind,
             SmallVectorImpl<unsigned> &out) {
  DenseSet<unsigned> seen;
  flatten(eval, root, kind, out, seen);
}

/// True if any node reachable from `root` reads a captured tensor (each
/// node visited once).
bool anyDataDependent(const RegionEvaluator &eval, unsigned root) {
  DenseSet<unsigned> seen;
  SmallVector<unsigned> work = {root};
  while (!work.empty()) {
    unsigned n = work.pop_back_val();
    if (!seen.insert(n).second)
      continue;
    const Pred &p = eval.node(n);
    if (p.dataDependent)
      return true;
    llvm::append_range(work, p.children);
  }
  return false;
}

/// Adds every conjunct of `root` to `band`; fails if one is not a diagonal
/// bound.
bool collectBand(const RegionEvaluator &eval, unsigned root,
                 DiagonalBand &band) {
  SmallVector<unsigned> conjuncts;
  flatten(eval, root, Pred::And, conjuncts);
  for (unsigned c : conjuncts) {
    const Pred &p = eval.node(c);
    if (p.kind == Pred::True)
      continue;
    if (p.kind != Pred::Atom || !addDiagonalBound(p, band))
      return false;
  }
  return true;
}

MaskInfo classifyMask(RegionEvaluator &eval, Value keep) {
  MaskInfo info;
  unsigned root = eval.pred(keep);
  SmallVector<unsigned> conjuncts;
  flatten(eval, root, Pred::And, conjuncts);
  if (anyDataDependent(eval, root)) {
    // Index-only conjuncts still bound the kept diagonals (documents are
    // usually causal too), which lets tiling skip whole tiles.
    info.kind = MaskKind::DataDependent;
    for (unsigned c : conjuncts) {
      const Pred &p = eval.node(c);
      if (p.kind == Pred::Atom && !anyDataDependent(eval, c))
        addDiagonalBound(p, info.band);
    }
    return info;
  }
  info.kind = MaskKind::Custom;
  std::optional<int64_t> chunk;
  std::optional<PrefixAtom> prefix;
  for (unsigned c : conjuncts) {
    const Pred &p = eval.node(c);
    if (p.kind == Pred::True)
      continue;
    if (p.kind == Pred::Atom && addDiagonalBound(p, info.band))
      continue;
    if (p.kind == Pred::Chunk && !chunk) {
      chunk = p.divisor;
      continue;
    }
    // prefix-LM: (kv_idx < P) or (band).
    SmallVector<unsigned> disjuncts;
    flatten(eval, c, Pred::Or, disjuncts);
    if (disjuncts.size() == 2 && !prefix && conjuncts.size() == 1) {
      for (unsigned i = 0; i < 2 && !prefix; ++i) {
        std::optional<PrefixAtom> atom = matchPrefix(eval.node(disjuncts[i]));
        DiagonalBand band = info.band;
        if (atom && collectBand(eval, disjuncts[1 - i], band)) {
          prefix = atom;
          info.band = band;
        }
      }
      if (prefix)
        continue;
    }
    return info; // Custom
  }
  if (chunk && !prefix) {
    info.kind = MaskKind::Chunked;
    info.chunkSize = *chunk;
  } else if (prefix && !chunk) {
    info.kind = MaskKind::Prefix;
    info.prefixLength = prefix->length;
    info.prefixOnQueries = prefix->onQueries;
  } else if (info.band.isUnbounded()) {
    info.kind = MaskKind::None;
  } else if (info.band.lo && info.band.hi) {
    info.kind = MaskKind::SlidingWindow;
  } else if (info.band.lo) {
    info.kind = MaskKind::Causal;
  } else {
    info.kind = MaskKind::ReverseCausal;
  }
  return info;
}

/// Is `v` equal to `logit + f` with `f` independent of every logit?
bool isAdditiveIn(const RegionEvaluator &eval, Value v, unsigned logit,
                  unsigned numLogits) {
  if (v == v.getParentBlock()->getArgument(logit))
    return true;
  auto independent = [&](Value x) {
    for (unsigned i = 0; i < numLogits; ++i)
      if (eval.dependsOn(x, i) || x == x.getParentBlock()->getArgument(i))
        return false;
    return true;
  };
  if (auto add = v.getDefiningOp<arith::AddFOp>())
    return (isAdditiveIn(eval, add.getLhs(), logit, numLogits) &&
            independent(add.getRhs())) ||
           (isAdditiveIn(eval, add.getRhs(), logit, numLogits) &&
            independent(add.getLhs()));
  if (auto sub = v.getDefiningOp<arith::SubFOp>())
    return isAdditiveIn(eval, sub.getLhs(), logit, numLogits) &&
           independent(sub.getRhs());
  return false;
}

} // namespace

MaskScoreAnalysis::MaskScoreAnalysis(Operation *op) : op(op) {
  unsigned nb = 1;
  unsigned numCaptures = 0;
  if (auto program = dyn_cast<ScoreProgramOpInterface>(op)) {
    nb = program.getNumLogitBranches();
    numCaptures = program.getCapturedValues().size();
  } else if (auto finalize = dyn_cast<OnlineFinalizeOp>(op)) {
    nb = finalize.getNumBranches();
    numCaptures = finalize.getCaptures().size();
  }
  scoreKinds.assign(nb, ScoreKind::Identity);

  auto evaluate = [&](StringRef name, Region *region, unsigned lead,
                      auto &&use) {
    if (!region || region->empty())
      return;
    Block &block = region->front();
    RegionEvaluator eval(block, lead, numCaptures, name, accesses);
    use(eval, cast<YieldOp>(block.getTerminator()).getValues());
  };
  Region *scoreRegion = nullptr, *maskRegion = nullptr, *epilogue = nullptr;
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    scoreRegion = &attention.getScore();
    maskRegion = &attention.getMask();
    epilogue = &attention.getEpilogue();
  } else if (auto step = dyn_cast<OnlineStepOp>(op)) {
    scoreRegion = &step.getScore();
    maskRegion = &step.getMask();
  } else if (auto finalize = dyn_cast<OnlineFinalizeOp>(op)) {
    epilogue = &finalize.getEpilogue();
  }

  size_t before = accesses.size();
  evaluate(
      "score", scoreRegion, nb, [&](RegionEvaluator &eval, ValueRange yielded) {
        for (unsigned r = 0; r < nb; ++r)
          scoreKinds[r] =
              yielded[r] == yielded[r].getParentBlock()->getArgument(r)
                  ? ScoreKind::Identity
              : isAdditiveIn(eval, yielded[r], r, nb) ? ScoreKind::AdditiveBias
                                                      : ScoreKind::General;
      });
  scoreReads = accesses.size() != before;
  evaluate("mask", maskRegion, 0,
           [&](RegionEvaluator &eval, ValueRange yielded) {
             mask = classifyMask(eval, yielded[0]);
           });
  evaluate("epilogue", epilogue, nb, [](RegionEvaluator &, ValueRange) {});
}

bool MaskScoreAnalysis::scoreDependsOnlyOnIndices() const {
  return llvm::all_of(scoreKinds,
                      [](ScoreKind k) { return k != ScoreKind::General; });
}

std::string MaskScoreAnalysis::describe() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "mask=" << stringifyMaskKind(mask.kind);
  switch (mask.kind) {
  case MaskKind::Causal:
    os << "(offset=" << -*mask.band.lo << ")";
    break;
  case MaskKind::ReverseCausal:
    os << "(offset=" << *mask.band.hi << ")";
    break;
  case MaskKind::SlidingWindow:
    os << "(lo=" << *mask.band.lo << ", hi=" << *mask.band.hi << ")";
    break;
  case MaskKind::Prefix:
  case MaskKind::Chunked:
  case MaskKind::DataDependent:
  case MaskKind::Custom: {
    SmallVector<std::string> parts;
    if (mask.kind == MaskKind::Prefix)
      parts.push_back("length=" + std::to_string(mask.prefixLength) +
                      (mask.prefixOnQueries ? " of queries" : ""));
    if (mask.kind == MaskKind::Chunked)
      parts.push_back("size=" + std::to_string(mask.chunkSize));
    auto bound = [](const std::optional<int64_t> &b) {
      return b ? std::to_string(*b) : std::string("inf");
    };
    if (!mask.band.isUnbounded())
      parts.push_back("band=[" + bound(mask.band.lo) + ", " +
                      bound(mask.band.hi) + "]");
    if (!parts.empty()) {
      os << "(";
      llvm::interleaveComma(parts, os);
      os << ")";
    }
    break;
  }
  default:
    break;
  }
  os << " score=[";
  llvm::interleaveComma(scoreKinds, os,
                        [&](ScoreKind k) { os << stringifyScoreKind(k); });
  os << "]";
  for (const CaptureAccess &access : accesses) {
    os << " " << access.region << ":capture" << access.capture << "[";
    llvm::interleaveComma(access.dims, os, [&](const DimAccess &d) {
      if (d.role == IndexRole::Constant)
        os << d.constant;
      else
        os << stringifyIndexRole(d.role);
    });
    os << "]";
  }
  return text;
}

StringRef flashlight::attn::stringifyMaskKind(MaskKind kind) {
  switch (kind) {
  case MaskKind::None:
    return "none";
  case MaskKind::Causal:
    return "causal";
  case MaskKind::ReverseCausal:
    return "reverse_causal";
  case MaskKind::SlidingWindow:
    return "sliding_window";
  case MaskKind::Prefix:
    return "prefix";
  case MaskKind::Chunked:
    return "chunked";
  case MaskKind::DataDependent:
    return "data_dependent";
  case MaskKind::Custom:
    return "custom";
  }
  llvm_unreachable("unknown mask kind");
}

StringRef flashlight::attn::stringifyScoreKind(ScoreKind kind) {
  switch (kind) {
  case ScoreKind::Identity:
    return "identity";
  case ScoreKind::AdditiveBias:
    return "additive";
  case ScoreKind::General:
    return "general";
  }
  llvm_unreachable("unknown score kind");
}

StringRef flashlight::attn::stringifyIndexRole(IndexRole role) {
  switch (role) {
  case IndexRole::Batch:
    return "b";
  case IndexRole::Head:
    return "h";
  case IndexRole::Query:
    return "q";
  case IndexRole::Key:
    return "kv";
  case IndexRole::Column:
    return "d";
  case IndexRole::Constant:
    return "const";
  case IndexRole::Affine:
    return "affine";
  case IndexRole::Computed:
    return "computed";
  case IndexRole::Indirect:
    return "indirect";
  }
  llvm_unreachable("unknown index role");
}

bool MaskScoreAnalysis::rowsNeverEmpty() const {
  auto attention = dyn_cast<AttentionOp>(op);
  if (!attention)
    return false;
  auto qt = cast<RankedTensorType>(attention.getQueries()[0].getType());
  auto vt = cast<RankedTensorType>(attention.getValue().getType());
  bool diagonalFits = qt.getDimSize(2) <= vt.getDimSize(2);
  bool bandHasDiagonal =
      mask.band.lo.value_or(0) <= 0 && mask.band.hi.value_or(0) >= 0;
  switch (mask.kind) {
  case MaskKind::None:
    return true;
  case MaskKind::Causal:
    return mask.band.lo.value_or(0) <= 0;
  case MaskKind::ReverseCausal:
    return diagonalFits && *mask.band.hi >= 0;
  case MaskKind::SlidingWindow:
  case MaskKind::Chunked:
    return diagonalFits && bandHasDiagonal;
  case MaskKind::Prefix:
    // A prefix of queries keeps every key of its own rows only.
    return (mask.prefixLength > 0 && !mask.prefixOnQueries) ||
           (diagonalFits && bandHasDiagonal);
  default:
    return false;
  }
}
