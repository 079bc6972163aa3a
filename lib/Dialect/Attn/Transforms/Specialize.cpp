//===- Specialize.cpp - Re-shape an attention program ---------------------===//
//
// An attention program written at one size is the same program at every
// size; the analysis says which captured dimensions follow which role.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSwitch.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNSPECIALIZE
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

struct AttnSpecializePass
    : flashlight::attn::impl::AttnSpecializeBase<AttnSpecializePass> {
  using AttnSpecializeBase::AttnSpecializeBase;

  /// `requested` if set (>= 0), else `old`.
  static int64_t pick(int64_t requested, int64_t old) {
    return requested >= 0 ? requested : old;
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    AttentionOp op;
    func.walk([&](AttentionOp a) { op = a; });
    if (!op)
      return;
    Block &entry = func.getBody().front();
    auto isArg = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && arg.getOwner() == &entry;
    };
    for (Value v : op->getOperands())
      if (!isArg(v)) {
        op.emitError("attn-specialize needs every operand of the attention "
                     "to be a function argument");
        return signalPassFailure();
      }

    Type element;
    if (!elementType.empty()) {
      Builder b(&getContext());
      element = llvm::StringSwitch<Type>(elementType)
                    .Case("f16", b.getF16Type())
                    .Case("bf16", b.getBF16Type())
                    .Case("f32", b.getF32Type())
                    .Default(Type());
      if (!element) {
        func.emitError("attn-specialize: dtype must be f16, bf16 or f32, got '")
            << elementType << "'";
        return signalPassFailure();
      }
    }

    auto qType = cast<RankedTensorType>(op.getQueries()[0].getType());
    auto vType = cast<RankedTensorType>(op.getValue().getType());
    Type oldElement = vType.getElementType();
    int64_t B = pick(batch, qType.getDimSize(0));
    int64_t Hq = pick(qHeads, qType.getDimSize(1));
    int64_t M = pick(qLen, qType.getDimSize(2));
    int64_t Hkv = pick(kvHeads, vType.getDimSize(1));
    int64_t N = pick(kvLen, vType.getDimSize(2));
    Type newElement = element ? element : oldElement;

    // New types by value: Q/K/V and sinks by their role.
    DenseMap<Value, Type> newTypes;
    auto retype = [&](Value v, ArrayRef<int64_t> shape, bool isQKV) {
      auto t = cast<RankedTensorType>(v.getType());
      newTypes[v] =
          RankedTensorType::get(shape, isQKV ? newElement : t.getElementType());
    };
    auto dim = [&](Value v, int64_t d) {
      return pick(headDim, cast<RankedTensorType>(v.getType()).getDimSize(d));
    };
    for (Value q : op.getQueries())
      retype(q, {B, Hq, M, dim(q, 3)}, true);
    for (Value k : op.getKeys())
      retype(k, {B, Hkv, N, dim(k, 3)}, true);
    int64_t Dv = dim(op.getValue(), 3);
    retype(op.getValue(), {B, Hkv, N, Dv}, true);
    for (Value s : op.getSinks())
      retype(s, {Hq}, false);

    // Captured tensors: each dimension follows the role that indexes it.
    MaskScoreAnalysis analysis(op);
    for (auto [c, capture] : llvm::enumerate(op.getCaptures())) {
      auto t = cast<RankedTensorType>(capture.getType());
      SmallVector<int64_t> shape(t.getShape());
      for (int64_t d = 0; d < t.getRank(); ++d) {
        std::optional<int64_t> size;
        for (const CaptureAccess &access : analysis.getCaptureAccesses()) {
          if (access.capture != c)
            continue;
          int64_t s = shape[d];
          switch (access.dims[d].role) {
          case IndexRole::Batch:
            s = B;
            break;
          case IndexRole::Head:
            s = Hq;
            break;
          case IndexRole::Query:
            s = M;
            break;
          case IndexRole::Key:
            s = N;
            break;
          case IndexRole::Column:
            s = Dv;
            break;
          default:
            break;
          }
          if (size && *size != s) {
            op.emitError() << "attn-specialize: dimension " << d
                           << " of capture #" << c
                           << " is indexed by roles of different new sizes ("
                           << *size << " and " << s << ")";
            return signalPassFailure();
          }
          size = s;
        }
        if (size)
          shape[d] = *size;
      }
      newTypes[capture] = RankedTensorType::get(shape, t.getElementType());
    }

    // Apply: arguments, region arguments of captures, results.
    for (BlockArgument arg : entry.getArguments())
      if (Type t = newTypes.lookup(arg))
        arg.setType(t);
    unsigned nb = op.getNumBranches();
    std::pair<Region *, unsigned> regions[] = {{&op.getScore(), nb + 4},
                                               {&op.getMask(), 4},
                                               {&op.getEpilogue(), nb + 4}};
    for (auto [region, lead] : regions)
      if (!region->empty())
        for (auto [c, capture] : llvm::enumerate(op.getCaptures()))
          region->getArgument(lead + c).setType(capture.getType());
    auto outType = cast<RankedTensorType>(op.getOutput().getType());
    op.getOutput().setType(RankedTensorType::get(
        {B, Hq, M, Dv}, outType.getElementType() == oldElement
                            ? newElement
                            : outType.getElementType()));
    for (Value lse : op.getLse())
      lse.setType(RankedTensorType::get({B, Hq, M},
                                        Builder(&getContext()).getF32Type()));
    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    func.setType(FunctionType::get(&getContext(), entry.getArgumentTypes(),
                                   ret.getOperandTypes()));
    if (failed(mlir::verify(op))) {
      op.emitError("attn-specialize: the re-shaped attention does not verify");
      return signalPassFailure();
    }
  }
};

} // namespace
