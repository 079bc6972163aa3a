//===- MmaSync.cpp - Tensor-core code generator ---------------------------===//
//
// The mma.sync generator lives in MmaSync.h (the wgmma generator derives
// from it); this file holds its factory.
//
//===----------------------------------------------------------------------===//

#include "MmaSync.h"

using namespace flashlight::attn_to_gpu;

std::unique_ptr<KernelEmitter> flashlight::attn_to_gpu::createMmaSyncEmitter(
    OpBuilder &b, Location loc, const MmaTiles &tiles, KernelPlanAttr plan,
    const BlockMask &mask) {
  return std::make_unique<MmaSyncEmitter>(b, loc, tiles, plan, mask);
}
