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

bool flashlight::attn_to_gpu::gathersPerElement(Region &region) {
  // Block arguments 1 and 2 are the batch and head: uniform per tile.
  return region
      .walk([](tensor::ExtractOp extract) {
        bool perElement = llvm::any_of(extract.getIndices(), [](Value index) {
          auto arg = dyn_cast<BlockArgument>(index);
          return !arg || (arg.getArgNumber() != 1 && arg.getArgNumber() != 2);
        });
        return perElement ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

std::unique_ptr<KernelEmitter> flashlight::attn_to_gpu::createMmaSyncEmitter(
    OpBuilder &b, Location loc, const MmaTiles &tiles, int64_t threads,
    int64_t mTiles, const BlockMask &mask) {
  return std::make_unique<MmaSyncEmitter>(b, loc, tiles, threads, mTiles, mask);
}
