//===- Raise.cpp - Find attention in tensor programs ----------------------===//
//
// Recognizes attention on element expressions (ElementExpr.h): what one
// output element is, as a formula of symbolic indices. The formula does not
// depend on how the program spelled its layouts, so one matcher covers
// einsum and matmul, BHND and BNHD, transposed or reshaped GQA, softmax
// written by hand or by a library.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/ElementExpr.h"
#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNRAISE
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;
using Kind = ENode::Kind;

namespace {

/// A failed match: which step, and why.
struct Reason {
  std::string text;
  /// How far the match got: 0 no P V sum, 1 branches found, 2 their
  /// weights normalized, 3 the Q.K contraction found, 4 roles assigned.
  /// Among several candidates, the furthest one's reason explains best.
  int stage = 0;
};

bool isOp(ENode *n, StringRef name) {
  return n->kind == Kind::Op && n->op->getName().getStringRef() == name;
}

bool isCast(ENode *n) {
  return isOp(n, "arith.extf") || isOp(n, "arith.truncf");
}

/// `n` without the float casts on top of it.
ENode *peel(ENode *n) {
  while (isCast(n))
    n = n->operands[0];
  return n;
}

std::optional<double> constValue(ENode *n) {
  n = peel(n);
  if (n->kind != Kind::Const)
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(n->value))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(n->value))
    return i.getType().isInteger(1) ? double(i.getValue().getBoolValue())
                                    : double(i.getInt());
  return std::nullopt;
}

bool isConst(ENode *n, double v) {
  std::optional<double> c = constValue(n);
  return c && *c == v;
}

/// A constant that masks like -inf: exp of it is 0 next to any real score.
bool isMaskingConst(ENode *n) {
  std::optional<double> c = constValue(n);
  return c && (*c <= -1e30 || (std::isinf(*c) && *c < 0) ||
               (peel(n)->type.isF16() && *c <= -6e4));
}

ENode *findNode(ENode *n, function_ref<bool(ENode *)> pred);

bool isReduce(ENode *n, StringRef combiner) {
  return n->kind == Kind::Reduce && n->combinerName() == combiner;
}

/// A term of the logits besides Q.K that folds into extra columns of Q and
/// K: an IPA-style squared distance `sum_{p...} (A - B)^2`, or a second
/// contraction `sum_p A * B` (MLA's decoupled RoPE, `q_nope.k_nope +
/// q_pe.k_pe`). A reads along the query (not the keys), B along the keys,
/// both along the point variables `vars` the sums run over.
struct Distance {
  ENode *node = nullptr; // the outermost sum
  SmallVector<unsigned> vars;
  ENode *a = nullptr, *b = nullptr;
  /// `sum A * B`: no squares, the cross term is the whole term.
  bool product = false;
  /// sum A^2 ([B, Hq, M]; none where a softmax cancels it) and sum B^2
  /// ([B, Hkv, N]), f32, once built.
  Value rows, cols;
};

/// One logit branch: `sum_j P[j] * V[j]` with P normalized from S.
struct Branch {
  ENode *output = nullptr; // the node the epilogue sees as o_r
  /// This branch's share of `output`: +-(product of coefs) * o_r; terms
  /// of one output are summed (a linear combination of softmaxes).
  SmallVector<ENode *> coefs;
  bool negative = false;
  ENode *weights = nullptr;
  ENode *v = nullptr;
  unsigned j = 0;
  Normalizer normalizer = Normalizer::softmax;
  ENode *logits = nullptr; // S, the score expression (with the mask)
  ENode *qk = nullptr;
  unsigned c = 0;
  ENode *q = nullptr, *k = nullptr;
  double scale = 1.0;
  ENode *score = nullptr;    // S without the mask
  ENode *sink = nullptr;     // the extra logit in the denominator
  SmallVector<ENode *> keep; // mask conjuncts
  SmallVector<ENode *> drop; // conjuncts that mask when true
  /// A mask fills with a finite constant (finfo.min, -1e9): a row with
  /// every key masked is then a uniform average of V, not 0.
  bool finiteFill = false;
  SmallVector<Distance> distances; // squared distances in S besides Q.K
  /// The epilogue reads the softmax's output times exp of its log-sum-exp
  /// (`O * exp(LSE)`, attention-gym's undo_softmax): that is `sum_j exp(S)
  /// V`, normalizer `none` over exp of the score.
  bool exponentiate = false;
};

/// Whether `e` reads head variable `h` other than as `h floordiv group`
/// (a KV tensor read at the query head where GQA groups them).
bool readsHeadDirectly(AffineExpr e, unsigned h, int64_t group) {
  if (auto bin = dyn_cast<AffineBinaryOpExpr>(e)) {
    if (bin.getKind() == AffineExprKind::FloorDiv &&
        bin.getLHS() == getAffineDimExpr(h, e.getContext()))
      if (auto g = dyn_cast<AffineConstantExpr>(bin.getRHS()))
        if (g.getValue() % group == 0)
          return false;
    return readsHeadDirectly(bin.getLHS(), h, group) ||
           readsHeadDirectly(bin.getRHS(), h, group);
  }
  return e == getAffineDimExpr(h, e.getContext());
}

struct Roles;

class Raiser {
public:
  Raiser(func::FuncOp func, bool keepRounding)
      : func(func), graph(func.getContext()), keepRounding(keepRounding) {}

  /// Raises the attention computing `root`, or says why it is not one.
  FailureOr<Value> raise(Value root, Reason &why);

  /// Other results of the function: one that is the log-sum-exp of the
  /// raised attention's logits (jax.nn.dot_product_attention's
  /// `return_residual`) becomes the op's LSE.
  SmallVector<Value> siblings;
  /// After raise: (index into `siblings`, the value that replaces it).
  SmallVector<std::pair<unsigned, Value>> lseOf;

private:
  LogicalResult fail(Reason &why, const Twine &text) {
    why.text = text.str();
    return failure();
  }
  LogicalResult findBranches(ENode *root, SmallVectorImpl<Branch> &branches,
                             Reason &why);
  /// The op's operands, built by buildOperands.
  struct Operands {
    SmallVector<Value> queries, keys, sinks;
    Value value;
  };
  /// Which regions the op gets.
  struct RegionsWanted {
    bool score, mask, epilogue;
  };
  LogicalResult matchBranches(ENode *out, SmallVectorImpl<Branch> &branches,
                              Reason &why);
  LogicalResult assignRoles(const Branch &first, ArrayRef<AffineExpr> outIdx,
                            Roles &roles, SmallVectorImpl<int> &outRole,
                            Reason &why);
  LogicalResult commonElementType(ArrayRef<Branch> branches, Type &common,
                                  Reason &why);
  Value layoutView(OpBuilder &b, Location loc, ENode *leaf,
                   ArrayRef<int> roleVars, int64_t group,
                   ArrayRef<int64_t> shape, StringRef what, Reason &why,
                   Type elt = Type());
  LogicalResult headGroup(const Branch &first, Roles &roles, int64_t &group,
                          Reason &why);
  LogicalResult buildOperands(OpBuilder &b, Location loc,
                              MutableArrayRef<Branch> branches,
                              const Roles &roles, int64_t group, Type common,
                              Operands &ops, Reason &why);
  LogicalResult buildRegions(AttentionOp op, ArrayRef<Branch> branches,
                             const Roles &roles, int64_t group, ENode *epilogue,
                             const RegionsWanted &want,
                             ArrayRef<Value> captures, Reason &why);
  FailureOr<Value>
  finishResult(AttentionOp op, ArrayRef<Branch> branches, const Roles &roles,
               ArrayRef<int> outRole, RankedTensorType rootType,
               ArrayRef<std::pair<unsigned, SmallVector<int>>> lseSiblings,
               OpBuilder &b, Reason &why);

  LogicalResult matchPV(ENode *sum, Branch &br, Reason &why);
  /// `n` or a node under its float casts as an element of the tensor the
  /// program stored it in (see ElementGraph::stored); null if none is.
  /// Below exact widenings (`extf`) the narrowest stored tensor is read: a
  /// bf16 projection the program widens to f32 before its contraction holds
  /// the same values, and it keeps the tensor-core path open (not with
  /// `keepRounding`: a narrow V makes the kernel round P to its type).
  ENode *storedElement(ENode *n) {
    ENode *found = nullptr;
    while (true) {
      if (ENode *held = graph.stored(n))
        found = held;
      else if (found && n->kind == Kind::Leaf)
        found = n;
      if (!isCast(n) || (found && (keepRounding || !isOp(n, "arith.extf"))))
        return found;
      n = n->operands[0];
    }
  }
  void linearTerms(const Branch &pv, ENode *w, bool negative,
                   ArrayRef<ENode *> coefs, SmallVectorImpl<Branch> &branches);
  LogicalResult matchWeights(Branch &br, Reason &why);
  bool isAllMasked(ENode *guard, ENode *logits, unsigned j);
  bool readsKeysAndQueries(const Branch &br, ENode *n);
  std::optional<SmallVector<int>> matchLse(Value sibling, const Branch &br,
                                           ArrayRef<int> roles);
  bool isLse(ENode *n, const Branch &br);
  /// The m of `x = S - m` when m is a row max (a max-reduction) or a
  /// finite constant, constant along `j`: a shift a softmax cancels.
  ENode *rowShift(ENode *x, unsigned j) {
    if (!isOp(x, "arith.subf") || graph.dependsOn(x->operands[1], j))
      return nullptr;
    ENode *m = peel(x->operands[1]);
    std::optional<double> c = constValue(m);
    bool max = isReduce(m, "arith.maximumf") || isReduce(m, "arith.maxnumf");
    return max || (c && std::isfinite(*c)) ? m : nullptr;
  }
  /// Whether the softmax denominator `den` (a sum over concat(S, sink))
  /// subtracts `shift` outside the concatenation, i.e. from the sink too.
  bool shiftsSink(ENode *den, ENode *shift) {
    ENode *x = peel(den->operands[0]);
    if (!isOp(x, "math.exp"))
      return false;
    for (x = peel(x->operands[0]); isOp(x, "arith.subf");
         x = peel(x->operands[0]))
      if (peel(x->operands[1]) == shift ||
          graph.equivalent(peel(x->operands[1]), shift, den->var, den->var))
        return true;
    return false;
  }
  LogicalResult matchContraction(Branch &br, Reason &why);
  void splitMask(Branch &br);
  void matchUnnormalized(ENode *out, Branch &br);
  /// Whether `n` computes an exponential itself, not only by reading a
  /// stored tensor (other than through casts) that does.
  bool ownExp(ENode *n) {
    n = peel(n);
    llvm::DenseSet<ENode *> seen;
    SmallVector<ENode *> work = {n};
    while (!work.empty()) {
      ENode *x = work.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (isOp(x, "math.exp"))
        return true;
      if (x != n && !isCast(x) && graph.stored(x))
        continue;
      work.append(x->operands.begin(), x->operands.end());
    }
    return false;
  }

  func::FuncOp func;
  ElementGraph graph;
  bool keepRounding;
};

//===----------------------------------------------------------------------===//
// Matching
//===----------------------------------------------------------------------===//

/// The P and V of `sum_j P * V` (casts aside).
LogicalResult Raiser::matchPV(ENode *sum, Branch &br, Reason &why) {
  if (!isReduce(sum, "arith.addf") || !isConst(sum->operands[1], 0.0))
    return fail(why, "not a sum from zero");
  ENode *body = peel(sum->operands[0]);
  if (!isOp(body, "arith.mulf"))
    return fail(why, "the PV sum is not over a product");
  br.j = sum->var;
  for (int side : {0, 1}) {
    ENode *v = peel(body->operands[side]);
    if (v->kind == Kind::Leaf && graph.dependsOn(v, br.j)) {
      br.v = v;
      br.weights = body->operands[1 - side];
      br.output = sum;
      return success();
    }
  }
  // V computed by the program (a projection): the factor without the
  // exponential is V, read from the tensor it is stored in. Where both hold
  // one (V of a layer after another attention holds that one's), only an
  // exponential not behind a tensor the program stores counts.
  auto hasExp = [](ENode *n) {
    return findNode(n, [](ENode *x) { return isOp(x, "math.exp"); }) != nullptr;
  };
  bool both = hasExp(body->operands[0]) && hasExp(body->operands[1]);
  for (int side : {0, 1}) {
    ENode *v = body->operands[side];
    ENode *held = storedElement(v);
    ENode *w = body->operands[1 - side];
    bool vIsV = both ? !ownExp(v) && ownExp(w) : !hasExp(v) && hasExp(w);
    if (held && graph.dependsOn(v, br.j) && vIsV) {
      br.v = held;
      br.weights = body->operands[1 - side];
      br.output = sum;
      return success();
    }
  }
  return fail(why, "no factor of the PV sum reads a tensor along the key "
                   "index");
}

