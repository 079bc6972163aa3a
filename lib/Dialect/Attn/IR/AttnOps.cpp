//===- AttnOps.cpp - attn dialect operations ------------------------------===//
//
// Verifiers and type inference. Passes rely on every invariant checked here
// (shapes agree, regions have the documented signatures) and do not re-check.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace flashlight::attn;

#include "flashlight/Dialect/Attn/IR/AttnInterfaces.cpp.inc"

using namespace mlir;

/// The results' types as one list: the output, the log-sum-exp tensors, the
/// key side where the op has a `key_side` branch, and last one tensor per
/// entry of `term_dims`.
static ParseResult parseAttentionResults(OpAsmParser &parser, Type &output,
                                         SmallVectorImpl<Type> &lse,
                                         Type &keySide,
                                         SmallVectorImpl<Type> &terms,
                                         IntegerAttr branch,
                                         ArrayAttr termDims) {
  SmallVector<Type> types;
  if (parser.parseTypeList(types))
    return failure();
  size_t numTerms = termDims ? termDims.size() : 0;
  if (types.size() < 1 + (branch ? 1 : 0) + numTerms)
    return parser.emitError(parser.getCurrentLocation())
           << "expected the output type" << (branch ? ", the key side's" : "")
           << (numTerms ? " and one type per term" : "");
  output = types.front();
  ArrayRef<Type> rest = ArrayRef<Type>(types).drop_front();
  llvm::append_range(terms, rest.take_back(numTerms));
  rest = rest.drop_back(numTerms);
  if (branch) {
    keySide = rest.back();
    rest = rest.drop_back();
  }
  llvm::append_range(lse, rest);
  return success();
}

static void printAttentionResults(OpAsmPrinter &printer, Operation *,
                                  Type output, TypeRange lse, Type keySide,
                                  TypeRange terms, IntegerAttr, ArrayAttr) {
  printer << output;
  for (Type t : lse)
    printer << ", " << t;
  if (keySide)
    printer << ", " << keySide;
  for (Type t : terms)
    printer << ", " << t;
}

#define GET_OP_CLASSES
#include "flashlight/Dialect/Attn/IR/AttnOps.cpp.inc"

namespace {

/// Names of the dimensions, for diagnostics.
constexpr const char *kQueryDims = "[B, Hq, M, Dqk]";
constexpr const char *kKeyDims = "[B, Hkv, N, Dqk]";
constexpr const char *kValueDims = "[B, Hkv, N, Dv]";

/// Prints a dimension, `?` when dynamic.
std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? "?" : std::to_string(d);
}

/// True when two dimensions may be equal (one is dynamic, or both agree).
bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// The problem sizes, taken from the query/key/value (block) tensors and
/// checked against each other as they are collected.
struct ProblemDims {
  int64_t b, hq, m, hkv, n, dv;
};

/// Checks that `value` is a ranked tensor of the given rank.
LogicalResult checkRank(Operation *op, Value value, int64_t rank,
                        const Twine &what, const char *dims) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() != rank)
    return op->emitOpError() << what << " must have rank " << rank << " "
                             << dims << ", got rank " << type.getRank();
  // An empty dimension (a head dim or a sequence of 0) has no attention to
  // compute; the kernels' index arithmetic assumes at least one element.
  for (auto [d, size] : llvm::enumerate(type.getShape()))
    if (size == 0)
      return op->emitOpError() << what << " " << dims << " has size 0 in dim "
                               << d << ": every dimension must be at least 1";
  return success();
}

/// Checks `actual` dim against `expected`, naming both and where the expected
/// size comes from (`source`) in the diagnostic.
LogicalResult checkDim(Operation *op, int64_t actual, int64_t expected,
                       const Twine &what, StringRef source) {
  if (dimsCompatible(actual, expected))
    return success();
  return op->emitOpError() << what << " is " << dimStr(actual) << ", expected "
                           << dimStr(expected) << " (from " << source << ")";
}

/// "1 value", "2 values".
std::string plural(size_t n, StringRef noun) {
  return std::to_string(n) + " " + noun.str() + (n == 1 ? "" : "s");
}

