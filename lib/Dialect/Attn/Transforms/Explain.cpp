//===- Explain.cpp - Report the structure of attn ops ---------------------===//

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNEXPLAIN
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Query and key/value head counts of a query/key pair.
void printHeads(llvm::raw_ostream &os, Value query, Value key) {
  auto dim = [](Value v) {
    int64_t d = cast<RankedTensorType>(v.getType()).getDimSize(1);
    return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
  };
  os << ", heads " << dim(query) << "/" << dim(key);
}

struct AttnExplainPass
    : flashlight::attn::impl::AttnExplainBase<AttnExplainPass> {
  void runOnOperation() override {
    getOperation()->walk([](Operation *op) {
      if (!isa<AttentionOp, OnlineStepOp, OnlineFinalizeOp>(op))
        return;
      std::string text;
      llvm::raw_string_ostream os(text);
      os << op->getName() << ": ";
      if (auto attention = dyn_cast<AttentionOp>(op)) {
        unsigned nb = attention.getNumBranches();
        os << nb << (nb == 1 ? " branch, " : " branches, ")
           << stringifyNormalizer(attention.getNormalizer());
        printHeads(os, attention.getQueries()[0], attention.getKeys()[0]);
        if (!attention.getSinks().empty())
          os << ", sinks";
        if (!attention.getLse().empty())
          os << ", lse";
        if (!attention.getEpilogue().empty())
          os << ", epilogue";
      } else if (auto step = dyn_cast<OnlineStepOp>(op)) {
        os << step.getNumBranches() << " state(s), "
           << stringifyNormalizer(step.getNormalizer());
        printHeads(os, step.getQueries()[0], step.getKeys()[0]);
      } else if (auto finalize = dyn_cast<OnlineFinalizeOp>(op)) {
        os << finalize.getNumBranches() << " state(s), "
           << stringifyNormalizer(finalize.getNormalizer());
      }
      os << ", " << MaskScoreAnalysis(op).describe();
      // The location only: the op's IR (with operands printed as unknown
      // SSA values) is noise in a remark meant for users.
      emitRemark(op->getLoc(), text);
    });
  }
};

} // namespace