/// The first node in `n` (depth first, each node once) satisfying `pred`.
ENode *findNode(ENode *n, function_ref<bool(ENode *)> pred) {
  llvm::DenseSet<ENode *> seen;
  SmallVector<ENode *> stack = {n};
  while (!stack.empty()) {
    ENode *x = stack.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (pred(x))
      return x;
    stack.append(x->operands.begin(), x->operands.end());
  }
  return nullptr;
}

/// Whether a reduction occurs in `n`.
bool hasReduce(ENode *n) {
  return findNode(n, [](ENode *x) { return x->kind == Kind::Reduce; });
}

/// Splits PV weights that are a linear combination (coefficients constant
/// along the keys) of normalized weights into one branch per term.
void Raiser::linearTerms(const Branch &pv, ENode *w, bool negative,
                         ArrayRef<ENode *> coefs,
                         SmallVectorImpl<Branch> &branches) {
  ENode *p = peel(w);
  if (isOp(p, "arith.addf") || isOp(p, "arith.subf")) {
    linearTerms(pv, p->operands[0], negative, coefs, branches);
    linearTerms(pv, p->operands[1], negative != isOp(p, "arith.subf"), coefs,
                branches);
    return;
  }
  if (isOp(p, "arith.negf"))
    return linearTerms(pv, p->operands[0], !negative, coefs, branches);
  // A factor constant along the keys is a coefficient, unless it holds a
  // reduction: then it is a normalizer (E * reciprocal(sum E), as TOSA
  // writes a softmax).
  if (isOp(p, "arith.mulf"))
    for (int side : {0, 1})
      if (!graph.dependsOn(p->operands[side], pv.j) &&
          !hasReduce(p->operands[side])) {
        SmallVector<ENode *> more(coefs);
        more.push_back(p->operands[side]);
        return linearTerms(pv, p->operands[1 - side], negative, more, branches);
      }
  Branch br = pv;
  br.weights = w;
  br.negative = negative;
  br.coefs.assign(coefs.begin(), coefs.end());
  branches.push_back(br);
}

/// Outputs of the branches, outermost reductions of `root` (or their
/// quotient by a matching sum, for `(sum E*V) / sum E`).
LogicalResult Raiser::findBranches(ENode *root,
                                   SmallVectorImpl<Branch> &branches,
                                   Reason &why) {
  llvm::DenseSet<ENode *> seen;
  SmallVector<ENode *> stack = {root};
  Reason last{"no sum over keys of (weights x values) found"};
  while (!stack.empty()) {
    ENode *n = stack.pop_back_val();
    if (!seen.insert(n).second)
      continue;
    if (isOp(n, "arith.divf")) {
      // (sum_j E[j] V[j]) / (sum_j' E[j']): softmax normalized after PV.
      ENode *num = peel(n->operands[0]), *den = peel(n->operands[1]);
      Branch br;
      Reason r;
      if (isReduce(num, "arith.addf") && isReduce(den, "arith.addf") &&
          succeeded(matchPV(num, br, r)) &&
          graph.equivalent(peel(den->operands[0]), peel(br.weights), den->var,
                           br.j) &&
          isConst(den->operands[1], 0.0)) {
        br.output = n;
        br.logits = br.weights; // E; matchWeights finds S in it
        br.weights = nullptr;
        branches.push_back(br);
        continue;
      }
    }
    if (n->kind == Kind::Reduce) {
      Branch br;
      if (succeeded(matchPV(n, br, last)))
        linearTerms(br, br.weights, /*negative=*/false, {}, branches);
      continue;
    }
    stack.append(n->operands.begin(), n->operands.end());
  }
  if (branches.empty())
    return fail(why, last.text);
  return success();
}

/// The concatenation along variable `var` (its index is exactly `var`)
/// inside `n`, if there is one.
ENode *findConcat(ElementGraph &graph, ENode *n, unsigned var) {
  AffineExpr index = getAffineDimExpr(var, graph.getContext());
  return findNode(n, [&](ENode *x) {
    return x->kind == Kind::Concat && x->index == index;
  });
}

/// S from P: softmax (`E / sum E`, `E = exp(S - m)` or `exp(S)`) or
/// sigmoid (`1 / (1 + exp(-S))`).
LogicalResult Raiser::matchWeights(Branch &br, Reason &why) {
  ENode *e = nullptr;
  ENode *sum = nullptr; // the softmax denominator, when P = E / sum
  if (br.logits) {
    e = br.logits; // normalized after PV: E is known
  } else {
    ENode *p = peel(br.weights);
    // A "safe" softmax zeroes rows whose keys are all masked: select(all_j
    // (S == -inf), 0, softmax(S)). The kernel's softmax already gives 0
    // there; the guard is checked against S once S is known.
    ENode *guard = nullptr;
    if (isOp(p, "arith.select") && isConst(p->operands[1], 0.0) &&
        !graph.dependsOn(p->operands[0], br.j)) {
      guard = peel(p->operands[0]);
      br.weights = p->operands[2];
      if (failed(matchWeights(br, why)))
        return failure();
      if (!isAllMasked(guard, br.logits, br.j))
        return fail(why, "the weights are zeroed by a row condition other "
                         "than 'every key is masked'");
      return success();
    }
    if (isOp(p, "arith.divf") && isConst(p->operands[0], 1.0)) {
      ENode *den = peel(p->operands[1]);
      if (isOp(den, "arith.addf")) {
        for (int side : {0, 1}) {
          ENode *ex = peel(den->operands[side]);
          if (isConst(den->operands[1 - side], 1.0) && isOp(ex, "math.exp") &&
              isOp(peel(ex->operands[0]), "arith.negf")) {
            br.normalizer = Normalizer::sigmoid;
            br.logits = peel(ex->operands[0])->operands[0];
            return success();
          }
        }
      }
    }
    // E / D, or E * (1 / D) (TOSA's reciprocal).
    ENode *numer = nullptr, *den = nullptr;
    if (isOp(p, "arith.divf")) {
      numer = p->operands[0];
      den = peel(p->operands[1]);
    } else if (isOp(p, "arith.mulf")) {
      for (int side : {0, 1}) {
        ENode *r = peel(p->operands[side]);
        if (isOp(r, "arith.divf") && isConst(r->operands[0], 1.0)) {
          numer = p->operands[1 - side];
          den = peel(r->operands[1]);
        }
      }
    }
    if (!numer)
      return fail(why, "the PV weights are neither a softmax (E / sum E) nor "
                       "a sigmoid");
    if (!isReduce(den, "arith.addf") || !isConst(den->operands[1], 0.0) ||
        graph.dependsOn(den, br.j))
      return fail(why, "the softmax denominator is not a sum over the keys");
    ENode *body = peel(den->operands[0]), *num = peel(numer);
    if (!graph.equivalent(body, num, den->var, br.j)) {
      // Sinks: the denominator also sums columns concatenated after the
      // keys (softmax over concat(S, sink), sliced back to the keys).
      ENode *concat = findConcat(graph, body, den->var);
      int64_t n = graph.extent(br.j);
      if (!concat || concat->offsets.size() != 3 || concat->offsets[1] != n ||
          concat->offsets[2] != n + 1 ||
          graph.dependsOn(concat->operands[1], den->var) ||
          !graph.equivalent(body, num, den->var, br.j, {{concat, 0}}))
        return fail(why, "the softmax denominator sums something other than "
                         "its numerator");
      br.sink = concat->operands[1];
    }
    sum = den;
    e = numer;
  }
  e = peel(e);
  if (!isOp(e, "math.exp"))
    return fail(why, "the softmax numerator is not an exponential");
  ENode *x = peel(e->operands[0]);
  // exp(S - m) = exp(S) * exp(-m): any m constant along j cancels.
  if (isOp(x, "arith.subf") && !graph.dependsOn(x->operands[1], br.j))
    x = x->operands[0];
  // So do further shifts of the logits by a row max or a constant
  // (gpt-oss subtracts the max over concat(S, sink) before its softmax);
  // with a sink, only a shift outside the concatenation, which moves the
  // sink's logit too.
  for (ENode *shift; (shift = rowShift(peel(x), br.j));) {
    if (br.sink && !shiftsSink(sum, shift))
      return fail(why, "the logits are shifted apart from the sink's");
    x = peel(peel(x)->operands[0]);
  }
  br.normalizer = Normalizer::softmax;
  br.logits = x;
  return success();
}

/// `x` where `n` is `not x` (`xori x, true`), null otherwise.
ENode *negated(ENode *n) {
  n = peel(n);
  if (!isOp(n, "arith.xori") || !n->type.isInteger(1))
    return nullptr;
  for (int side : {0, 1})
    if (isConst(n->operands[1 - side], 1.0))
      return n->operands[side];
  return nullptr;
}

/// Whether `guard` is `all_j' (S[j'] == -inf)` (or `not any_j' (S[j'] !=
/// -inf)`), with the S of the softmax (`logits` along `j`).
bool Raiser::isAllMasked(ENode *guard, ENode *logits, unsigned j) {
  // `S[j'] == -inf` (masked) or, with `masked` false, `S[j'] != -inf`
  // (kept, also spelled `not (S[j'] == -inf)`), with j' the guard's
  // reduction variable.
  auto tests = [&](ENode *e, unsigned var, bool masked) {
    if (ENode *inner = negated(e)) {
      e = inner;
      masked = !masked;
    }
    e = peel(e);
    if (!isOp(e, "arith.cmpf"))
      return false;
    auto pred = cast<arith::CmpFOp>(e->op).getPredicate();
    bool equal = pred == arith::CmpFPredicate::OEQ;
    bool unequal =
        pred == arith::CmpFPredicate::UNE || pred == arith::CmpFPredicate::ONE;
    if (!(masked ? equal : unequal))
      return false;
    for (int side : {0, 1}) {
      std::optional<double> c = constValue(e->operands[1 - side]);
      if (c && std::isinf(*c) && *c < 0 &&
          graph.equivalent(peel(e->operands[side]), peel(logits), var, j))
        return true;
    }
    return false;
  };
  // all_j' (S == -inf), or its De Morgan form not any_j' (S != -inf)
  // (Core ATen's decomposition of the safe softmax).
  guard = peel(guard);
  if (isReduce(guard, "arith.andi") && isConst(guard->operands[1], 1.0))
    return tests(guard->operands[0], guard->var, /*masked=*/true);
  ENode *any = negated(guard);
  if (any && isReduce(peel(any), "arith.ori") &&
      isConst(peel(any)->operands[1], 0.0))
    return tests(peel(any)->operands[0], peel(any)->var, /*masked=*/false);
  return false;
}

/// The body of the sums from 0 that `n` nests (their variables into
/// `d.vars`, `d.node` = `n`).
ENode *peelSums(ENode *n, Distance &d) {
  d.node = n;
  ENode *body = n;
  while (isReduce(body, "arith.addf") && isConst(body->operands[1], 0.0)) {
    d.vars.push_back(body->var);
    body = peel(body->operands[0]);
  }
  return body;
}

/// `d` with A and B set from `x` and `y`, A the one not reading along the
/// keys `j`, B the one reading along them; none if that does not hold.
std::optional<Distance> orient(ElementGraph &graph, Distance d, ENode *x,
                               ENode *y, unsigned j) {
  if (d.vars.empty())
    return std::nullopt;
  d.a = x;
  d.b = y;
  if (graph.dependsOn(d.a, j))
    std::swap(d.a, d.b);
  if (graph.dependsOn(d.a, j) || !graph.dependsOn(d.b, j))
    return std::nullopt;
  return d;
}

