//===- HostFuse.cpp - Fuse the reference path's elementwise chains -------===//

#include "flashlight/Conversion/HostToGPU.h"
#include "flashlight/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace flashlight {
#define GEN_PASS_DEF_HOSTFUSE
#include "flashlight/Conversion/Passes.h.inc"
} // namespace flashlight

using namespace mlir;

namespace {

/// Whether `op` is a generic whose loops are all parallel.
bool isElementwise(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic && generic.getNumReductionLoops() == 0;
}

struct HostFusePass : flashlight::impl::HostFuseBase<HostFusePass> {
  using HostFuseBase::HostFuseBase;
  void runOnOperation() override {
    // Elementwise into elementwise, where the producer has no other user:
    // nothing is computed twice, and reductions keep their kernels.
    linalg::ControlFusionFn control = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      return isElementwise(producer) && isElementwise(fused->getOwner()) &&
             producer->hasOneUse();
    };
    for (func::FuncOp func : flashlight::hostFunctions(getOperation())) {
      RewritePatternSet patterns(&getContext());
      linalg::populateElementwiseOpsFusionPatterns(patterns, control);
      if (failed(applyPatternsGreedily(func, std::move(patterns))))
        return signalPassFailure();
    }
  }
};

} // namespace