/// Checks that `type` has exactly the shape `shape` and an f32 element type.
LogicalResult checkF32Shape(Operation *op, Type type, ArrayRef<int64_t> shape,
                            const Twine &what, const char *dims) {
  auto tensor = cast<RankedTensorType>(type);
  if (tensor.getRank() != static_cast<int64_t>(shape.size()))
    return op->emitOpError() << what << " must have rank " << shape.size()
                             << " " << dims << ", got " << tensor;
  for (auto [i, pair] : llvm::enumerate(llvm::zip(tensor.getShape(), shape))) {
    auto [actual, expected] = pair;
    if (!dimsCompatible(actual, expected))
      return op->emitOpError()
             << what << " dim " << i << " is " << dimStr(actual)
             << ", expected " << dimStr(expected) << " " << dims;
  }
  return success();
}

/// Verifies Q/K/V of every branch and returns the problem sizes.
FailureOr<ProblemDims> verifyQKV(Operation *op, ValueRange queries,
                                 ValueRange keys, Value value) {
  if (queries.empty())
    return op->emitOpError("expects at least one query tensor");
  if (queries.size() != keys.size())
    return op->emitOpError()
           << "expects one key tensor per query tensor, got " << queries.size()
           << " queries and " << keys.size() << " keys";
  Type elementType = cast<RankedTensorType>(value.getType()).getElementType();
  if (failed(checkRank(op, value, 4, "value", kValueDims)))
    return failure();
  ArrayRef<int64_t> vShape = cast<RankedTensorType>(value.getType()).getShape();
  ProblemDims dims{vShape[0],
                   ShapedType::kDynamic,
                   ShapedType::kDynamic,
                   vShape[1],
                   vShape[2],
                   vShape[3]};

  for (auto [r, qk] : llvm::enumerate(llvm::zip(queries, keys))) {
    auto [q, k] = qk;
    if (failed(checkRank(op, q, 4, "query #" + Twine(r), kQueryDims)) ||
        failed(checkRank(op, k, 4, "key #" + Twine(r), kKeyDims)))
      return failure();
    auto qType = cast<RankedTensorType>(q.getType());
    auto kType = cast<RankedTensorType>(k.getType());
    if (qType.getElementType() != elementType ||
        kType.getElementType() != elementType)
      return op->emitOpError()
             << "query, key and value must share one element type, got "
             << qType.getElementType() << ", " << kType.getElementType()
             << " and " << elementType << " (branch " << r << ")";
    ArrayRef<int64_t> qs = qType.getShape(), ks = kType.getShape();
    if (r == 0) {
      dims.hq = qs[1];
      dims.m = qs[2];
    }
    if (failed(checkDim(op, qs[0], dims.b, "batch size of query #" + Twine(r),
                        "the value")) ||
        failed(checkDim(op, qs[1], dims.hq,
                        "query head count of query #" + Twine(r),
                        "query #0")) ||
        failed(checkDim(op, qs[2], dims.m, "query length of query #" + Twine(r),
                        "query #0")) ||
        failed(checkDim(op, ks[0], dims.b, "batch size of key #" + Twine(r),
                        "the value")) ||
        failed(checkDim(op, ks[1], dims.hkv,
                        "key/value head count of key #" + Twine(r),
                        "the value")) ||
        failed(checkDim(op, ks[2], dims.n, "key length of key #" + Twine(r),
                        "the value")) ||
        failed(checkDim(op, ks[3], qs[3],
                        "head dim of key #" + Twine(r) + " (Dqk)",
                        "query #" + std::to_string(r))))
      return failure();
  }
  if (!ShapedType::isDynamic(dims.hq) && !ShapedType::isDynamic(dims.hkv) &&
      (dims.hkv == 0 || dims.hq % dims.hkv != 0))
    return op->emitOpError()
           << "query heads (" << dims.hq
           << ") must be a multiple of key/value heads (" << dims.hkv << ")";
  return dims;
}