/// `n` as a squared distance along the keys `j`, if it is one: sums from 0
/// of `(A - B)^2` (a product of one difference with itself, or its power 2).
std::optional<Distance> matchDistance(ElementGraph &graph, ENode *n,
                                      unsigned j) {
  Distance d;
  ENode *body = peelSums(n, d);
  ENode *diff = nullptr;
  if (isOp(body, "arith.mulf") &&
      peel(body->operands[0]) == peel(body->operands[1]))
    diff = peel(body->operands[0]);
  else if (isOp(body, "math.powf") && isConst(body->operands[1], 2.0))
    diff = peel(body->operands[0]);
  if (!diff || !isOp(diff, "arith.subf"))
    return std::nullopt;
  return orient(graph, d, diff->operands[0], diff->operands[1], j);
}

/// `n` as a contraction `sum_p A * B` along the keys `j` with A not reading
/// along them, if it is one (a second Q.K-shaped term of the logits).
std::optional<Distance> matchProduct(ElementGraph &graph, ENode *n,
                                     unsigned j) {
  Distance d;
  d.product = true;
  ENode *body = peelSums(n, d);
  if (!isOp(body, "arith.mulf"))
    return std::nullopt;
  return orient(graph, d, body->operands[0], body->operands[1], j);
}

/// The longest reduction a region unrolls.
constexpr int64_t kMaxUnrolledReduction = 16;

/// A long reduction a region reads (a cumsum of a padding mask, positions)
/// as the element of the tensor the program stores it in: computed before
/// the kernel, read as a capture. Null unless `n` is one.
ENode *precomputed(ElementGraph &graph, ENode *n) {
  if (n->kind != Kind::Reduce || graph.extent(n->var) <= kMaxUnrolledReduction)
    return nullptr;
  return graph.stored(n);
}

/// Whether a factor of the product that contraction `n` sums reads along the
/// keys and along the queries (the variables of the logits that V does not
/// read): a pair bias, never Q.K.
bool Raiser::readsKeysAndQueries(const Branch &br, ENode *n) {
  // Variables the logits reduce over (projections, norms) are not indices.
  llvm::DenseSet<unsigned> bound;
  llvm::DenseSet<ENode *> seen;
  SmallVector<ENode *> walk = {br.logits};
  while (!walk.empty()) {
    ENode *e = walk.pop_back_val();
    if (!seen.insert(e).second)
      continue;
    if (e->kind == Kind::Reduce)
      bound.insert(e->var);
    walk.append(e->operands.begin(), e->operands.end());
  }
  SmallVector<unsigned> queries;
  for (unsigned v = 0; v < graph.numVars(); ++v)
    if (v != br.j && !bound.count(v) && graph.dependsOn(br.logits, v) &&
        !graph.dependsOn(br.v, v))
      queries.push_back(v);
  SmallVector<ENode *> work = {n->operands[0]};
  while (!work.empty()) {
    ENode *f = peel(work.pop_back_val());
    if (isOp(f, "arith.mulf")) {
      work.append(f->operands.begin(), f->operands.end());
      continue;
    }
    if (graph.dependsOn(f, br.j) && llvm::any_of(queries, [&](unsigned v) {
          return graph.dependsOn(f, v);
        }))
      return true;
  }
  return false;
}

/// The contraction `sum_c Q * K` inside S; constant factors go to scale.
/// Squared distances along the keys beside it go to `br.distances`.
LogicalResult Raiser::matchContraction(Branch &br, Reason &why) {
  llvm::DenseSet<ENode *> seen;
  SmallVector<ENode *> stack = {br.logits};
  SmallVector<ENode *> found;
  while (!stack.empty()) {
    ENode *n = stack.pop_back_val();
    if (!seen.insert(n).second)
      continue;
    if (isReduce(n, "arith.addf") && graph.dependsOn(n, br.j)) {
      if (std::optional<Distance> d = matchDistance(graph, n, br.j))
        br.distances.push_back(*d);
      else
        found.push_back(n);
      continue;
    }
    stack.append(n->operands.begin(), n->operands.end());
  }
  // Beside Q.K, the logits may hold other contractions along the keys that
  // the program stores: AlphaFold's pair bias, a projection of the pair
  // representation [q, k, c] over c. Such a term is read from its tensor,
  // computed before the kernel. Q.K is the one whose key factor does not
  // read along the queries.
  if (found.size() > 1) {
    SmallVector<ENode *> qkShaped;
    for (ENode *n : found) {
      if (!readsKeysAndQueries(br, n))
        qkShaped.push_back(n);
      else if (!precomputed(graph, n))
        return fail(why, "the logits hold a contraction along the keys and "
                         "the queries that the program does not store");
    }
    found = qkShaped;
  }
  // Several Q.K-shaped contractions (MLA's `q_nope.k_nope + q_pe.k_pe`):
  // the widest is Q.K, the others fold into extra columns of Q and K.
  if (found.size() > 1) {
    llvm::stable_sort(found, [&](ENode *x, ENode *y) {
      return graph.extent(x->var) > graph.extent(y->var);
    });
    SmallVector<Distance> products;
    for (ENode *n : llvm::drop_begin(found))
      if (std::optional<Distance> d = matchProduct(graph, n, br.j))
        products.push_back(*d);
    if (products.size() + 1 == found.size()) {
      br.distances.append(products);
      found.resize(1);
    }
  }
  if (found.size() != 1)
    return fail(why, "the logits hold " + Twine(found.size()) +
                         " contractions along the keys (expected 1)");
  ENode *qk = found.front();
  if (!isConst(qk->operands[1], 0.0))
    return fail(why, "the Q.K contraction does not start from zero");
  // Flatten the product: leaves and constant factors.
  SmallVector<ENode *> leaves;
  double scale = 1.0;
  SmallVector<ENode *> work = {qk->operands[0]};
  while (!work.empty()) {
    ENode *raw = work.pop_back_val();
    ENode *f = peel(raw);
    std::optional<double> divisor;
    if (isOp(f, "arith.divf"))
      divisor = constValue(f->operands[1]);
    // A product of several tensors that the program stores (a norm's
    // q * rsqrt(mean q^2) * w) is one factor, read from where it is stored;
    // a tensor times constants is flattened into the scale.
    bool storedProduct =
        isOp(f, "arith.mulf") &&
        llvm::count_if(f->operands, [](ENode *o) { return !constValue(o); }) >
            1 &&
        storedElement(raw);
    if (isOp(f, "arith.mulf") && !storedProduct) {
      work.append(f->operands.begin(), f->operands.end());
    } else if (divisor && *divisor != 0.0) { // q / sqrt(d)
      scale /= *divisor;
      work.push_back(f->operands[0]);
    } else if (std::optional<double> c = constValue(f)) {
      scale *= *c;
    } else if (f->kind == Kind::Leaf) {
      leaves.push_back(f);
    } else if (ENode *held = storedElement(raw)) {
      // Q or K computed by the program (projections, RoPE, norms): the
      // kernel reads the tensor they are stored in.
      leaves.push_back(held);
    } else {
      return fail(why, "the Q.K contraction multiplies something that is "
                       "not a tensor element or a constant");
    }
  }
  if (leaves.size() != 2)
    return fail(why, "the Q.K contraction has " + Twine(leaves.size()) +
                         " tensor factors (expected 2)");
  if (graph.dependsOn(leaves[0], br.j))
    std::swap(leaves[0], leaves[1]);
  if (graph.dependsOn(leaves[0], br.j) || !graph.dependsOn(leaves[1], br.j))
    return fail(why, "exactly one factor of the Q.K contraction must read "
                     "along the keys");
  br.qk = qk;
  br.c = qk->var;
  br.q = leaves[0];
  br.k = leaves[1];
  br.scale = scale;
  return success();
}

/// A softmax branch whose output the epilogue only reads times exp of the
/// branch's log-sum-exp, `O * exp(log(sum_j exp(S - m)) + m)`: that product
/// is `sum_j exp(S) V`, the branch unnormalized (`exponentiate`), so the
/// log-sum-exp, which would need the logits outside the kernel, goes.
void Raiser::matchUnnormalized(ENode *out, Branch &br) {
  if (br.normalizer != Normalizer::softmax || br.sink)
    return;
  // The kernel rounds the weights exp(S) to V's type for P.V: f16 would
  // overflow past S = 11 where the program's f32 does not.
  if (cast<RankedTensorType>(br.v->tensor.getType()).getElementType().isF16())
    return;
  SmallVector<ENode *> products;
  bool otherUse = false;
  llvm::DenseSet<ENode *> seen;
  SmallVector<ENode *> work = {out};
  while (!work.empty()) {
    ENode *n = work.pop_back_val();
    if (!seen.insert(n).second)
      continue;
    if (n == br.output) {
      otherUse = true; // read other than through such a product
      continue;
    }
    if (isOp(n, "arith.mulf"))
      for (int side : {0, 1}) {
        ENode *e = peel(n->operands[1 - side]);
        if (peel(n->operands[side]) == br.output && isOp(e, "math.exp") &&
            isLse(e->operands[0], br)) {
          products.push_back(n);
          break;
        }
      }
    if (!products.empty() && products.back() == n)
      continue;
    work.append(n->operands.begin(), n->operands.end());
  }
  if (products.size() != 1 || otherUse)
    return;
  br.output = products.front();
  br.normalizer = Normalizer::none;
  br.exponentiate = true;
  br.finiteFill = false; // exp of the fill is 0: no uniform average
}

/// Moves `select(keep, x, -inf)` / `x + select(keep, 0, -inf)` at the top
/// of S into mask conjuncts.
void Raiser::splitMask(Branch &br) {
  ENode *s = br.logits;
  while (true) {
    ENode *p = peel(s);
    auto fill = [&](ENode *c) {
      br.finiteFill |= std::isfinite(*constValue(c));
    };
    if (isOp(p, "arith.select") && !graph.contains(p->operands[0], br.qk)) {
      if (isMaskingConst(p->operands[2])) {
        fill(p->operands[2]);
        br.keep.push_back(p->operands[0]);
        s = p->operands[1];
        continue;
      }
      if (isMaskingConst(p->operands[1])) {
        fill(p->operands[1]);
        br.drop.push_back(p->operands[0]);
        s = p->operands[2];
        continue;
      }
    }
    if (isOp(p, "arith.addf")) {
      // `s + select(keep, 0, c)` or `s + select(drop, c, 0)`: an additive
      // mask (HF's `where(mask, 0, finfo.min)`).
      bool done = false;
      for (int side : {0, 1}) {
        ENode *m = peel(p->operands[side]);
        if (!isOp(m, "arith.select") || graph.contains(m, br.qk))
          continue;
        if (isConst(m->operands[1], 0.0) && isMaskingConst(m->operands[2])) {
          fill(m->operands[2]);
          br.keep.push_back(m->operands[0]);
        } else if (isConst(m->operands[2], 0.0) &&
                   isMaskingConst(m->operands[1])) {
          fill(m->operands[1]);
          br.drop.push_back(m->operands[0]);
        } else {
          continue;
        }
        s = p->operands[1 - side];
        done = true;
        break;
      }
      if (done)
        continue;
    }
    break;
  }
  br.score = s;
}

//===----------------------------------------------------------------------===//
// Building attn.attention
//===----------------------------------------------------------------------===//

/// Index roles, as graph variables (or -1 when the dim has extent 1).
struct Roles {
  int b = -1, h = -1, i = -1, d = -1;
  int64_t B = 1, Hq = 1, Hkv = 1, M = 1, Dv = 1;
};

SmallVector<unsigned> varsOf(ArrayRef<AffineExpr> exprs, unsigned numVars) {
  SmallVector<unsigned> vars;
  for (AffineExpr e : exprs)
    for (unsigned v = 0; v < numVars; ++v)
      if (e.isFunctionOfDim(v) && !llvm::is_contained(vars, v))
        vars.push_back(v);
  return vars;
}

/// Emits scalar IR for element expressions inside a region.
class Emitter {
public:
  Emitter(OpBuilder &b, Location loc, ElementGraph &graph)
      : b(b), loc(loc), graph(graph) {}

  /// Value of graph variable `v` (a region argument).
  DenseMap<unsigned, Value> vars;
  /// Region arguments standing for nodes (logits, branch outputs).
  DenseMap<ENode *, Value> placeholders;
  /// Captured tensor -> region argument.
  DenseMap<Value, Value> captures;
  std::string error;

