//===- AttnToGPU.cpp - Tiled attention to a GPU kernel --------------------===//
//
// Code generation follows the structure the tiling left in the IR -- the
// grid, the KV loop and its bounds, the full/partial split, the number of
// branches and states, the regions -- through a KernelEmitter; nothing here
// depends on which attention variant it is.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "flashlight/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace flashlight {
#define GEN_PASS_DEF_ATTNTOGPU
#include "flashlight/Conversion/Passes.h.inc"
} // namespace flashlight

using namespace mlir;
using namespace flashlight::attn;
using namespace flashlight::attn_to_gpu;

namespace {

/// Converts one function whose body is a tiled attention.
LogicalResult convertFunction(func::FuncOp func, gpu::GPUModuleOp gpuModule,
                              scf::ForallOp forall) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ValueRange(ret.getOperands()) != ValueRange(forall.getResults()))
    return func.emitError("attn-to-gpu: the function must return exactly the "
                          "results of its attention (ops after the attention "
                          "are not supported yet)");
  auto blockM = forall->getAttrOfType<IntegerAttr>("attn.block_m");

  // Parameters: the function's tensors as memrefs, arguments then results.
  SmallVector<Type> params;
  auto toMemref = [](Type t) {
    auto tensor = cast<RankedTensorType>(t);
    return MemRefType::get(tensor.getShape(), tensor.getElementType());
  };
  for (Type t : func.getArgumentTypes())
    params.push_back(toMemref(t));
  for (Type t : func.getResultTypes())
    params.push_back(toMemref(t));

  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc = func.getLoc();
  auto kernel = gpu::GPUFuncOp::create(b, loc, func.getName(),
                                       b.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int64_t threads = blockM.getInt() * kWarpSize;
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  kernel->setAttr("flashlight.block_m", blockM);

  b.setInsertionPointToStart(&kernel.getBody().front());
  std::unique_ptr<KernelEmitter> owner = createRowPerWarpEmitter(b, loc);
  KernelEmitter &emitter = *owner;
  unsigned numArgs = func.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    emitter.memrefOf[func.getArgument(i)] = kernel.getArgument(i);
  // Each parallel_insert_slice names the output its source is stored to.
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    auto insert = cast<tensor::ParallelInsertSliceOp>(op);
    auto dest = cast<BlockArgument>(insert.getDest());
    unsigned result = dest.getArgNumber() - forall.getRank();
    Value source = insert.getSource();
    while (auto cast = source.getDefiningOp<tensor::CastOp>())
      source = cast.getSource();
    emitter.outputOf[source] = kernel.getArgument(numArgs + result);
  }
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value warpSize = arith::ConstantIndexOp::create(b, loc, kWarpSize);
  emitter.warp = arith::DivUIOp::create(b, loc, tid, warpSize);
  emitter.lane = arith::RemUIOp::create(b, loc, tid, warpSize);
  gpu::Dimension dims[] = {gpu::Dimension::z, gpu::Dimension::y,
                           gpu::Dimension::x};
  for (auto [iv, d] : llvm::zip(forall.getInductionVars(), dims))
    emitter.map.map(iv, gpu::BlockIdOp::create(b, loc, d).getResult());

  // Values the loop nest uses from before the forall (sizes, constants).
  if (failed(emitter.convertOps(func.getBody().front(), forall)) ||
      failed(emitter.convertOps(*forall.getBody())))
    return failure();
  gpu::ReturnOp::create(b, loc);
  return success();
}

/// `math.absi x` -> `maxsi(x, 0 - x)`: convert-gpu-to-nvvm lowers float
/// math through libdevice, which has no integer abs.
struct ExpandAbsI : OpRewritePattern<math::AbsIOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::AbsIOp op,
                                PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value zero = arith::ConstantOp::create(rewriter, loc,
                                           rewriter.getZeroAttr(op.getType()));
    Value neg = arith::SubIOp::create(rewriter, loc, zero, op.getOperand());
    rewriter.replaceOpWithNewOp<arith::MaxSIOp>(op, op.getOperand(), neg);
    return success();
  }
};

struct AttnToGPUPass : flashlight::impl::AttnToGPUBase<AttnToGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, scf::ForallOp>> work;
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<scf::ForallOp> foralls;
      func.walk([&](scf::ForallOp f) {
        if (f->hasAttr("attn.block_m"))
          foralls.push_back(f);
      });
      if (foralls.size() > 1) {
        func.emitError("attn-to-gpu: one attention per function is supported");
        return signalPassFailure();
      }
      if (!foralls.empty())
        work.push_back({func, foralls.front()});
    }
    if (work.empty())
      return;
    OpBuilder b(module.getBodyRegion());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    b.getUnitAttr());
    auto gpuModule =
        gpu::GPUModuleOp::create(b, module.getLoc(), "flashlight_kernels");
    for (auto [func, forall] : work) {
      if (failed(convertFunction(func, gpuModule, forall)))
        return signalPassFailure();
      func.erase();
    }
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandAbsI>(&getContext());
    if (failed(applyPatternsGreedily(gpuModule, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