/// Verifies the signature and terminator of an attn region: `numLeading`
/// leading arguments of type `leadingType`, four `index` arguments, one
/// argument per capture (same type), yielding `yieldTypes`.
LogicalResult verifyRegionSignature(Operation *op, Region &region,
                                    StringRef name, unsigned numLeading,
                                    Type leadingType, StringRef leadingName,
                                    TypeRange captureTypes,
                                    TypeRange yieldTypes) {
  if (region.empty())
    return success();
  Block &block = region.front();
  unsigned expected = numLeading + 4 + captureTypes.size();
  if (block.getNumArguments() != expected) {
    InFlightDiagnostic diag = op->emitOpError() << name << " region must have "
                                                << expected << " arguments (";
    if (numLeading)
      diag << plural(numLeading, leadingName) << ", ";
    return diag << "4 indices, " << plural(captureTypes.size(), "capture")
                << "), got " << block.getNumArguments();
  }
  for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
    Type want = i < numLeading       ? leadingType
                : i < numLeading + 4 ? IndexType::get(op->getContext())
                                     : captureTypes[i - numLeading - 4];
    if (arg.getType() != want)
      return op->emitOpError()
             << name << " region argument #" << i << " must be " << want
             << ", got " << arg.getType();
  }
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError() << name << " region must end with attn.yield";
  if (TypeRange(yield.getValues().getTypes()) != yieldTypes) {
    InFlightDiagnostic diag = op->emitOpError()
                              << name << " region must yield ";
    llvm::interleaveComma(yieldTypes, diag);
    diag << " (" << plural(yieldTypes.size(), "value") << "), got ";
    llvm::interleaveComma(yield.getValues().getTypes(), diag);
    return diag << " (" << plural(yield.getValues().size(), "value") << ")";
  }
  return success();
}

/// Verifies the score and mask regions shared by the score program ops.
LogicalResult verifyScoreAndMask(Operation *op, Region &score, Region &mask,
                                 unsigned numBranches, TypeRange captures,
                                 unsigned numTerms = 0) {
  Builder b(op->getContext());
  if (numTerms && score.empty())
    return op->emitOpError("terms need a score region that yields them");
  SmallVector<Type> logits(numBranches + numTerms, b.getF32Type());
  if (failed(verifyRegionSignature(op, score, "score", numBranches,
                                   b.getF32Type(), "logit", captures, logits)))
    return failure();
  return verifyRegionSignature(op, mask, "mask", 0, Type(), "", captures,
                               TypeRange{b.getI1Type()});
}

/// Verifies the epilogue region.
LogicalResult verifyEpilogue(Operation *op, Region &epilogue,
                             unsigned numBranches, TypeRange captures,
                             bool columnBlocks = false) {
  Builder b(op->getContext());
  if (columnBlocks) {
    if (!epilogue.empty())
      return op->emitOpError("writes each branch's block of columns "
                             "(value_columns) and takes no epilogue");
    return success();
  }
  if (numBranches > 1 && epilogue.empty())
    return op->emitOpError() << "has " << numBranches
                             << " logit branches and needs an epilogue region "
                                "to combine them";
  return verifyRegionSignature(op, epilogue, "epilogue", numBranches,
                               b.getF32Type(), "branch output", captures,
                               TypeRange{b.getF32Type()});
}

/// Verifies the sinks operands: softmax only, one `[Hq]` tensor per branch.
LogicalResult verifySinks(Operation *op, ValueRange sinks, unsigned numBranches,
                          Normalizer normalizer, int64_t hq) {
  if (sinks.empty())
    return success();
  if (normalizer != Normalizer::softmax)
    return op->emitOpError() << "sinks need the softmax normalizer, got "
                             << stringifyNormalizer(normalizer);
  if (sinks.size() != numBranches)
    return op->emitOpError() << "expects one sink tensor per branch ("
                             << numBranches << "), got " << sinks.size();
  for (auto [r, sink] : llvm::enumerate(sinks)) {
    auto type = cast<RankedTensorType>(sink.getType());
    if (type.getRank() != 1 || !dimsCompatible(type.getDimSize(0), hq))
      return op->emitOpError() << "sink #" << r << " must be [Hq] = ["
                               << dimStr(hq) << "], got " << type;
  }
  return success();
}

/// Verifies the optional log-sum-exp results: softmax only, one `[B,Hq,M]`
/// f32 tensor per branch.
LogicalResult verifyLse(Operation *op, TypeRange lse, unsigned numBranches,
                        Normalizer normalizer, ArrayRef<int64_t> shape) {
  if (lse.empty())
    return success();
  if (normalizer != Normalizer::softmax)
    return op->emitOpError() << "log-sum-exp results need the softmax "
                                "normalizer, got "
                             << stringifyNormalizer(normalizer);
  if (lse.size() != numBranches)
    return op->emitOpError() << "expects one log-sum-exp result per branch ("
                             << numBranches << "), got " << lse.size();
  for (auto [r, type] : llvm::enumerate(lse))
    if (failed(checkF32Shape(op, type, shape, "log-sum-exp #" + Twine(r),
                             "[B, Hq, M]")))
      return failure();
  return success();
}