  Value affine(AffineExpr e) {
    if (auto c = dyn_cast<AffineConstantExpr>(e))
      return arith::ConstantIndexOp::create(b, loc, c.getValue());
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      Value v = vars.lookup(d.getPosition());
      if (!v)
        error = "an index outside the attention's (b, h, q, kv) is used";
      return v;
    }
    auto bin = cast<AffineBinaryOpExpr>(e);
    Value l = affine(bin.getLHS()), r = affine(bin.getRHS());
    if (!l || !r)
      return {};
    switch (bin.getKind()) {
    case AffineExprKind::Add:
      return arith::AddIOp::create(b, loc, l, r);
    case AffineExprKind::Mul:
      return arith::MulIOp::create(b, loc, l, r);
    case AffineExprKind::FloorDiv:
      return arith::FloorDivSIOp::create(b, loc, l, r);
    case AffineExprKind::CeilDiv:
      return arith::CeilDivSIOp::create(b, loc, l, r);
    default:
      return arith::RemSIOp::create(b, loc, l, r);
    }
  }

  Value emit(ENode *n) {
    if (Value p = placeholders.lookup(n))
      return p;
    if (Value known = done.lookup(n))
      return known;
    Value result;
    switch (n->kind) {
    case Kind::Const:
      if (auto f = dyn_cast<FloatAttr>(n->value); f && promotes(n->type))
        result = arith::ConstantOp::create(
            b, loc, b.getF32FloatAttr(f.getValueAsDouble()));
      else
        result = arith::ConstantOp::create(b, loc, cast<TypedAttr>(n->value));
      break;
    case Kind::Index:
      result = affine(n->index);
      break;
    case Kind::Leaf: {
      if (std::optional<unsigned> dim = iotaDim(n->tensor)) {
        Value i = affine(n->indices[*dim]);
        if (i)
          result = arith::IndexCastOp::create(b, loc, n->type, i);
        break;
      }
      SmallVector<Value> idx;
      for (AffineExpr e : n->indices)
        idx.push_back(affine(e));
      result = read(n, idx);
      break;
    }
    case Kind::Extract: {
      SmallVector<Value> idx;
      for (ENode *o : n->operands)
        idx.push_back(emit(o));
      result = read(n, idx);
      break;
    }
    case Kind::Op: {
      SmallVector<Value> operands;
      for (ENode *node : n->operands) {
        operands.push_back(emit(node));
        if (!operands.back())
          return {};
      }
      if (promote && isa<arith::ExtFOp, arith::TruncFOp>(n->op)) {
        // Promoted: a float cast only moves to f32, never rounds.
        Type to = promotes(n->type) ? b.getF32Type() : n->type;
        result = castFloat(operands[0], to);
        break;
      }
      // The op itself, on operands that may have been promoted to f32.
      OperationState state(loc, n->op->getName());
      state.addOperands(operands);
      state.addAttributes(n->op->getAttrs());
      for (Type t : n->op->getResultTypes())
        state.addTypes(promotes(t) ? b.getF32Type() : t);
      result = b.create(state)->getResult(0);
      break;
    }
    case Kind::Reduce: {
      if (ENode *held = precomputed(graph, n)) {
        result = emit(held);
        break;
      }
      // A short one unrolled (TOSA linearizes a gather's 2-D index as a sum
      // over 2 terms); a long one stays out of the per-element code.
      int64_t extent = graph.extent(n->var);
      if (extent > kMaxUnrolledReduction) {
        error = "a region would need a reduction over " +
                std::to_string(extent) + " elements (at most " +
                std::to_string(kMaxUnrolledReduction) + " are unrolled)";
        return {};
      }
      result = emit(n->operands[1]);
      for (int64_t k = 0; k < extent && result; ++k) {
        // Each term afresh: cached values may depend on the variable.
        Emitter term(b, loc, graph);
        term.vars = vars;
        term.vars[n->var] = arith::ConstantIndexOp::create(b, loc, k);
        term.placeholders = placeholders;
        term.captures = captures;
        term.promote = promote;
        term.readsOuter = readsOuter;
        Value x = term.emit(n->operands[0]);
        if (!x) {
          error = term.error;
          return {};
        }
        OperationState state(loc, n->op->getName());
        state.addOperands({result, x});
        state.addAttributes(n->op->getAttrs());
        state.addTypes(result.getType());
        result = b.create(state)->getResult(0);
      }
      break;
    }
    case Kind::Concat: {
      // Read at an index the unrolled reductions made constant: one piece.
      SmallVector<AffineExpr> dims;
      for (unsigned v = 0; v < graph.numVars(); ++v) {
        Value bound = vars.lookup(v);
        auto c = bound ? bound.getDefiningOp<arith::ConstantIndexOp>()
                       : arith::ConstantIndexOp();
        dims.push_back(c ? getAffineConstantExpr(c.value(), b.getContext())
                         : getAffineDimExpr(v, b.getContext()));
      }
      auto at = dyn_cast<AffineConstantExpr>(n->index.replaceDims(dims));
      if (!at) {
        error = "a region would read a concatenation";
        return {};
      }
      for (unsigned p = 0; p + 1 < n->offsets.size(); ++p)
        if (at.getValue() >= n->offsets[p] && at.getValue() < n->offsets[p + 1])
          result = emit(n->operands[p]);
      if (!result && error.empty())
        error = "a region reads a concatenation past its end";
      break;
    }
    }
    if (result)
      done[n] = result;
    return result;
  }

  /// Compute f16/bf16 region arithmetic in f32: the program's roundings of
  /// intermediate logits are artifacts of its dtype, not its intent (the
  /// fused kernel keeps scores in f32, as FlashAttention does).
  bool promote = true;
  /// Inside a linalg.generic of the function: tensors are read directly.
  bool readsOuter = false;

  bool promotes(Type t) const {
    return promote && isa<FloatType>(t) && t.getIntOrFloatBitWidth() < 32;
  }

  Value castFloat(Value v, Type to) {
    Type from = v.getType();
    if (from == to || !isa<FloatType>(from) || !isa<FloatType>(to))
      return v;
    if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(b, loc, to, v);
    return arith::TruncFOp::create(b, loc, to, v);
  }

  /// Element `idx` of the capture `n` reads (in f32 when promoting).
  Value read(ENode *n, ArrayRef<Value> idx) {
    if (llvm::is_contained(idx, Value()))
      return {};
    Value tensor = captures.lookup(n->tensor);
    if (!tensor && readsOuter)
      tensor = n->tensor;
    Value v = tensor::ExtractOp::create(b, loc, tensor, idx);
    return promotes(n->type) ? castFloat(v, b.getF32Type()) : v;
  }

  /// The dim along which constant `tensor` equals an iota, if it does.
  static std::optional<unsigned> iotaDim(Value tensor) {
    auto c = tensor.getDefiningOp<arith::ConstantOp>();
    auto dense = c ? dyn_cast<DenseIntElementsAttr>(c.getValue())
                   : DenseIntElementsAttr();
    if (!dense)
      return std::nullopt;
    auto type = cast<ShapedType>(dense.getType());
    SmallVector<APInt> values(dense.getValues<APInt>());
    for (unsigned dim = 0; dim < type.getRank(); ++dim) {
      int64_t inner = 1;
      for (unsigned k = dim + 1; k < type.getRank(); ++k)
        inner *= type.getDimSize(k);
      bool match = true;
      for (int64_t f = 0; f < (int64_t)values.size() && match; ++f)
        match = values[f].getSExtValue() == (f / inner) % type.getDimSize(dim);
      if (match)
        return dim;
    }
    return std::nullopt;
  }

private:
  OpBuilder &b;
  Location loc;
  ElementGraph &graph;
  DenseMap<ENode *, Value> done;
};

/// `from` as `+-prod(mul) / prod(div) * target + rest`: only sums,
/// differences, negations, and products and quotients by factors without
/// `target`, lie between them.
struct Linear {
  bool negative = false;
  SmallVector<ENode *> mul, div;
};

bool linearIn(ElementGraph &graph, ENode *from, ENode *target, Linear &lin) {
  ENode *n = from;
  while (n != target) {
    if (isCast(n) || isOp(n, "arith.negf")) {
      lin.negative ^= isOp(n, "arith.negf");
      n = n->operands[0];
      continue;
    }
    if (n->kind != Kind::Op || n->operands.size() != 2)
      return false;
    bool left = graph.contains(n->operands[0], target);
    if (left == graph.contains(n->operands[1], target))
      return false;
    ENode *inner = n->operands[left ? 0 : 1], *other = n->operands[left];
    if (isOp(n, "arith.subf"))
      lin.negative ^= !left;
    else if (isOp(n, "arith.mulf"))
      lin.mul.push_back(other);
    else if (isOp(n, "arith.divf") && left)
      lin.div.push_back(other);
    else if (!isOp(n, "arith.addf"))
      return false;
    n = inner;
  }
  return true;
}

/// The node of `n` where its paths to `a` and to `b` part.
ENode *fork(ElementGraph &graph, ENode *n, ENode *a, ENode *b) {
  while (true) {
    ENode *next = nullptr;
    unsigned holding = 0;
    for (ENode *o : n->operands) {
      bool hasA = graph.contains(o, a), hasB = graph.contains(o, b);
      holding += hasA || hasB;
      if (hasA && hasB)
        next = o;
    }
    if (holding != 1 || !next)
      return n;
    n = next;
  }
}

/// The most points a folded squared distance sums over.
constexpr int64_t kMaxDistancePoints = 64;

/// Folds a branch's squared distances into its contraction, as
/// `sum (A - B)^2 = sum A^2 + sum B^2 - 2 sum A.B` (IPA's point term): the
/// cross term becomes extra columns of Q and K (Q's scaled so that
/// `scale * Q'.K'` carries the logit's multiple of it), the squares a row
/// and a column tensor the score region adds in place of the distance (the
/// row one only where the normalizer sees it).
class DistanceFolder {
public:
  DistanceFolder(ElementGraph &graph, Branch &br, const Roles &roles,
                 int64_t group, bool promote, OpBuilder &b, Location loc)
      : graph(graph), br(br), roles(roles), group(group), promote(promote),
        b(b), loc(loc) {}

  /// Checks that each distance is added to the Q.K contraction with a
  /// coefficient constant along the keys (recording it and the distance's
  /// points), within the points folded, and, with GQA, with a key side
  /// that does not vary within a group of query heads.
  LogicalResult analyze(std::string &why) {
    // Each distance's coefficient next to Q.K's: the logits are
    // G(kappa * qk + alpha * distance + rest); Q's extra columns are A times
    // -2 alpha / (kappa * scale).
    for (Distance &d : br.distances) {
      if (!graph.contains(br.score, d.node))
        return why = "a squared distance along the keys is in the mask",
               failure();
      ENode *at = fork(graph, br.score, br.qk, d.node);
      Linear ofQK, ofDistance;
      if (!linearIn(graph, at, br.qk, ofQK) ||
          !linearIn(graph, at, d.node, ofDistance))
        return why = "a squared distance along the keys is not added to the "
                     "Q.K contraction",
               failure();
      for (ENode *f : llvm::concat<ENode *>(ofQK.mul, ofQK.div, ofDistance.mul,
                                            ofDistance.div))
        if (graph.dependsOn(f, br.j) || graph.contains(f, br.qk) ||
            llvm::any_of(br.distances, [&](Distance &o) {
              return graph.contains(f, o.node);
            }))
          return why = "a squared distance's coefficient varies along the keys",
                 failure();
      coefs.emplace_back(ofQK, ofDistance);
      int64_t size = 1;
      for (unsigned v : d.vars)
        size *= graph.extent(v);
      // Its squares are unrolled over the points.
      if (!d.product && size > kMaxDistancePoints)
        return why = "a squared distance sums over " + std::to_string(size) +
                     " points (at most " + std::to_string(kMaxDistancePoints) +
                     " are folded)",
               failure();
      sizes.push_back(size);
    }
    // K's extra columns are built per KV head, at its group's first query
    // head: a key-side term must read the head as `h floordiv G` only.
    if (group > 1 && roles.h >= 0) {
      AffineExpr h = getAffineDimExpr(roles.h, b.getContext());
      AffineExpr within = graph.newVar(group);
      AffineExpr split = graph.newVar(roles.Hkv) * group + within;
      for (Distance &d : br.distances) {
        ENode *perHead = findNode(d.b, [&](ENode *n) {
          SmallVector<AffineExpr> exprs(n->indices);
          if (n->kind == Kind::Index)
            exprs.push_back(n->index);
          return llvm::any_of(exprs, [&](AffineExpr e) {
            return graph.simplify(e.replace(h, split))
                .isFunctionOfDim(cast<AffineDimExpr>(within).getPosition());
          });
        });
        if (perHead)
          return why = "a squared distance's key side varies within a group "
                       "of query heads that share a KV head",
                 failure();
      }
    }
    return success();
  }

