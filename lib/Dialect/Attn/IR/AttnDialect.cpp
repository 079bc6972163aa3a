//===- AttnDialect.cpp - The attn dialect ---------------------------------===//

#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace flashlight::attn;

#include "flashlight/Dialect/Attn/IR/AttnDialect.cpp.inc"
#include "flashlight/Dialect/Attn/IR/AttnEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "flashlight/Dialect/Attn/IR/AttnAttrs.cpp.inc"

void AttnDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "flashlight/Dialect/Attn/IR/AttnAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "flashlight/Dialect/Attn/IR/AttnOps.cpp.inc"
      >();
}

int64_t KernelPlanAttr::getThreads() const {
  constexpr int64_t threadsPerWarp = 32, warpgroupRows = 64,
                    threadsPerWarpgroup = 128;
  switch (getGenerator()) {
  case Generator::reference:
  case Generator::mma_sync:
    return getBlockM() / getWarpRows() * threadsPerWarp;
  case Generator::wgmma:
    return getBlockM() / warpgroupRows * threadsPerWarpgroup +
           (getProducer() ? threadsPerWarpgroup : 0);
  }
  llvm_unreachable("unknown generator");
}

KernelPlanAttr KernelPlanAttr::getReference(MLIRContext *context,
                                            int64_t blockM, int64_t blockN,
                                            bool runtimeStrides) {
  return get(context, Generator::reference, blockM, blockN, /*warp_rows=*/1,
             /*consumer_groups=*/0, /*producer=*/false, LoopForm::barrier,
             /*ping_pong=*/false, /*lookahead=*/false, Sparsity::none,
             /*query_in_smem=*/false, /*staged_reads=*/0,
             /*shared_memory=*/0, /*min_blocks=*/0,
             /*producer_registers=*/0, /*consumer_registers=*/0, runtimeStrides,
             /*aligned_lengths=*/false, /*persistent=*/false,
             /*query_ahead=*/false, /*tma=*/false,
             /*bulk_key_side=*/false, /*tile_counter=*/false);
}

AttentionOp flashlight::attn::getSoleAttention(ModuleOp module,
                                               llvm::StringRef pass) {
  SmallVector<AttentionOp> ops;
  module.walk([&](AttentionOp op) { ops.push_back(op); });
  if (ops.size() == 1)
    return ops.front();
  module.emitError(pass) << ": expected one attention in the program, found "
                         << ops.size();
  return nullptr;
}