/// Checks the output tensor `[B, Hq, M, Dv]`.
LogicalResult verifyOutput(Operation *op, Type type, const ProblemDims &d) {
  auto out = cast<RankedTensorType>(type);
  int64_t expected[] = {d.b, d.hq, d.m, d.dv};
  if (out.getRank() != 4)
    return op->emitOpError()
           << "output must have rank 4 [B, Hq, M, Dv], got " << out;
  for (auto [i, actual] : llvm::enumerate(out.getShape()))
    if (!dimsCompatible(actual, expected[i]))
      return op->emitOpError()
             << "output dim " << i << " is " << dimStr(actual) << ", expected "
             << dimStr(expected[i]) << " [B, Hq, M, Dv]";
  return success();
}

/// Checks one scale per branch.
LogicalResult verifyScale(Operation *op, ArrayRef<double> scale,
                          unsigned numBranches) {
  if (scale.size() == numBranches)
    return success();
  return op->emitOpError() << "expects one scale per branch (" << numBranches
                           << "), got " << scale.size();
}

/// Verifies a key-side product (`key_side_branch` with its tensor `type`,
/// if any): normalizer `none` or `sigmoid` (weights final per element), a
/// branch of the program, `[B?, H?, N?, Dqk_r]` f32 (`dims`: the expected
/// sizes, dynamic where the op does not fix them).
LogicalResult verifyKeySide(Operation *op, std::optional<uint64_t> branch,
                            Type type, ValueRange queries,
                            Normalizer normalizer,
                            ArrayRef<int64_t> leadingDims) {
  if (branch.has_value() != static_cast<bool>(type))
    return op->emitOpError("a key_side branch and its key_side tensor go "
                           "together");
  if (!branch)
    return success();
  if (*branch >= queries.size())
    return op->emitOpError()
           << "key_side branch " << *branch << " is not one of its "
           << queries.size() << " branches";
  if (normalizer == Normalizer::softmax)
    return op->emitOpError("key_side needs weights that are final per "
                           "element (normalizer none or sigmoid), not "
                           "softmax");
  SmallVector<int64_t> shape(leadingDims);
  shape.push_back(
      cast<RankedTensorType>(queries[*branch].getType()).getDimSize(3));
  return checkF32Shape(op, type, shape, "key_side", "[B, Hkv, N, Dqk]");
}

/// Verifies `term_dims` and the term tensors `types`: per term, increasing
/// dims among 0..3 (b, h, q_idx, kv_idx) and an f32 tensor of that rank
/// whose extents are `extents`' at those dims (dynamic where the op does
/// not fix them).
LogicalResult verifyTerms(Operation *op, std::optional<ArrayAttr> termDims,
                          TypeRange types, ArrayRef<int64_t> extents) {
  size_t numTerms = termDims ? termDims->size() : 0;
  if (types.size() != numTerms)
    return op->emitOpError() << "has " << numTerms << " term_dims entries and "
                             << types.size() << " term tensors";
  for (unsigned e = 0; e < numTerms; ++e) {
    auto dims = dyn_cast<DenseI64ArrayAttr>((*termDims)[e]);
    if (!dims)
      return op->emitOpError()
             << "term_dims #" << e << " must be an array<i64> of dims";
    SmallVector<int64_t> shape;
    int64_t last = -1;
    for (int64_t d : dims.asArrayRef()) {
      if (d <= last || d > 3)
        return op->emitOpError()
               << "term_dims #" << e
               << " must list increasing dims among 0 (b), 1 (h), 2 (q_idx) "
                  "and 3 (kv_idx)";
      last = d;
      shape.push_back(extents[d]);
    }
    if (failed(checkF32Shape(op, types[e], shape, "term #" + Twine(e),
                             "its term_dims' extents")))
      return failure();
  }
  return success();
}

/// Which of the three region signatures a region has.
enum class RegionKind { Score, Mask, Epilogue };