  /// Q' (`keys`: K'): the view `main`, then each distance's A (B)
  /// flattened over its points, then zeros up to a multiple of 16 columns
  /// (tensor-core steps).
  Value widen(Value main, bool keys) {
    auto mainType = cast<RankedTensorType>(main.getType());
    SmallVector<int64_t> shape(mainType.getShape());
    int64_t dMain = shape[3], total = dMain;
    for (int64_t size : sizes)
      total += size;
    shape[3] = llvm::alignTo(total, 16);
    Type elt = mainType.getElementType();
    Value init = tensor::EmptyOp::create(b, loc, shape, elt);
    auto body = [&](OpBuilder &nb, Location l, ValueRange) {
      Emitter em(nb, l, graph);
      em.promote = promote;
      em.readsOuter = true;
      SmallVector<Value> ix = bindRoles(nb, l, em, keys);
      Value col = linalg::IndexOp::create(nb, l, 3);
      auto cmp = [&](arith::CmpIPredicate p, Value x, int64_t v) -> Value {
        return arith::CmpIOp::create(nb, l, p, x, index(nb, l, v));
      };
      Value v = tensor::ExtractOp::create(
          nb, l, main,
          {ix[0], ix[1], ix[2],
           arith::MinUIOp::create(nb, l, col, index(nb, l, dMain - 1))});
      Value zero =
          arith::ConstantOp::create(nb, l, elt, nb.getFloatAttr(elt, 0.0));
      v = arith::SelectOp::create(
          nb, l, cmp(arith::CmpIPredicate::ult, col, dMain), v, zero);
      int64_t offset = dMain;
      for (auto [d, size, coef] : llvm::zip(br.distances, sizes, coefs)) {
        // Point p of this distance: column offset + p, clamped inside.
        Value p = arith::SubIOp::create(
            nb, l, arith::MaxUIOp::create(nb, l, col, index(nb, l, offset)),
            index(nb, l, offset));
        p = arith::MinUIOp::create(nb, l, p, index(nb, l, size - 1));
        int64_t stride = size;
        for (unsigned var : d.vars) {
          stride /= graph.extent(var);
          em.vars[var] = arith::RemUIOp::create(
              nb, l, arith::DivUIOp::create(nb, l, p, index(nb, l, stride)),
              index(nb, l, graph.extent(var)));
        }
        Value x = toF32(nb, em, em.emit(keys ? d.b : d.a));
        if (!keys) {
          // A distance's cross term is -2 A.B, a product's A.B.
          auto [ofQK, ofDistance] = coef;
          double sign = ofQK.negative != ofDistance.negative ? -1.0 : 1.0;
          double cross = d.product ? 1.0 : -2.0;
          Value c = arith::ConstantOp::create(
              nb, l, nb.getF32FloatAttr(cross * sign / br.scale));
          c = product(nb, l, em, ofDistance.mul, c, false);
          c = product(nb, l, em, ofDistance.div, c, true);
          c = product(nb, l, em, ofQK.mul, c, true);
          c = product(nb, l, em, ofQK.div, c, false);
          x = c && x ? Value(arith::MulFOp::create(nb, l, x, c)) : Value();
        }
        if (!x) {
          if (error.empty())
            error = em.error.empty() ? "its term cannot be emitted" : em.error;
          break;
        }
        Value in = arith::AndIOp::create(
            nb, l, cmp(arith::CmpIPredicate::uge, col, offset),
            cmp(arith::CmpIPredicate::ult, col, offset + size));
        v = arith::SelectOp::create(nb, l, in, em.castFloat(x, elt), v);
        offset += size;
      }
      if (!em.error.empty() && error.empty())
        error = em.error;
      linalg::YieldOp::create(nb, l, v);
    };
    unsigned rank = shape.size();
    return linalg::GenericOp::create(
               b, loc, TypeRange{RankedTensorType::get(shape, elt)},
               ValueRange{}, ValueRange{init}, {b.getMultiDimIdentityMap(rank)},
               SmallVector<utils::IteratorType>(rank,
                                                utils::IteratorType::parallel),
               body)
        .getResult(0);
  }

  /// sum A^2 per query row (`keys`: sum B^2 per key) of distance `d` over
  /// its `size` points, in f32, the sum unrolled over the points (a
  /// generic's loops must all index some operand).
  Value squares(Distance &d, int64_t size, bool keys) {
    SmallVector<int64_t> shape = {roles.B, keys ? roles.Hkv : roles.Hq,
                                  keys ? graph.extent(br.j) : roles.M};
    Value init = tensor::EmptyOp::create(b, loc, shape, b.getF32Type());
    auto body = [&](OpBuilder &nb, Location l, ValueRange) {
      Value sum = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0.0));
      for (int64_t p = 0; p < size && sum; ++p) {
        Emitter em(nb, l, graph);
        em.promote = promote;
        em.readsOuter = true;
        bindRoles(nb, l, em, keys);
        int64_t stride = size;
        for (unsigned var : d.vars) {
          stride /= graph.extent(var);
          em.vars[var] = index(nb, l, p / stride % graph.extent(var));
        }
        Value x = toF32(nb, em, em.emit(keys ? d.b : d.a));
        sum = x ? Value(arith::AddFOp::create(
                      nb, l, sum, arith::MulFOp::create(nb, l, x, x)))
                : Value();
        if (!em.error.empty() && error.empty())
          error = em.error;
      }
      if (!sum) {
        if (error.empty())
          error = "its squares cannot be emitted";
        sum = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(0.0));
      }
      linalg::YieldOp::create(nb, l, sum);
    };
    return linalg::GenericOp::create(b, loc, TypeRange{init.getType()},
                                     ValueRange{}, ValueRange{init},
                                     {b.getMultiDimIdentityMap(3)},
                                     SmallVector<utils::IteratorType>(
                                         3, utils::IteratorType::parallel),
                                     body)
        .getResult(0);
  }

  /// Each distance's points.
  SmallVector<int64_t> sizes;
  /// Why a term could not be emitted (empty: it could).
  std::string error;

private:
  Value index(OpBuilder &nb, Location l, int64_t v) {
    return arith::ConstantIndexOp::create(nb, l, v);
  }
  /// Binds the role variables to a generic's first three loops.
  SmallVector<Value> bindRoles(OpBuilder &nb, Location l, Emitter &em,
                               bool keys) {
    SmallVector<Value> ix;
    for (unsigned dim = 0; dim < 3; ++dim)
      ix.push_back(linalg::IndexOp::create(nb, l, dim));
    if (roles.b >= 0)
      em.vars[roles.b] = ix[0];
    if (roles.h >= 0)
      em.vars[roles.h] =
          keys ? Value(arith::MulIOp::create(nb, l, ix[1], index(nb, l, group)))
               : ix[1];
    int row = keys ? int(br.j) : roles.i;
    if (row >= 0)
      em.vars[row] = ix[2];
    return ix;
  }
  Value toF32(OpBuilder &nb, Emitter &em, Value v) {
    return v ? em.castFloat(v, nb.getF32Type()) : v;
  }
  /// `x` times (`divide`: over) each of `factors`; null if one cannot be
  /// emitted.
  Value product(OpBuilder &nb, Location l, Emitter &em,
                ArrayRef<ENode *> factors, Value x, bool divide) {
    for (ENode *f : factors) {
      Value fv = toF32(nb, em, em.emit(f));
      if (!fv || !x)
        return Value();
      x = divide ? Value(arith::DivFOp::create(nb, l, x, fv))
                 : Value(arith::MulFOp::create(nb, l, x, fv));
    }
    return x;
  }

  ElementGraph &graph;
  Branch &br;
  const Roles &roles;
  int64_t group;
  bool promote;
  OpBuilder &b;
  Location loc;
  /// Each distance's coefficient next to Q.K's, and its own.
  SmallVector<std::pair<Linear, Linear>, 2> coefs;
};

/// Folds the branch's squared distances into its contraction
/// (DistanceFolder). `q` and `k` are the [B, H, rows, D] views; on
/// success, the widened ones.
LogicalResult foldDistances(ElementGraph &graph, Branch &br, const Roles &roles,
                            int64_t group, bool promote, OpBuilder &b,
                            Location loc, Value &q, Value &k,
                            std::string &why) {
  DistanceFolder folder(graph, br, roles, group, promote, b, loc);
  if (failed(folder.analyze(why)))
    return failure();
  q = folder.widen(q, false);
  k = folder.widen(k, true);
  // A softmax without a sink does not see a term constant along its row.
  bool rowsCancel = br.normalizer == Normalizer::softmax && !br.sink;
  for (auto [d, size] : llvm::zip(br.distances, folder.sizes)) {
    if (d.product)
      continue;
    if (!rowsCancel)
      d.rows = folder.squares(d, size, false);
    d.cols = folder.squares(d, size, true);
  }
  if (!folder.error.empty())
    return why = "a squared distance cannot be folded: " + folder.error,
           failure();
  return success();
}

/// Collects the tensors that `n` reads as captures (not Q/K/V themselves).
void collectCaptures(ElementGraph &graph, ENode *n,
                     llvm::SetVector<Value> &captures,
                     llvm::DenseSet<ENode *> &seen,
                     const llvm::DenseSet<ENode *> &stop) {
  if (stop.count(n) || !seen.insert(n).second)
    return;
  if (ENode *held = precomputed(graph, n)) {
    captures.insert(held->tensor);
    return;
  }
  if ((n->kind == Kind::Leaf && !Emitter::iotaDim(n->tensor)) ||
      n->kind == Kind::Extract)
    captures.insert(n->tensor);
  for (ENode *o : n->operands)
    collectCaptures(graph, o, captures, seen, stop);
}

/// Whether no row of `op` can be fully masked, from its mask region in
/// canonical form (as built, `iota(i) >= iota(j)` is index arithmetic the
/// analysis does not read yet).
bool rowsNeverEmpty(AttentionOp op) {
  if (op.getMask().empty())
    return true;
  MLIRContext *ctx = op.getContext();
  RewritePatternSet patterns(ctx);
  for (Dialect *dialect : ctx->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName name : ctx->getRegisteredOperations())
    if (name.getDialectNamespace() != "attn")
      name.getCanonicalizationPatterns(patterns, ctx);
  (void)applyPatternsGreedily(op.getMask(), std::move(patterns));
  return MaskScoreAnalysis(op).rowsNeverEmpty();
}

/// Whether `n` is `log(sum_j exp(S - c)) + c` (a sum of a row-constant c,
/// `abs` around the sum allowed) of branch `br`'s logits S: its
/// log-sum-exp.
bool Raiser::isLse(ENode *n, const Branch &br) {
  n = peel(n);
  if (!isOp(n, "arith.addf"))
    return false;
  for (int side : {0, 1}) {
    ENode *log = peel(n->operands[side]);
    ENode *shift = peel(n->operands[1 - side]);
    if (!isOp(log, "math.log"))
      continue;
    ENode *sum = peel(log->operands[0]);
    if (isOp(sum, "math.absf"))
      sum = peel(sum->operands[0]);
    if (!isReduce(sum, "arith.addf") || !isConst(sum->operands[1], 0.0))
      continue;
    ENode *exp = peel(sum->operands[0]);
    if (!isOp(exp, "math.exp"))
      continue;
    ENode *x = peel(exp->operands[0]);
    if (!isOp(x, "arith.subf") || graph.dependsOn(x->operands[1], sum->var) ||
        peel(x->operands[1]) != shift)
      continue;
    if (graph.equivalent(peel(x->operands[0]), peel(br.logits), sum->var, br.j))
      return true;
  }
  return false;
}

