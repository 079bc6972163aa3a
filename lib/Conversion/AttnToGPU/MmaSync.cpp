//===- MmaSync.cpp - Tensor-core code generator ---------------------------===//
//
// The mma.sync generator lives in MmaSync.h (the wgmma generator derives
// from it); this file holds its factory and the tile-vote rule.
//
//===----------------------------------------------------------------------===//

#include "MmaSync.h"

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"

using namespace flashlight::attn_to_gpu;

bool flashlight::attn_to_gpu::votesOnTiles(OnlineStepOp step) {
  if (step.getMask().empty())
    return false;
  MaskKind kind = MaskScoreAnalysis(step).getMask().kind;
  return kind == MaskKind::DataDependent || kind == MaskKind::Custom;
}

bool flashlight::attn_to_gpu::separableBranches(Region &score,
                                                unsigned branches) {
  if (score.empty())
    return true;
  Block &block = score.front();
  for (auto [r, logit] :
       llvm::enumerate(block.getTerminator()->getOperands())) {
    SmallVector<Value> work = {logit};
    DenseSet<Value> seen;
    while (!work.empty()) {
      Value x = work.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(x)) {
        if (arg.getOwner() == &block && arg.getArgNumber() < branches &&
            arg.getArgNumber() != r)
          return false;
        continue;
      }
      // Region ops only: the score region is isolated from above.
      llvm::append_range(work, x.getDefiningOp()->getOperands());
    }
  }
  return true;
}

bool flashlight::attn_to_gpu::gathersPerElement(
    Region &region, ArrayRef<tensor::ExtractOp> except) {
  // Block arguments 1 and 2 are the batch and head: uniform per tile.
  return region
      .walk([&](tensor::ExtractOp extract) {
        if (llvm::is_contained(except, extract))
          return WalkResult::advance();
        bool perElement = llvm::any_of(extract.getIndices(), [](Value index) {
          auto arg = dyn_cast<BlockArgument>(index);
          return !arg || (arg.getArgNumber() != 1 && arg.getArgNumber() != 2);
        });
        return perElement ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

SmallVector<tensor::ExtractOp>
flashlight::attn_to_gpu::stagedTileReads(Region &score, unsigned numLeading) {
  SmallVector<tensor::ExtractOp> reads;
  if (score.empty())
    return reads;
  Block &block = score.front();
  auto isArg = [&](Value v, unsigned n) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &block && arg.getArgNumber() == n;
  };
  // Batch, head or a constant: one value for the whole block.
  auto isUniform = [&](Value index) {
    return isArg(index, numLeading) || isArg(index, numLeading + 1) ||
           index.getDefiningOp<arith::ConstantOp>();
  };
  block.walk([&](tensor::ExtractOp read) {
    auto type = cast<RankedTensorType>(read.getTensor().getType());
    int64_t rank = type.getRank();
    if (rank < 2 || reads.size() == kMaxStagedReads ||
        !isa<BlockArgument>(read.getTensor()) ||
        !isArg(read.getIndices()[rank - 1], numLeading + 3))
      return;
    Value row = read.getIndices()[rank - 2];
    if (!isArg(row, numLeading + 2) && !isUniform(row))
      return;
    // Rows of whole 16-byte chunks: a chunk is in the tensor or past it.
    int64_t bits = type.getElementTypeBitWidth(), n = type.getDimSize(rank - 1);
    if ((bits != 16 && bits != 32) || ShapedType::isDynamic(n) ||
        n * bits / 8 % 16 != 0)
      return;
    if (!llvm::all_of(read.getIndices().drop_back(2), isUniform))
      return;
    reads.push_back(read);
  });
  return reads;
}

bool flashlight::attn_to_gpu::stagedPerQuery(tensor::ExtractOp read) {
  auto step = read->getParentOfType<OnlineStepOp>();
  auto row = dyn_cast<BlockArgument>(read.getIndices().drop_back().back());
  return row && row.getOwner() == &step.getScore().front() &&
         row.getArgNumber() == step.getNumBranches() + 2;
}

int64_t flashlight::attn_to_gpu::stagedRowBytes(tensor::ExtractOp read,
                                                int64_t blockN) {
  return blockN * read.getType().getIntOrFloatBitWidth() / 8;
}

std::unique_ptr<KernelEmitter> flashlight::attn_to_gpu::createMmaSyncEmitter(
    OpBuilder &b, Location loc, const MmaTiles &tiles, int64_t threads,
    int64_t mTiles, const BlockMask &mask) {
  return std::make_unique<MmaSyncEmitter>(b, loc, tiles, threads, mTiles, mask);
}