/// Names the block arguments after the documented signature, so printed IR
/// reads `^bb0(%s: f32, %b: index, %h: index, %q: index, %kv: index)`.
void nameRegionArguments(Region &region, RegionKind kind, unsigned numBranches,
                         OpAsmSetValueNameFn setNameFn) {
  if (region.empty())
    return;
  Block &block = region.front();
  unsigned lead = kind == RegionKind::Mask ? 0 : numBranches;
  if (block.getNumArguments() < lead + 4)
    return;
  const char *leadName = kind == RegionKind::Score ? "s" : "o";
  for (unsigned r = 0; r < lead; ++r)
    setNameFn(block.getArgument(r), numBranches == 1
                                        ? std::string(leadName)
                                        : leadName + std::to_string(r));
  const char *indexNames[] = {"b", "h", "q",
                              kind == RegionKind::Epilogue ? "d" : "kv"};
  for (unsigned i = 0; i < 4; ++i)
    setNameFn(block.getArgument(lead + i), indexNames[i]);
}

} // namespace

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  FailureOr<ProblemDims> dims =
      verifyQKV(*this, getQueries(), getKeys(), getValue());
  if (failed(dims))
    return failure();
  unsigned nb = getNumBranches();
  if (failed(verifyScale(*this, getScale(), nb)) ||
      failed(verifyOutput(*this, getOutput().getType(), *dims)) ||
      failed(verifySinks(*this, getSinks(), nb, getNormalizer(), dims->hq)))
    return failure();
  if (getMeanEmptyRows() &&
      (getNormalizer() != Normalizer::softmax || !getSinks().empty()))
    return emitOpError("'mean_empty_rows' needs a softmax without sinks");
  // (attn-expand-empty-rows rebuilds the op from its output and LSE.)
  if (getMeanEmptyRows() && getNumTerms())
    return emitOpError("'mean_empty_rows' does not take terms");
  if (std::optional<ArrayRef<int64_t>> columns = getValueColumns()) {
    if (columns->size() != nb || nb < 2)
      return emitOpError() << "value_columns needs one width per branch and "
                              "two branches or more, got "
                           << columns->size() << " for " << nb;
    int64_t total = 0;
    for (int64_t w : *columns) {
      if (w < 1)
        return emitOpError("value_columns widths must be positive");
      total += w;
    }
    if (total != dims->dv)
      return emitOpError() << "value_columns must split V's "
                           << dimStr(dims->dv)
                           << " columns, got widths summing to " << total;
    if (getMeanEmptyRows())
      return emitOpError("'mean_empty_rows' does not take value_columns");
  }
  Value keySide = getKeySide();
  if (failed(verifyKeySide(*this, getKeySideBranch(),
                           keySide ? keySide.getType() : Type(), getQueries(),
                           getNormalizer(), {dims->b, dims->hkv, dims->n})) ||
      failed(verifyTerms(*this, getTermDims(), getTerms().getTypes(),
                         {dims->b, dims->hq, dims->m, dims->n})))
    return failure();
  return verifyLse(*this, TypeRange(getLse()), nb, getNormalizer(),
                   {dims->b, dims->hq, dims->m});
}

void AttentionOp::getAsmBlockArgumentNames(Region &region,
                                           OpAsmSetValueNameFn setNameFn) {
  RegionKind kind = &region == &getScore()  ? RegionKind::Score
                    : &region == &getMask() ? RegionKind::Mask
                                            : RegionKind::Epilogue;
  nameRegionArguments(region, kind, getNumBranches(), setNameFn);
}

LogicalResult AttentionOp::verifyRegions() {
  TypeRange captures = getCaptures().getTypes();
  if (failed(verifyScoreAndMask(*this, getScore(), getMask(), getNumBranches(),
                                captures, getNumTerms())))
    return failure();
  return verifyEpilogue(*this, getEpilogue(), getNumBranches(), captures,
                        getValueColumns().has_value());
}

//===----------------------------------------------------------------------===//
// OnlineStepOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineStepOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferredReturnTypes) {
  for (ValueRange group :
       {adaptor.getMaxState(), adaptor.getSumState(), adaptor.getAccState()})
    llvm::append_range(inferredReturnTypes, group.getTypes());
  if (Value keySide = adaptor.getKeySide())
    inferredReturnTypes.push_back(keySide.getType());
  llvm::append_range(inferredReturnTypes, adaptor.getTermState().getTypes());
  return success();
}