/// The roles (batch, head, query variables; -1 for a unit dim) of
/// `sibling`'s dims when it is the log-sum-exp of `br`'s logits. `roles`
/// holds the batch, head and query variables (-1 where absent).
std::optional<SmallVector<int>>
Raiser::matchLse(Value sibling, const Branch &br, ArrayRef<int> roles) {
  auto type = dyn_cast<RankedTensorType>(sibling.getType());
  if (!type || !type.hasStaticShape() ||
      !isa<FloatType>(type.getElementType()) || type.getRank() > 6)
    return std::nullopt;
  MLIRContext *ctx = func.getContext();
  SmallVector<int> assign(type.getRank(), -1);
  std::optional<SmallVector<int>> found;
  // Each dim is one role of the same size, or a unit dim; every role of
  // more than one element appears once.
  std::function<void(int64_t, unsigned)> visit = [&](int64_t d, unsigned used) {
    if (found)
      return;
    if (d == type.getRank()) {
      for (auto [k, v] : llvm::enumerate(roles))
        if (v >= 0 && !(used & (1u << k)) && graph.extent(v) != 1)
          return;
      SmallVector<AffineExpr> idx;
      for (int v : assign)
        idx.push_back(v >= 0 ? getAffineDimExpr(v, ctx)
                             : getAffineConstantExpr(0, ctx));
      if (ENode *n = graph.element(sibling, idx); n && isLse(n, br))
        found = assign;
      return;
    }
    int64_t size = type.getDimSize(d);
    for (auto [k, v] : llvm::enumerate(roles))
      if (v >= 0 && !(used & (1u << k)) && graph.extent(v) == size) {
        assign[d] = v;
        visit(d + 1, used | (1u << k));
      }
    if (size == 1) {
      assign[d] = -1;
      visit(d + 1, used);
    }
  };
  visit(0, 0);
  return found;
}

FailureOr<Value> Raiser::raise(Value root, Reason &why) {
  auto rootType = dyn_cast<RankedTensorType>(root.getType());
  if (!rootType || !rootType.hasStaticShape())
    return fail(why, "the value is not a statically shaped tensor");
  SmallVector<AffineExpr> outIdx;
  for (int64_t size : rootType.getShape())
    outIdx.push_back(graph.newVar(size));
  ENode *out = graph.element(root, outIdx);
  if (!out)
    return fail(why, "cannot follow the program: " + graph.error());

  SmallVector<Branch, 2> branches;
  if (failed(matchBranches(out, branches, why)))
    return failure();
  Branch &first = branches.front();
  Roles roles;
  SmallVector<int> outRole;
  if (failed(assignRoles(first, outIdx, roles, outRole, why)))
    return failure();

  why.stage = 4;
  // Views of Q, K, V as [B, H, rows, D]: substitute role dims. K and V are
  // read at `h floordiv G` for GQA; h -> hk * G recovers hk.
  MLIRContext *ctx = func.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointAfterValue(root);
  Location loc = root.getLoc();
  Type common;
  int64_t group = 1;
  Operands operands;
  if (failed(commonElementType(branches, common, why)) ||
      failed(headGroup(first, roles, group, why)) ||
      failed(
          buildOperands(b, loc, branches, roles, group, common, operands, why)))
    return failure();

  // Region contents and their captures.
  llvm::DenseSet<ENode *> stops;
  llvm::SetVector<Value> captures;
  for (Branch &br : branches) {
    stops.insert(br.qk), stops.insert(br.output);
    for (Distance &d : br.distances) {
      stops.insert(d.node);
      if (d.rows)
        captures.insert(d.rows);
      if (d.cols)
        captures.insert(d.cols);
    }
  }
  llvm::DenseSet<ENode *> seen;
  bool hasScore = false;
  for (Branch &br : branches) {
    hasScore |= br.score != br.qk || br.exponentiate;
    collectCaptures(graph, br.score, captures, seen, stops);
    for (ENode *m : llvm::concat<ENode *>(br.keep, br.drop))
      collectCaptures(graph, m, captures, seen, stops);
  }
  bool hasMask = !first.keep.empty() || !first.drop.empty();
  ENode *epilogue = peel(out);
  bool hasEpilogue = branches.size() > 1 || epilogue != first.output ||
                     !first.coefs.empty() || first.negative;
  if (hasEpilogue) {
    collectCaptures(graph, epilogue, captures, seen, stops);
    for (Branch &br : branches)
      for (ENode *c : br.coefs)
        collectCaptures(graph, c, captures, seen, stops);
  }

  SmallVector<double> scales;
  for (Branch &br : branches)
    scales.push_back(br.scale);
  auto outType = RankedTensorType::get({roles.B, roles.Hq, roles.M, roles.Dv},
                                       rootType.getElementType());
  // Results that are this attention's log-sum-exp (one softmax branch, no
  // sinks): the op computes them.
  SmallVector<std::pair<unsigned, SmallVector<int>>> lseSiblings;
  if (branches.size() == 1 && first.normalizer == Normalizer::softmax &&
      operands.sinks.empty())
    for (auto [k, sibling] : llvm::enumerate(siblings))
      if (std::optional<SmallVector<int>> roleOf =
              matchLse(sibling, first, {roles.b, roles.h, roles.i}))
        lseSiblings.push_back({unsigned(k), *roleOf});
  SmallVector<Type> lseTypes;
  if (!lseSiblings.empty())
    lseTypes.push_back(
        RankedTensorType::get({roles.B, roles.Hq, roles.M}, b.getF32Type()));
  auto op = AttentionOp::create(
      b, loc, outType, lseTypes, /*key_side=*/Type(), /*terms=*/TypeRange{},
      operands.queries, operands.keys, operands.value, operands.sinks,
      captures.getArrayRef(), b.getDenseF64ArrayAttr(scales),
      NormalizerAttr::get(ctx, first.normalizer),
      /*mean_empty_rows=*/UnitAttr(),
      /*value_columns=*/DenseI64ArrayAttr(),
      /*key_side_branch=*/IntegerAttr(), /*term_dims=*/ArrayAttr());

  if (failed(buildRegions(op, branches, roles, group, epilogue,
                          {hasScore, hasMask, hasEpilogue},
                          captures.getArrayRef(), why))) {
    op->erase();
    return failure();
  }
  return finishResult(op, branches, roles, outRole, rootType, lseSiblings, b,
                      why);
}

/// Stages 0-3: the branches of `out` (o_r = sum_j P_r V under the
/// epilogue), their weights and contractions, checked alike.
LogicalResult Raiser::matchBranches(ENode *out,
                                    SmallVectorImpl<Branch> &branches,
                                    Reason &why) {
  // out = epilogue(o_0, ..., o_R-1) with o_r = sum_j P_r V.
  if (failed(findBranches(out, branches, why)))
    return failure();
  why.stage = 1;
  for (Branch &br : branches)
    if (failed(matchWeights(br, why)))
      return failure();
  why.stage = 2;
  for (Branch &br : branches) {
    if (failed(matchContraction(br, why)))
      return failure();
    splitMask(br);
  }
  for (Branch &br : branches)
    matchUnnormalized(out, br);
  why.stage = 3;
  const Branch &first = branches.front();
  for (Branch &br : llvm::drop_begin(branches)) {
    if (br.normalizer != first.normalizer)
      return fail(why, "the branches use different normalizers");
    if (!graph.equivalent(br.v, first.v, br.j, first.j))
      return fail(why, "the branches multiply different values");
    auto same = [&](ArrayRef<ENode *> a, ArrayRef<ENode *> c) {
      if (a.size() != c.size())
        return false;
      for (auto [x, y] : llvm::zip(a, c))
        if (!graph.equivalent(x, y, br.j, first.j))
          return false;
      return true;
    };
    if (!same(br.keep, first.keep) || !same(br.drop, first.drop))
      return fail(why, "the branches use different masks (not supported yet)");
  }
  return success();
}

/// The roles of the index variables (batch, head, query row, value
/// column) and of each output dim (`outRole`: a role variable, or -1 for
/// a unit dim).
LogicalResult Raiser::assignRoles(const Branch &first,
                                  ArrayRef<AffineExpr> outIdx, Roles &roles,
                                  SmallVectorImpl<int> &outRole, Reason &why) {
  // Roles of the index variables.
  unsigned n = graph.numVars();
  SmallVector<unsigned> qVars = varsOf(first.q->indices, n);
  SmallVector<unsigned> kVars = varsOf(first.k->indices, n);
  SmallVector<unsigned> vVars = varsOf(first.v->indices, n);
  SmallVector<unsigned> batch, rows;
  for (unsigned v : qVars) {
    if (v == first.c)
      continue;
    if (llvm::is_contained(kVars, v))
      batch.push_back(v);
    else
      rows.push_back(v);
  }
  // One KV head for all query heads (MQA) reads K's head dim at 0: the Q
  // variable whose K counterpart (same position) is a constant is the head.
  if (rows.size() == 2 && first.q->indices.size() == first.k->indices.size())
    for (auto [qe, ke] : llvm::zip(first.q->indices, first.k->indices))
      if (auto d = dyn_cast<AffineDimExpr>(qe);
          d && isa<AffineConstantExpr>(ke) &&
          llvm::is_contained(rows, d.getPosition())) {
        batch.push_back(d.getPosition());
        llvm::erase(rows, d.getPosition());
        break;
      }
  if (rows.size() > 1)
    return fail(why, "Q has two query-like dims");
  if (!rows.empty())
    roles.i = rows.front();
  for (unsigned v : vVars)
    if (v != first.j && !llvm::is_contained(batch, v)) {
      if (roles.d >= 0)
        return fail(why, "V has two value-like dims");
      roles.d = v;
    }
  if (batch.size() > 2)
    return fail(why, "Q has " + Twine(batch.size()) +
                         " batch-like dims (at most batch and head)");
  if (batch.size() == 2)
    roles.b = batch[0], roles.h = batch[1];
  else if (batch.size() == 1)
    roles.h = batch[0];
  auto ext = [&](int v) { return v < 0 ? int64_t(1) : graph.extent(v); };
  roles.B = ext(roles.b);
  roles.Hq = ext(roles.h);
  roles.M = ext(roles.i);
  roles.Dv = ext(roles.d);
  // Every output dim is one role, or a unit dim.
  for (AffineExpr e : outIdx) {
    auto dim = dyn_cast<AffineDimExpr>(e);
    if (!dim) {
      outRole.push_back(-1);
      continue;
    }
    int v = dim.getPosition();
    if (v != roles.b && v != roles.h && v != roles.i && v != roles.d)
      return fail(why, "an output dim is neither batch, head, query nor "
                       "value dim");
    outRole.push_back(v);
  }
  return success();
}

/// The element type Q, K and V are read in: attn.attention takes one for
/// the three.
LogicalResult Raiser::commonElementType(ArrayRef<Branch> branches, Type &common,
                                        Reason &why) {
  // Q, K and V share one element type in attn.attention: a program that
  // mixes them (an f32 V beside bf16 Q and K) reads all three in the widest.
  common = Type();
  MLIRContext *ctx = func.getContext();
  for (const Branch &br : branches)
    for (ENode *leaf : {br.q, br.k, br.v}) {
      Type t = cast<RankedTensorType>(leaf->tensor.getType()).getElementType();
      if (!common || common == t)
        common = t;
      else if (!isa<FloatType>(common) || !isa<FloatType>(t))
        return fail(why, "Q, K and V are not all floats");
      else
        common = Float32Type::get(ctx);
    }
  return success();
}