/// Verifies the running state of the online form: `max`/`sum` `[B,Hq,BM]`
/// present exactly for softmax, one `acc` `[B,Hq,BM,Dv]` per branch.
static LogicalResult verifyState(Operation *op, ValueRange maxState,
                                 ValueRange sumState, ValueRange accState,
                                 unsigned numBranches, Normalizer normalizer,
                                 const ProblemDims &d) {
  unsigned wantStats = normalizer == Normalizer::softmax ? numBranches : 0;
  if (maxState.size() != wantStats || sumState.size() != wantStats)
    return op->emitOpError()
           << "the " << stringifyNormalizer(normalizer) << " normalizer with "
           << numBranches << " branch(es) carries " << wantStats
           << " running max and sum tensors, got " << maxState.size() << " and "
           << sumState.size();
  if (accState.size() != numBranches)
    return op->emitOpError() << "expects one accumulator per branch ("
                             << numBranches << "), got " << accState.size();
  for (auto [r, v] : llvm::enumerate(maxState))
    if (failed(checkF32Shape(op, v.getType(), {d.b, d.hq, d.m},
                             "running max #" + Twine(r), "[B, Hq, BM]")))
      return failure();
  for (auto [r, v] : llvm::enumerate(sumState))
    if (failed(checkF32Shape(op, v.getType(), {d.b, d.hq, d.m},
                             "running sum #" + Twine(r), "[B, Hq, BM]")))
      return failure();
  // Accumulators Dv wide, or (value_columns: two branches or more, each
  // narrower than a static Dv) blocks that split Dv.
  auto width = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getDimSize(3);
  };
  bool blocks = numBranches >= 2 && !ShapedType::isDynamic(d.dv) &&
                llvm::all_of(accState, [&](Value v) {
                  return !ShapedType::isDynamic(width(v)) && width(v) < d.dv;
                });
  int64_t total = 0;
  for (auto [r, v] : llvm::enumerate(accState)) {
    total += blocks ? width(v) : 0;
    if (failed(checkF32Shape(op, v.getType(),
                             {d.b, d.hq, d.m, blocks ? width(v) : d.dv},
                             "accumulator #" + Twine(r), "[B, Hq, BM, Dv]")))
      return failure();
  }
  if (blocks && total != d.dv)
    return op->emitOpError()
           << "accumulators narrower than Dv (" << d.dv
           << ") must split it into one block per branch, got widths summing "
              "to "
           << total;
  return success();
}

LogicalResult OnlineStepOp::verify() {
  FailureOr<ProblemDims> dims =
      verifyQKV(*this, getQueries(), getKeys(), getValue());
  if (failed(dims))
    return failure();
  if (failed(verifyScale(*this, getScale(), getNumBranches())))
    return failure();
  // The key-side tensor holds every key of the step's KV head (the step adds
  // its block's rows at the key offset).
  Value keySide = getKeySide();
  if (failed(verifyKeySide(*this, getKeySideBranch(),
                           keySide ? keySide.getType() : Type(), getQueries(),
                           getNormalizer(),
                           SmallVector<int64_t>(3, ShapedType::kDynamic))) ||
      // Whole term tensors: a tiled step's blocks are slices of the problem.
      failed(verifyTerms(*this, getTermDims(), getTermState().getTypes(),
                         SmallVector<int64_t>(4, ShapedType::kDynamic))))
    return failure();
  return verifyState(*this, getMaxState(), getSumState(), getAccState(),
                     getNumBranches(), getNormalizer(), *dims);
}

/// The step's new state without its key-side tensor and terms.
ValueRange OnlineStepOp::getStateResults() {
  ValueRange results = getNewState().drop_back(getTermState().size());
  return getKeySide() ? results.drop_back() : results;
}

void OnlineStepOp::getAsmBlockArgumentNames(Region &region,
                                            OpAsmSetValueNameFn setNameFn) {
  nameRegionArguments(
      region, &region == &getScore() ? RegionKind::Score : RegionKind::Mask,
      getNumBranches(), setNameFn);
}

LogicalResult OnlineStepOp::verifyRegions() {
  return verifyScoreAndMask(*this, getScore(), getMask(), getNumBranches(),
                            getCaptures().getTypes(), getNumTerms());
}

//===----------------------------------------------------------------------===//
// OnlineFinalizeOp
//===----------------------------------------------------------------------===//

LogicalResult OnlineFinalizeOp::verify() {
  unsigned nb = getNumBranches();
  if (nb == 0)
    return emitOpError("expects at least one accumulator");
  auto acc = cast<RankedTensorType>(getAccState().front().getType());
  if (acc.getRank() != 4)
    return emitOpError() << "accumulator #0 must have rank 4 [B, Hq, BM, Dv], "
                            "got "
                         << acc;
  // Dv is the output's (accumulators may split it: value_columns).
  auto out = dyn_cast<RankedTensorType>(getOutput().getType());
  int64_t dv =
      out && out.getRank() == 4 ? out.getDimSize(3) : acc.getDimSize(3);
  ProblemDims d{acc.getDimSize(0),    acc.getDimSize(1),    acc.getDimSize(2),
                ShapedType::kDynamic, ShapedType::kDynamic, dv};
  if (failed(verifyState(*this, getMaxState(), getSumState(), getAccState(), nb,
                         getNormalizer(), d)) ||
      failed(verifyOutput(*this, getOutput().getType(), d)) ||
      // Sinks are indexed by the absolute head (head offset + local head),
      // so the [H] table of the whole problem serves every block of heads.
      failed(verifySinks(*this, getSinks(), nb, getNormalizer(),
                         ShapedType::kDynamic)))
    return failure();
  return verifyLse(*this, TypeRange(getLse()), nb, getNormalizer(),
                   {d.b, d.hq, d.m});
}

void OnlineFinalizeOp::getAsmBlockArgumentNames(Region &region,
                                                OpAsmSetValueNameFn setNameFn) {
  nameRegionArguments(region, RegionKind::Epilogue, getNumBranches(),
                      setNameFn);
}

LogicalResult OnlineFinalizeOp::verifyRegions() {
  auto out = cast<RankedTensorType>(getOutput().getType());
  return verifyEpilogue(
      *this, getEpilogue(), getNumBranches(), getCaptures().getTypes(),
      !valueColumnOffsets(getAccState(), out.getDimSize(3)).empty());
}

//===----------------------------------------------------------------------===//
// ParallelAccumulateOp
//===----------------------------------------------------------------------===//

LogicalResult ParallelAccumulateOp::verify() {
  if (!isa_and_nonnull<InParallelOpInterface>((*this)->getParentOp()))
    return emitOpError("must be in the in_parallel terminator of a parallel "
                       "loop");
  auto source = cast<RankedTensorType>(getSource().getType());
  auto dest = cast<RankedTensorType>(getDest().getType());
  int64_t lead = getOffsets().size();
  if (source.getRank() != dest.getRank() || lead > dest.getRank())
    return emitOpError() << "adds a tensor of the destination's rank at "
                            "leading offsets, got "
                         << source << " into " << dest << " at " << lead
                         << " offsets";
  for (int64_t d = 0; d < source.getRank(); ++d) {
    int64_t want = d < lead ? 1 : dest.getDimSize(d);
    if (!dimsCompatible(source.getDimSize(d), want))
      return emitOpError() << "source dim " << d << " is "
                           << dimStr(source.getDimSize(d)) << ", expected "
                           << dimStr(want)
                           << (d < lead ? " (an offset's dim)" : "");
  }
  return success();
}

MutableOperandRange ParallelAccumulateOp::getUpdatedDestinations() {
  return getDestMutable();
}

Operation *ParallelAccumulateOp::getIteratingParent() {
  Operation *terminator = (*this)->getParentOp();
  return terminator ? terminator->getParentOp() : nullptr;
}

SmallVector<int64_t> flashlight::attn::valueColumnOffsets(ValueRange accState,
                                                          int64_t dv) {
  // The verifiers' rule: blocks where every accumulator is narrower.
  SmallVector<int64_t> offsets;
  int64_t at = 0;
  for (Value acc : accState) {
    int64_t w = cast<RankedTensorType>(acc.getType()).getDimSize(3);
    if (accState.size() < 2 || ShapedType::isDynamic(w) ||
        ShapedType::isDynamic(dv) || w >= dv)
      return {};
    offsets.push_back(at);
    at += w;
  }
  return offsets;
}