/// `leaf`'s tensor as the kernel layout `shape` over the role variables
/// `roleVars` (K and V read at `h floordiv group`; `elt`: the element type
/// to read in): the tensor itself where it is that layout, else a copy;
/// null with the reason in `why` where it is not a layout of it.
Value Raiser::layoutView(OpBuilder &b, Location loc, ENode *leaf,
                         ArrayRef<int> roleVars, int64_t group,
                         ArrayRef<int64_t> shape, StringRef what, Reason &why,
                         Type elt) {
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> repl;
  for (unsigned v = 0; v < graph.numVars(); ++v)
    repl.push_back(getAffineSymbolExpr(v, ctx)); // unknown: a symbol
  for (auto [pos, v] : llvm::enumerate(roleVars))
    if (v >= 0)
      repl[v] = getAffineDimExpr(pos, ctx) * (pos == 1 ? group : 1);
  // Each index must become an affine function of the role dims: a role
  // dim, a constant, or merged dims (`b * N + j` of a projection's
  // [B * N, H * D] output). A symbol left over is a variable that is not
  // a role, and `hk * G` a head read directly where GQA expected
  // `h floordiv G`.
  SmallVector<AffineExpr> exprs;
  for (AffineExpr e : leaf->indices) {
    AffineExpr r = graph.simplify(e.replaceDimsAndSymbols(repl, {}));
    bool merged = !r.isSymbolicOrConstant() &&
                  !(group > 1 && roleVars.size() > 1 && roleVars[1] >= 0 &&
                    readsHeadDirectly(e, roleVars[1], group));
    // Only sums of role dims times constants: a floordiv or mod would
    // read one element of the tensor at several kernel positions (the
    // roles came out wrong, and the copy would be a broadcast).
    auto plainSum = [](AffineExpr x) {
      bool ok = true;
      x.walk([&](AffineExpr y) {
        ok &= !isa<AffineSymbolExpr>(y) &&
              (y.getKind() == AffineExprKind::Add ||
               y.getKind() == AffineExprKind::Mul ||
               isa<AffineDimExpr, AffineConstantExpr>(y));
      });
      return ok;
    };
    merged = merged && plainSum(r);
    if (!isa<AffineDimExpr, AffineConstantExpr>(r) && !merged) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << what << " is not a layout of [B, H, rows, D]: its index "
         << exprs.size() << " is " << e;
      why.text = text;
      return {};
    }
    exprs.push_back(r);
  }
  Type from = cast<RankedTensorType>(leaf->tensor.getType()).getElementType();
  auto type = RankedTensorType::get(shape, elt ? elt : from);
  unsigned rank = roleVars.size();
  AffineMap map = AffineMap::get(rank, 0, exprs, ctx);
  if (map.isIdentity() && type == leaf->tensor.getType())
    return leaf->tensor;
  // The map must read inside the tensor: an index's range over the
  // view's shape within the dim it indexes.
  auto leafType = cast<RankedTensorType>(leaf->tensor.getType());
  for (auto [pos, e] : llvm::enumerate(exprs)) {
    SmallVector<int64_t> ranges(shape.begin(), shape.end());
    int64_t lo = 0, hi = 0;
    bool affineSum = true;
    e.walk([&](AffineExpr x) {
      affineSum &= x.getKind() == AffineExprKind::Add ||
                   x.getKind() == AffineExprKind::Mul ||
                   isa<AffineDimExpr, AffineConstantExpr>(x);
    });
    if (affineSum) {
      // Max of a sum of nonnegative multiples of dims: each dim at its top.
      SmallVector<AffineExpr> top, bottom;
      for (int64_t r : ranges) {
        top.push_back(getAffineConstantExpr(r - 1, ctx));
        bottom.push_back(getAffineConstantExpr(0, ctx));
      }
      auto eval = [&](ArrayRef<AffineExpr> at) -> std::optional<int64_t> {
        if (auto c = dyn_cast<AffineConstantExpr>(
                simplifyAffineExpr(e.replaceDims(at), 0, 0)))
          return c.getValue();
        return std::nullopt;
      };
      std::optional<int64_t> a = eval(bottom), z = eval(top);
      if (a && z) {
        lo = std::min(*a, *z);
        hi = std::max(*a, *z);
        if (lo < 0 || hi >= leafType.getDimSize(pos)) {
          why.text = (what + " does not fit [B, H, rows, D]: its index " +
                      Twine(pos) + " leaves the tensor")
                         .str();
          return {};
        }
      }
    }
  }
  Value init = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  auto copy = linalg::GenericOp::create(
      b, loc, type, leaf->tensor, init, {map, b.getMultiDimIdentityMap(rank)},
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = args[0];
        if (x.getType() != type.getElementType())
          x = arith::ExtFOp::create(nb, l, type.getElementType(), x);
        linalg::YieldOp::create(nb, l, x);
      });
  // A dim read whole must be read at its full extent (linalg infers the
  // loop ranges from it): a part of it is not a layout.
  ScopedDiagnosticHandler silence(ctx, [](Diagnostic &) { return success(); });
  if (failed(mlir::verify(copy))) {
    copy->erase();
    init.getDefiningOp()->erase();
    why.text = (what + " reads part of a dim: not a layout of [B, H, rows, "
                       "D]")
                   .str();
    return {};
  }
  return copy.getResult(0);
}

/// The GQA group: query heads per KV head, from K's head index.
LogicalResult Raiser::headGroup(const Branch &first, Roles &roles,
                                int64_t &group, Reason &why) {
  // GQA group size from K's head index.
  group = 1;
  MLIRContext *ctx = func.getContext();
  // `h floordiv G` anywhere in K's indices (also inside a merged
  // `(h floordiv G) * D + c` of a projection's output).
  for (AffineExpr e : first.k->indices)
    e.walk([&](AffineExpr sub) {
      if (auto div = dyn_cast<AffineBinaryOpExpr>(sub);
          div && div.getKind() == AffineExprKind::FloorDiv &&
          div.getLHS() == getAffineDimExpr(roles.h, ctx))
        if (auto g = dyn_cast<AffineConstantExpr>(div.getRHS()))
          group = g.getValue();
    });
  if (roles.h >= 0 && !llvm::any_of(first.k->indices, [&](AffineExpr e) {
        return e.isFunctionOfDim(roles.h);
      }))
    group = roles.Hq; // one KV head for all (MQA)
  if (roles.Hq % group != 0)
    return fail(why, "the query heads are not a multiple of the KV heads");
  roles.Hkv = roles.Hq / group;
  return success();
}

/// The op's operands: each branch's Q and K, V and the sinks, as views
/// of the program's tensors in the kernel layouts.
LogicalResult Raiser::buildOperands(OpBuilder &b, Location loc,
                                    MutableArrayRef<Branch> branches,
                                    const Roles &roles, int64_t group,
                                    Type common, Operands &ops, Reason &why) {
  const Branch &first = branches.front();
  int64_t N = graph.extent(first.j), Dqk = graph.extent(first.c);
  for (Branch &br : branches) {
    Value q =
        layoutView(b, loc, br.q, {roles.b, roles.h, roles.i, (int)br.c}, 1,
                   {roles.B, roles.Hq, roles.M, Dqk}, "Q", why, common);
    Value k = layoutView(b, loc, br.k, {roles.b, roles.h, (int)br.j, (int)br.c},
                         group, {roles.B, roles.Hkv, N, Dqk}, "K", why, common);
    if (!q || !k)
      return failure();
    if (!br.distances.empty() &&
        failed(foldDistances(graph, br, roles, group, !keepRounding, b, loc, q,
                             k, why.text)))
      return failure();
    ops.queries.push_back(q);
    ops.keys.push_back(k);
  }
  ops.value =
      layoutView(b, loc, first.v, {roles.b, roles.h, (int)first.j, roles.d},
                 group, {roles.B, roles.Hkv, N, roles.Dv}, "V", why, common);
  if (!ops.value)
    return failure();

  // Sinks: one [Hq] logit tensor per branch, read at the head.
  for (Branch &br : branches) {
    if (!br.sink != !first.sink)
      return fail(why, "only some branches have a sink");
    if (!br.sink)
      continue;
    ENode *leaf = peel(br.sink);
    if (leaf->kind != Kind::Leaf)
      return fail(why, "the sink logit is not read from a tensor (a "
                       "constant sink is not supported yet)");
    Value sink =
        layoutView(b, loc, leaf, {roles.h}, 1, {roles.Hq}, "the sink", why);
    if (!sink)
      return failure();
    ops.sinks.push_back(sink);
  }
  return success();
}

/// The op's regions from the branches' nodes: the score (each branch's
/// logit), the mask and the epilogue, each where the program has one.
LogicalResult Raiser::buildRegions(AttentionOp op, ArrayRef<Branch> branches,
                                   const Roles &roles, int64_t group,
                                   ENode *epilogue, const RegionsWanted &want,
                                   ArrayRef<Value> captures, Reason &why) {
  Builder b(op.getContext()); // types of the regions' arguments
  Location loc = op.getLoc();
  const Branch &first = branches.front();
  bool hasScore = want.score, hasMask = want.mask, hasEpilogue = want.epilogue;
  // Builds one region: `leading` f32 args, four indices, the captures.
  auto buildRegion =
      [&](Region &region, unsigned leading,
          function_ref<SmallVector<Value>(Emitter &, Block *)> body)
      -> LogicalResult {
    Block *block = new Block();
    region.push_back(block);
    for (unsigned r = 0; r < leading; ++r)
      block->addArgument(b.getF32Type(), loc);
    for (int r = 0; r < 4; ++r)
      block->addArgument(b.getIndexType(), loc);
    OpBuilder rb = OpBuilder::atBlockEnd(block);
    Emitter emitter(rb, loc, graph);
    emitter.promote = !keepRounding;
    for (Value c : captures)
      emitter.captures[c] = block->addArgument(c.getType(), loc);
    SmallVector<Value> results = body(emitter, block);
    if (!emitter.error.empty() || llvm::is_contained(results, Value()))
      return fail(why, emitter.error.empty() ? "a region cannot be built"
                                             : emitter.error);
    YieldOp::create(rb, loc, results);
    return success();
  };
  auto toF32 = [&](OpBuilder &rb, Value v) -> Value {
    if (!v || v.getType().isF32())
      return v;
    if (!isa<FloatType>(v.getType()))
      return {};
    return v.getType().getIntOrFloatBitWidth() < 32
               ? Value(arith::ExtFOp::create(rb, loc, rb.getF32Type(), v))
               : Value(arith::TruncFOp::create(rb, loc, rb.getF32Type(), v));
  };
  auto indexArgs = [&](Emitter &em, Block *block, unsigned leading, int last) {
    int roleVars[4] = {roles.b, roles.h, roles.i, last};
    for (int r = 0; r < 4; ++r)
      if (roleVars[r] >= 0)
        em.vars[roleVars[r]] = block->getArgument(leading + r);
  };
  auto fromF32 = [&](OpBuilder &rb, Value s, Type type) -> Value {
    if (type.isF32() || (!keepRounding && type.getIntOrFloatBitWidth() < 32))
      return s;
    return type.getIntOrFloatBitWidth() < 32
               ? Value(arith::TruncFOp::create(rb, loc, type, s))
               : Value(arith::ExtFOp::create(rb, loc, type, s));
  };

  LogicalResult status = success();
  unsigned R = branches.size();
  if (hasScore)
    status = buildRegion(op.getScore(), R, [&](Emitter &em, Block *block) {
      SmallVector<Value> results;
      OpBuilder rb = OpBuilder::atBlockEnd(block);
      for (auto [r, br] : llvm::enumerate(branches)) {
        indexArgs(em, block, R, br.j);
        em.placeholders[br.qk] =
            fromF32(rb, block->getArgument(r), br.qk->type);
        // A folded distance: its row and column squares (its cross term is
        // in the logit); a folded product is all in the logit, so it adds
        // -0.0, the additive identity that canonicalization folds away.
        for (const Distance &d : br.distances) {
          if (d.product) {
            Type t = em.promotes(d.node->type) ? rb.getF32Type() : d.node->type;
            em.placeholders[d.node] =
                arith::ConstantOp::create(rb, loc, t, rb.getFloatAttr(t, -0.0));
            continue;
          }
          Value bArg = block->getArgument(R), hArg = block->getArgument(R + 1);
          Value hk = group == 1
                         ? hArg
                         : Value(arith::DivUIOp::create(
                               rb, loc, hArg,
                               arith::ConstantIndexOp::create(rb, loc, group)));
          Value sum = tensor::ExtractOp::create(
              rb, loc, em.captures[d.cols],
              ValueRange{bArg, hk, block->getArgument(R + 3)});
          if (d.rows)
            sum = arith::AddFOp::create(
                rb, loc,
                tensor::ExtractOp::create(
                    rb, loc, em.captures[d.rows],
                    ValueRange{bArg, hArg, block->getArgument(R + 2)}),
                sum);
          em.placeholders[d.node] =
              em.promotes(d.node->type) ? sum : fromF32(rb, sum, d.node->type);
        }
        // Where a cast chain ends at the contraction, use the f32 logit.
        Value logit = toF32(rb, em.emit(br.score));
        if (logit && br.exponentiate)
          logit = math::ExpOp::create(rb, loc, logit);
        results.push_back(logit);
      }
      return results;
    });
  if (succeeded(status) && hasMask)
    status = buildRegion(op.getMask(), 0, [&](Emitter &em, Block *block) {
      indexArgs(em, block, 0, first.j);
      OpBuilder rb = OpBuilder::atBlockEnd(block);
      Value keep = arith::ConstantIntOp::create(rb, loc, 1, 1);
      for (ENode *m : first.keep) {
        Value v = em.emit(m);
        if (!v)
          return SmallVector<Value>{Value()};
        keep = arith::AndIOp::create(rb, loc, keep, v);
      }
      for (ENode *m : first.drop) {
        Value v = em.emit(m);
        if (!v)
          return SmallVector<Value>{Value()};
        Value one = arith::ConstantIntOp::create(rb, loc, 1, 1);
        keep = arith::AndIOp::create(rb, loc, keep,
                                     arith::XOrIOp::create(rb, loc, v, one));
      }
      return SmallVector<Value>{keep};
    });
  if (succeeded(status) && hasEpilogue)
    status = buildRegion(op.getEpilogue(), R, [&](Emitter &em, Block *block) {
      indexArgs(em, block, R, roles.d);
      OpBuilder rb = OpBuilder::atBlockEnd(block);
      // Each output node is the signed, scaled sum of its branches.
      llvm::MapVector<ENode *, Value> sums;
      for (auto [r, br] : llvm::enumerate(branches)) {
        Value o = block->getArgument(r);
        for (ENode *c : br.coefs) {
          Value cv = toF32(rb, em.emit(c));
          if (!cv)
            return SmallVector<Value>{Value()};
          o = arith::MulFOp::create(rb, loc, o, cv);
        }
        if (br.negative)
          o = arith::NegFOp::create(rb, loc, o);
        Value &sum = sums[br.output];
        sum = sum ? Value(arith::AddFOp::create(rb, loc, sum, o)) : o;
      }
      for (auto [node, sum] : sums)
        em.placeholders[node] = fromF32(rb, sum, node->type);
      return SmallVector<Value>{toF32(rb, em.emit(epilogue))};
    });
  return status;
}

/// After the regions: empty rows' mean, the output in the user's layout
/// (`outRole`), the op verified (or erased with the reason) and the
/// sibling results that are its log-sum-exp (`lseSiblings`) in theirs.
FailureOr<Value> Raiser::finishResult(
    AttentionOp op, ArrayRef<Branch> branches, const Roles &roles,
    ArrayRef<int> outRole, RankedTensorType rootType,
    ArrayRef<std::pair<unsigned, SmallVector<int>>> lseSiblings, OpBuilder &b,
    Reason &why) {
  MLIRContext *ctx = op.getContext();
  Location loc = op.getLoc();
  const Branch &first = branches.front();
  auto outType = cast<RankedTensorType>(op.getOutput().getType());
  // A mask that fills with a finite constant leaves a fully masked row
  // the softmax of equal logits: the mean of V, not 0.
  Value output = op.getOutput();
  if (first.normalizer == Normalizer::softmax && op.getSinks().empty() &&
      llvm::any_of(branches, [](const Branch &br) { return br.finiteFill; }))
    op.setMeanEmptyRows(true);

  // The output in the user's layout.
  SmallVector<AffineExpr> outExprs;
  for (int v : {roles.b, roles.h, roles.i, roles.d}) {
    auto *it = llvm::find(outRole, v);
    outExprs.push_back(v >= 0 && it != outRole.end()
                           ? getAffineDimExpr(it - outRole.begin(), ctx)
                           : getAffineConstantExpr(0, ctx));
  }
  for (int v : {roles.b, roles.h, roles.i, roles.d})
    if (v >= 0 && !llvm::is_contained(outRole, v))
      return fail(why, "the output does not keep every role dim");
  AffineMap map = AffineMap::get(rootType.getRank(), 0, outExprs, ctx);
  Value result = output;
  if (!(map.isIdentity() && outType == rootType)) {
    Value init = tensor::EmptyOp::create(b, loc, rootType.getShape(),
                                         rootType.getElementType());
    result = linalg::GenericOp::create(
                 b, loc, rootType, output, init,
                 {map, b.getMultiDimIdentityMap(rootType.getRank())},
                 SmallVector<utils::IteratorType>(
                     rootType.getRank(), utils::IteratorType::parallel),
                 [](OpBuilder &nb, Location l, ValueRange args) {
                   linalg::YieldOp::create(nb, l, args[0]);
                 })
                 .getResult(0);
  }
  // What was built must verify; a role assignment the builders above do
  // not cover is a failed match, never invalid IR.
  Operation *layout = result != output ? result.getDefiningOp() : nullptr;
  bool valid;
  {
    ScopedDiagnosticHandler silence(ctx,
                                    [](Diagnostic &) { return success(); });
    valid = succeeded(mlir::verify(op)) &&
            (!layout || succeeded(mlir::verify(layout)));
  }
  if (!valid) {
    if (layout)
      layout->erase();
    if (output != op.getOutput())
      output.getDefiningOp()->erase();
    op->erase();
    return fail(why, "the attention found does not fit [B, H, rows, D] "
                     "views (the roles of its dims are ambiguous)");
  }
  // The LSE in each sibling's layout and type. Where a row may be fully
  // masked by a finite fill, the program's LSE there is the fill plus
  // log N, which the op's (-inf) is not: such a sibling stays as written.
  if (!lseSiblings.empty() && (!op.getMeanEmptyRows() || rowsNeverEmpty(op))) {
    for (auto &[k, roleOf] : lseSiblings) {
      auto type = cast<RankedTensorType>(siblings[k].getType());
      SmallVector<AffineExpr> exprs;
      for (int v : {roles.b, roles.h, roles.i}) {
        auto *it = llvm::find(roleOf, v);
        exprs.push_back(v >= 0 && it != roleOf.end()
                            ? getAffineDimExpr(it - roleOf.begin(), ctx)
                            : getAffineConstantExpr(0, ctx));
      }
      Value init = tensor::EmptyOp::create(b, loc, type.getShape(),
                                           type.getElementType());
      Type elementType = type.getElementType();
      Value layout = linalg::GenericOp::create(
                         b, loc, type, op.getLse()[0], init,
                         {AffineMap::get(type.getRank(), 0, exprs, ctx),
                          b.getMultiDimIdentityMap(type.getRank())},
                         SmallVector<utils::IteratorType>(
                             type.getRank(), utils::IteratorType::parallel),
                         [&](OpBuilder &nb, Location l, ValueRange args) {
                           Value v = args[0];
                           if (elementType.getIntOrFloatBitWidth() < 32)
                             v = arith::TruncFOp::create(nb, l, elementType, v);
                           else if (elementType.getIntOrFloatBitWidth() > 32)
                             v = arith::ExtFOp::create(nb, l, elementType, v);
                           linalg::YieldOp::create(nb, l, v);
                         })
                         .getResult(0);
      lseOf.push_back({k, layout});
    }
  }
  return result;
}

struct AttnRaisePass : flashlight::attn::impl::AttnRaiseBase<AttnRaisePass> {
  using AttnRaiseBase::AttnRaiseBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Named linalg ops (matmul, transpose, ...) as generics: one form.
    // Fills stay: their scalar is what a reduction starts from.
    IRRewriter rewriter(&getContext());
    SmallVector<linalg::LinalgOp> named;
    func.walk([&](linalg::LinalgOp op) {
      if (!isa<linalg::GenericOp, linalg::FillOp>(op))
        named.push_back(op);
    });
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      (void)linalg::generalizeNamedOp(rewriter, op);
    }
    auto ret = dyn_cast<func::ReturnOp>(func.getBody().back().getTerminator());
    if (!ret)
      return;
    // Results another result's attention computes as its LSE.
    llvm::DenseSet<unsigned> lseResults;
    for (OpOperand &operand : ret->getOpOperands()) {
      if (lseResults.contains(operand.getOperandNumber()))
        continue;
      Value root = operand.get();
      Raiser raiser(func, keepRounding);
      SmallVector<OpOperand *> siblings;
      for (OpOperand &other : ret->getOpOperands())
        if (&other != &operand &&
            !lseResults.contains(other.getOperandNumber())) {
          siblings.push_back(&other);
          raiser.siblings.push_back(other.get());
        }
      Reason why;
      FailureOr<Value> raised = raiser.raise(root, why);
      Location loc = root.getDefiningOp() ? root.getLoc() : ret.getLoc();
      if (failed(raised)) {
        if (explain)
          emitRemark(loc) << "attn-raise: result " << operand.getOperandNumber()
                          << " is not raised: " << why.text;
        raiseInside(func, root, operand.getOperandNumber());
        continue;
      }
      operand.set(*raised);
      // The attentions the raised one's Q, K and V are computed from (a
      // stack of layers whose last one is the result).
      raiseInside(func, *raised, operand.getOperandNumber(), /*quiet=*/true);
      if (explain)
        emitRemark(loc) << "attn-raise: result " << operand.getOperandNumber()
                        << " raised to attn.attention";
      for (auto [k, lse] : raiser.lseOf) {
        siblings[k]->set(lse);
        lseResults.insert(siblings[k]->getOperandNumber());
        if (explain)
          emitRemark(loc) << "attn-raise: result "
                          << siblings[k]->getOperandNumber()
                          << " is the log-sum-exp of result "
                          << operand.getOperandNumber() << "'s attention";
      }
    }
    // The matched program is dead now.
    RewritePatternSet none(&getContext());
    (void)applyPatternsGreedily(func, std::move(none));
  }

  /// Attentions that a result computes more with (an output projection
  /// after one, a stack of layers): tries the values `root` is computed
  /// from (generic results and reshapes, whose layout may separate B and H
  /// where a contraction's does not), the last first, and raises every one
  /// that is an attention; the rest of the result stays for the reference
  /// path. A raised attention's matched ops are erased before the next try,
  /// so that no part of it is raised again.
  /// With `quiet`, says nothing when nothing is raised.
  void raiseInside(func::FuncOp func, Value root, unsigned resultNumber,
                   bool quiet = false) {
    llvm::SetVector<Operation *> cone;
    SmallVector<Value> work = {root};
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || def->getParentRegion() != &func.getBody() ||
          !cone.insert(def))
        continue;
      llvm::append_range(work, def->getOperands());
    }
    SmallVector<Operation *> candidates;
    for (Operation &op : func.getBody().front())
      if (cone.contains(&op) && op.getNumResults() == 1 &&
          op.getResult(0) != root &&
          isa<linalg::GenericOp, tensor::CollapseShapeOp,
              tensor::ExpandShapeOp>(op))
        candidates.push_back(&op);
    Reason best;
    Operation *bestOp = nullptr;
    llvm::DenseSet<Operation *> erased;
    unsigned raisedCount = 0;
    for (Operation *op : llvm::reverse(candidates)) {
      if (erased.contains(op))
        continue;
      Raiser raiser(func, keepRounding);
      Reason why;
      Value value = op->getResult(0);
      FailureOr<Value> raised = raiser.raise(value, why);
      if (failed(raised)) {
        if (!bestOp || why.stage > best.stage) {
          best = why;
          bestOp = op;
        }
        continue;
      }
      value.replaceAllUsesWith(*raised);
      if (explain)
        emitRemark(op->getLoc())
            << "attn-raise: an attention inside result " << resultNumber
            << " raised to attn.attention; the rest of the result is not "
               "attention";
      ++raisedCount;
      eraseDead(func, erased);
      if (bestOp && erased.contains(bestOp))
        bestOp = nullptr;
    }
    // The value that came closest to an attention says what stopped it.
    if (explain && !quiet && !raisedCount && bestOp && best.stage > 0)
      emitRemark(bestOp->getLoc())
          << "attn-raise: nothing inside result " << resultNumber
          << " is raised; the closest value stopped at: " << best.text;
  }

  /// Erases the ops of `func`'s body that nothing uses any more, noting
  /// them in `erased`.
  static void eraseDead(func::FuncOp func,
                        llvm::DenseSet<Operation *> &erased) {
    Block &body = func.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op)) {
        erased.insert(&op);
        op.erase();
      }
  }
};

} // namespace
