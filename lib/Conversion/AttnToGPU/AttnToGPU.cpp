//===- AttnToGPU.cpp - Tiled attention to a GPU kernel --------------------===//
//
// Code generation follows the structure the tiling left in the IR -- the
// grid, the KV loop and its bounds, the full/partial split, the number of
// branches and states, the regions -- through a KernelEmitter; nothing here
// depends on which attention variant it is.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"
#include "TileLayout.h"

#include "flashlight/Conversion/Passes.h"
#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"

#include "mlir/Analysis/DataFlow/IntegerRangeAnalysis.h"
#include "mlir/Analysis/DataFlow/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
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

/// The block id along `d` of a grid that is `gridSize` blocks along it:
/// when that is a constant, it bounds the id (integer range analysis then
/// knows the index math of static shapes).
gpu::BlockIdOp blockId(OpBuilder &b, Location loc, gpu::Dimension d,
                       OpFoldResult gridSize) {
  std::optional<int64_t> size = getConstantIntValue(gridSize);
  return gpu::BlockIdOp::create(b, loc, d,
                                size ? b.getIndexAttr(*size) : IntegerAttr());
}

/// The first online step in `forall` (null: none).
OnlineStepOp firstStep(scf::ForallOp forall) {
  OnlineStepOp step;
  forall.walk([&](OnlineStepOp s) {
    if (!step)
      step = s;
  });
  return step;
}

/// True if `v` is computed from `iv`.
bool dependsOn(Value v, Value iv) {
  SmallVector<Value> work = {v};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (x == iv)
      return true;
    if (!seen.insert(x).second)
      continue;
    if (Operation *def = x.getDefiningOp())
      llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// True if the KV range of a query tile grows with the tile's index: the
/// KV loop's upper bound depends on it and its lower bound does not (causal
/// and prefix masks; not a sliding window, whose range moves).
bool boundGrowsWithQueryTile(scf::ForallOp forall, OnlineStepOp step) {
  auto loop = step->getParentOfType<scf::ForOp>();
  Value tile = forall.getInductionVars().back();
  return loop && dependsOn(loop.getUpperBound(), tile) &&
         !dependsOn(loop.getLowerBound(), tile);
}

/// Converts the forall's body for work tile `tile` of its (batch, head,
/// query tile) space, query tiles fastest (the order blocks of a one-tile
/// grid start in) and, with `longestFirst`, reversed. The KV tiles it
/// visits are then in emitter.kvTiles.
LogicalResult convertWorkTile(OpBuilder &b, Location loc,
                              KernelEmitter &emitter, scf::ForallOp forall,
                              ArrayRef<Value> bounds, Value tile,
                              bool longestFirst) {
  // (Not a ValueRange: ForallOp returns the induction variables by value.)
  SmallVector<Value> ivs(forall.getInductionVars());
  Value rest = arith::DivUIOp::create(b, loc, tile, bounds[2]);
  Value queryTile = arith::RemUIOp::create(b, loc, tile, bounds[2]);
  if (longestFirst)
    queryTile = arith::SubIOp::create(
        b, loc,
        arith::SubIOp::create(b, loc, bounds[2],
                              arith::ConstantIndexOp::create(b, loc, 1)),
        queryTile);
  emitter.map.map(ivs[2], queryTile);
  emitter.map.map(ivs[1], arith::RemUIOp::create(b, loc, rest, bounds[1]));
  emitter.map.map(ivs[0], arith::DivUIOp::create(b, loc, rest, bounds[1]));
  emitter.kvTiles = Value();
  if (failed(emitter.convertOps(*forall.getBody())))
    return failure();
  if (!emitter.kvTiles)
    return forall.emitError("attn-to-gpu: a persistent kernel needs a KV "
                            "loop");
  return success();
}

/// The work-tile loop of a persistent kernel with a tile counter: each side
/// learns the block's next work tile from the emitter (the producer draws
/// it, the consumers read it) until it is past the last one, carrying the
/// KV tiles and the work tiles the block visited.
LogicalResult emitCountedTiles(OpBuilder &b, Location loc,
                               KernelEmitter &emitter, scf::ForallOp forall,
                               ArrayRef<Value> bounds, Value total,
                               bool longestFirst) {
  Type index = b.getIndexType();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  auto loop = scf::WhileOp::create(b, loc, TypeRange{index, index, index},
                                   ValueRange{zero, zero});
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before =
        b.createBlock(&loop.getBefore(), {}, {index, index}, {loc, loc});
    Value tile = emitter.nextWorkTile(before->getArgument(1), total);
    if (!tile)
      return forall.emitError("attn-to-gpu: the code generator has no tile "
                              "counter");
    Value more =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tile, total);
    scf::ConditionOp::create(
        b, loc, more,
        ValueRange{before->getArgument(0), before->getArgument(1), tile});
    Block *after = b.createBlock(&loop.getAfter(), {}, {index, index, index},
                                 {loc, loc, loc});
    emitter.tileBase = after->getArgument(0);
    emitter.workIndex = after->getArgument(1);
    if (failed(convertWorkTile(b, loc, emitter, forall, bounds,
                               after->getArgument(2), longestFirst)))
      return failure();
    scf::YieldOp::create(
        b, loc,
        ValueRange{
            arith::AddIOp::create(b, loc, after->getArgument(0),
                                  emitter.kvTiles),
            arith::AddIOp::create(b, loc, after->getArgument(1),
                                  arith::ConstantIndexOp::create(b, loc, 1))});
  }
  emitter.endWorkTiles();
  return success();
}

/// The body of a persistent kernel: block x takes work tiles x, x + grid,
/// x + 2 grid, .. of the forall's (batch, head, query tile) space, or with
/// a tile counter those it draws, longest first where the KV range grows
/// with the query tile; each side of the emitter's fork converts the
/// forall's body per work tile. Both count the KV tiles and the work tiles
/// the block visited (the mbarriers' phases go on across work tiles).
LogicalResult emitPersistentBody(OpBuilder &b, Location loc,
                                 KernelEmitter &emitter, scf::ForallOp forall) {
  SmallVector<Value> bounds;
  for (OpFoldResult bound : forall.getMixedUpperBound()) {
    Value v = getValueOrCreateConstantIndexOp(b, loc, bound);
    bounds.push_back(emitter.map.lookupOrDefault(v));
  }
  // The mbarriers' phases count one KV loop's tiles per work tile.
  int64_t kvLoops = 0;
  for (Operation &op : forall.getBody()->without_terminator())
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      bool steps = false;
      loop.walk([&](OnlineStepOp) { steps = true; });
      kvLoops += steps;
    }
  if (kvLoops != 1)
    return forall.emitError("attn-to-gpu: a persistent kernel takes one KV "
                            "loop, not ")
           << kvLoops;
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value total = arith::MulIOp::create(
      b, loc, arith::MulIOp::create(b, loc, bounds[0], bounds[1]), bounds[2]);
  if (emitter.tileCounter) {
    OnlineStepOp step = firstStep(forall);
    bool longestFirst = step && boundGrowsWithQueryTile(forall, step);
    if (failed(emitter.emitPersistent([&] {
          return emitCountedTiles(b, loc, emitter, forall, bounds, total,
                                  longestFirst);
        })))
      return forall.emitError("attn-to-gpu: the persistent kernel could not "
                              "be emitted");
    return success();
  }
  auto loopOverTiles = [&]() -> LogicalResult {
    Value first = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value stride = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    auto loop = scf::ForOp::create(b, loc, first, total, stride,
                                   ValueRange{idx(0), idx(0)});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    ValueRange counts = loop.getRegionIterArgs();
    emitter.tileBase = counts[0];
    emitter.workIndex = counts[1];
    if (failed(convertWorkTile(b, loc, emitter, forall, bounds,
                               loop.getInductionVar(),
                               /*longestFirst=*/false)))
      return failure();
    scf::YieldOp::create(
        b, loc,
        ValueRange{arith::AddIOp::create(b, loc, counts[0], emitter.kvTiles),
                   arith::AddIOp::create(b, loc, counts[1], idx(1))});
    return success();
  };
  if (failed(emitter.emitPersistent(loopOverTiles)))
    return forall.emitError("attn-to-gpu: the persistent kernel could not be "
                            "emitted");
  return success();
}

/// Walks `func` (a tiled attention) into `kernel`'s body with `emitter`, the
/// builder being at the body's start. The forall's (b, h, query tile) are
/// block ids (z, y) and `queryTile` (null: block id x). `outputs`: the
/// kernel has the function's results as parameters.
LogicalResult emitKernelBody(OpBuilder &b, KernelEmitter &emitter,
                             gpu::GPUFuncOp kernel, func::FuncOp func,
                             scf::ForallOp forall, Value queryTile,
                             bool outputs) {
  Location loc = func.getLoc();
  unsigned numArgs = func.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    emitter.memrefOf[func.getArgument(i)] = kernel.getArgument(i);
  // Each parallel_insert_slice names the output its source is stored to.
  SmallVector<Value> terms;
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    if (!outputs)
      break;
    // The key-side product and the terms: the launcher zeroes their outputs
    // (the manifest says so), which must be what the forall starts from.
    if (auto acc = dyn_cast<ParallelAccumulateOp>(op)) {
      unsigned result =
          cast<BlockArgument>(acc.getDest()).getArgNumber() - forall.getRank();
      auto fill = forall.getOutputs()[result].getDefiningOp<linalg::FillOp>();
      FloatAttr zero;
      if (!fill || !matchPattern(fill.value(), m_Constant(&zero)) ||
          !zero.getValue().isZero())
        return acc.emitError("attn-to-gpu: a key-side product or a term "
                             "must start from zeros");
      // Terms add whole tensors (no offsets), the key side at (b, h).
      if (acc.getOffsets().empty()) {
        terms.push_back(kernel.getArgument(numArgs + result));
        continue;
      }
      if (failed(
              emitter.setKeySide(kernel.getArgument(numArgs + result), func)))
        return failure();
      continue;
    }
    auto insert = cast<tensor::ParallelInsertSliceOp>(op);
    auto dest = cast<BlockArgument>(insert.getDest());
    unsigned result = dest.getArgNumber() - forall.getRank();
    Value source = insert.getSource();
    while (auto cast = source.getDefiningOp<tensor::CastOp>())
      source = cast.getSource();
    emitter.outputOf[source] = kernel.getArgument(numArgs + result);
  }
  if (!terms.empty())
    emitter.setTerms(terms, func);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value warpSize = arith::ConstantIndexOp::create(b, loc, kThreadsPerWarp);
  emitter.thread = tid;
  emitter.warp = arith::DivUIOp::create(b, loc, tid, warpSize);
  emitter.lane = arith::RemUIOp::create(b, loc, tid, warpSize);
  gpu::Dimension dims[] = {gpu::Dimension::z, gpu::Dimension::y,
                           gpu::Dimension::x};
  auto plan = forall->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
  bool persistent = outputs && plan && plan.getPersistent();
  if (persistent && !plan.getProducer())
    return forall.emitError("attn-to-gpu: a persistent kernel needs the "
                            "producer warpgroup");
  if (persistent && queryTile)
    return forall.emitError("attn-to-gpu: a persistent kernel orders its "
                            "work tiles itself");
  if (emitter.tileCounter && !persistent)
    return forall.emitError("attn-to-gpu: a tile counter needs a persistent "
                            "kernel");
  if (plan && plan.getQueryAhead() && !persistent)
    return forall.emitError("attn-to-gpu: query_ahead needs a persistent "
                            "kernel");
  if (!persistent)
    for (auto [iv, d, bound] : llvm::zip(forall.getInductionVars(), dims,
                                         forall.getMixedUpperBound()))
      emitter.map.map(iv, d == gpu::Dimension::x && queryTile
                              ? queryTile
                              : blockId(b, loc, d, bound).getResult());

  // Values the loop nest uses from before the forall (sizes, constants).
  if (failed(emitter.convertOps(func.getBody().front(), forall)))
    return failure();
  if (persistent ? failed(emitPersistentBody(b, loc, emitter, forall))
                 : failed(emitter.convertOps(*forall.getBody())))
    return failure();
  gpu::ReturnOp::create(b, loc);
  return success();
}

/// A kernel parameter for tensor type `t`: a memref of its shape, with the
/// plan's `runtime_strides` strides that are runtime values (the memref
/// descriptor's), the innermost one 1, so that the caller's layout (BNHD
/// storage seen as BHND, packed QKV, a transposed view) reaches the kernel
/// without a copy; else contiguous.
MemRefType kernelParamType(Type t, KernelPlanAttr plan) {
  auto tensor = cast<RankedTensorType>(t);
  if (tensor.getRank() == 0 || !plan.getRuntimeStrides())
    return MemRefType::get(tensor.getShape(), tensor.getElementType());
  SmallVector<int64_t> strides(tensor.getRank(), ShapedType::kDynamic);
  strides.back() = 1;
  return MemRefType::get(
      tensor.getShape(), tensor.getElementType(),
      StridedLayoutAttr::get(tensor.getContext(), /*offset=*/0, strides));
}

/// Threads per block of the block-mask pre-kernel.
constexpr int64_t kBlockMaskThreads = 128;

/// Emits `<kernel>_block_mask`, the pre-kernel writing `mask`'s buffer for
/// the tiled attention `func`. Its parameters are the function's arguments,
/// then the buffer (`maskType`).
LogicalResult emitBlockMaskKernel(OpBuilder &b, func::FuncOp func,
                                  scf::ForallOp forall, Type maskType,
                                  BlockMask mask) {
  Location loc = func.getLoc();
  SmallVector<Type> params;
  auto plan = forall->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
  for (Type t : func.getArgumentTypes())
    params.push_back(kernelParamType(t, plan));
  params.push_back(maskType);
  auto kernel =
      gpu::GPUFuncOp::create(b, loc, (func.getName() + "_block_mask").str(),
                             b.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(kBlockMaskThreads), 1, 1}));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&kernel.getBody().front());
  mask.memref = kernel.getArgument(params.size() - 1);
  // Block id x = query tile * N tiles + KV tile.
  Value tiles = memref::DimOp::create(b, loc, mask.memref, 3);
  Value x = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value kvTile = arith::RemUIOp::create(b, loc, x, tiles);
  std::unique_ptr<KernelEmitter> emitter =
      createBlockMaskEmitter(b, loc, mask, kvTile, kBlockMaskThreads);
  return emitKernelBody(b, *emitter, kernel, func, forall,
                        arith::DivUIOp::create(b, loc, x, tiles),
                        /*outputs=*/false);
}

/// Views of the dynamic shared memory: the tensor-core generators' tiles,
/// carved one after the other (the shared-memory plan of a kernel).
class SharedMemoryPlan {
public:
  /// Starts at the kernel's dynamic shared memory; `swizzled` tiles (wgmma's)
  /// start at the next kSwizzleAlignment boundary past the base.
  SharedMemoryPlan(OpBuilder &b, Location loc, bool swizzled)
      : b(b), loc(loc), swizzled(swizzled) {
    smem = gpu::AddressSpaceAttr::get(b.getContext(),
                                      gpu::AddressSpace::Workgroup);
    base = gpu::DynamicSharedMemoryOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                        MemRefLayoutAttrInterface(), smem));
    shift = arith::ConstantIndexOp::create(b, loc, 0);
    if (!swizzled)
      return;
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base);
    Value atom =
        arith::ConstantIndexOp::create(b, loc, ArchInfo::kSwizzleAlignment);
    shift = arith::RemUIOp::create(
        b, loc,
        arith::SubIOp::create(b, loc, atom,
                              arith::RemUIOp::create(b, loc, address, atom)),
        atom);
  }

  /// The next buffer starts at a multiple of `alignment` bytes from the
  /// (swizzle-aligned) start.
  void align(int64_t alignment) { bytes = llvm::alignTo(bytes, alignment); }

  /// The next buffer of `shape` `element`s.
  Value carve(ArrayRef<int64_t> shape, Type element) {
    auto type =
        MemRefType::get(shape, element, MemRefLayoutAttrInterface(), smem);
    Value view = memref::ViewOp::create(
        b, loc, type, base,
        arith::AddIOp::create(b, loc, shift,
                              arith::ConstantIndexOp::create(b, loc, bytes)),
        ValueRange{});
    bytes += type.getNumElements() * element.getIntOrFloatBitWidth() / 8;
    return view;
  }

  /// A staging tile for `rows` rows of `of` (a [B, H, N, D] tensor), in
  /// `buffers` buffers: padded rows for mma.sync, 128-byte swizzled atoms for
  /// wgmma (TileLayout.h).
  Value tile(Value of, int64_t rows, int64_t buffers) {
    auto t = cast<RankedTensorType>(of.getType());
    TileLayout layout = swizzled
                            ? TileLayout::swizzled(t.getElementTypeBitWidth())
                            : TileLayout::padded();
    return carve(layout.shape(rows, t.getDimSize(3), buffers),
                 t.getElementType());
  }

  /// The bytes the kernel must request: those carved, plus the alignment
  /// the shift may skip.
  int64_t requested() const {
    return bytes + (swizzled ? ArchInfo::kSwizzleAlignment : 0);
  }

private:
  OpBuilder &b;
  Location loc;
  bool swizzled;
  Attribute smem;
  Value base, shift;
  int64_t bytes = 0;
};

/// Lays out the tensor-core generators' shared memory for `step` as `plan`
/// says: K and V tiles (Q's where it stays in shared memory), the
/// mbarriers of the decoupled loop, the relative-position tables and the
/// tiles wgmma stages with K.
MmaTiles layoutTiles(SharedMemoryPlan &smem, OpBuilder &b, OnlineStepOp step,
                     KernelPlanAttr plan) {
  bool wgmma = plan.getGenerator() == Generator::wgmma;
  MmaTiles tiles;
  for (Value key : step.getKeys())
    tiles.keys.push_back(smem.tile(key, plan.getBlockN(), 2));
  tiles.values = smem.tile(step.getValue(), plan.getBlockN(), 2);
  if (plan.getQueryInSmem())
    for (Value query : step.getQueries())
      tiles.queries.push_back(
          smem.tile(query, plan.getBlockM(), plan.getQueryAhead() ? 2 : 1));
  // The key-side product's weights, a buffer per consumer warpgroup (before
  // the barriers: swizzled tiles and TMA boxes stay 1024-byte aligned).
  if (step.getKeySide() && wgmma) {
    auto query = cast<RankedTensorType>(step.getQueries()[0].getType());
    int64_t bits = query.getElementTypeBitWidth();
    int64_t lines = ArchInfo::keySideLines(
        plan.getBlockN(), query.getDimSize(3), bits, plan.getBulkKeySide());
    tiles.keySideWeights = smem.carve(
        {plan.getConsumerGroups() * lines, ArchInfo::atomElements(bits)},
        query.getElementType());
  }
  if (plan.getLoop() == LoopForm::mbarrier)
    tiles.barriers = smem.carve(
        {ArchInfo::barrierWords(plan.getProducer(), plan.getQueryAhead(),
                                plan.getTileCounter())},
        b.getI64Type());
  // The relative-position tables (MmaSync.h's fillRelativeTable).
  unsigned branches = step.getNumBranches();
  if (RelativeTerms relative = relativeTerms(step.getScore(), branches)) {
    int64_t rows = plan.getWarpRows();
    int64_t threads =
        wgmma ? plan.getConsumerGroups() * ArchInfo::kThreadsPerWarpgroup
              : plan.getThreads();
    int64_t entries = ArchInfo::relativeTableEntries(
        threads / ArchInfo::kThreadsPerWarp, relative.terms.size(),
        plan.getBlockN(), rows);
    tiles.relative = smem.carve({entries}, b.getF32Type());
  }
  // wgmma: the pair-bias-like reads the plan stages with K (the first
  // staged_reads of them: those that fit in sm_90a's budget).
  SmallVector<tensor::ExtractOp> staged =
      stagedTileReads(step.getScore(), branches);
  staged.truncate(std::min<size_t>(staged.size(), plan.getStagedReads()));
  for (tensor::ExtractOp read : staged) {
    int64_t row = stagedRowBytes(read, plan.getBlockN());
    int64_t rows = stagedPerQuery(read) ? plan.getBlockM() : 1;
    tiles.stagedReads.push_back(read);
    smem.align(ArchInfo::kStagedTileAlignment);
    tiles.staged.push_back(
        smem.carve({2 * rows, row * 8 / read.getType().getIntOrFloatBitWidth()},
                   read.getType()));
  }
  return tiles;
}

/// Checks that the tiled loop nest has what `plan` relies on (its KV loop,
/// an online step), which attn-plan predicted from the program's shapes.
LogicalResult checkPlan(func::FuncOp func, scf::ForallOp forall,
                        OnlineStepOp step, KernelPlanAttr plan) {
  if (!plan.usesTensorCores())
    return success();
  if (!step)
    return func.emitError("attn-to-gpu: the kernel plan uses tensor cores but "
                          "the tiled attention has no online step");
  bool loopNeeded = plan.getLoop() != LoopForm::barrier || plan.hasBlockMask();
  if (loopNeeded && !step->getParentOfType<scf::ForOp>())
    return func.emitError("attn-to-gpu: the kernel plan needs a KV loop, "
                          "which the tiled attention does not have");
  return success();
}

/// The kernel function for `func` with `params`, its launch attributes
/// from `plan`.
gpu::GPUFuncOp createKernel(OpBuilder &b, func::FuncOp func,
                            ArrayRef<Type> params, KernelPlanAttr plan) {
  auto kernel = gpu::GPUFuncOp::create(b, func.getLoc(), func.getName(),
                                       b.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(plan.getThreads()), 1, 1}));
  if (plan.getMinBlocks())
    kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    b.getI32IntegerAttr(plan.getMinBlocks()));
  kernel->setAttr(kKernelPlanAttrName, plan);
  return kernel;
}

/// The block id x's query tile: when a query tile's KV range grows with
/// its index (causal), the grid runs the longest tiles first, so that the
/// short ones fill the tail (null: block id x itself).
Value queryTileOrder(OpBuilder &b, Location loc, scf::ForallOp forall,
                     OnlineStepOp step, KernelPlanAttr plan) {
  if (!plan.usesTensorCores() || !step ||
      !boundGrowsWithQueryTile(forall, step))
    return Value();
  OpFoldResult tiles = forall.getMixedUpperBound().back();
  std::optional<int64_t> size = getConstantIntValue(tiles);
  Value x = blockId(b, loc, gpu::Dimension::x, tiles);
  Value gridSize =
      size ? Value(arith::ConstantIndexOp::create(b, loc, *size))
           : Value(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
  Value last = arith::SubIOp::create(b, loc, gridSize,
                                     arith::ConstantIndexOp::create(b, loc, 1));
  return arith::SubIOp::create(b, loc, last, x);
}

/// Converts one function whose body is a tiled attention, as the plan the
/// loop nest carries says: parameters, the kernel, its shared memory and
/// code generator, the body, and the block-mask pre-kernel.
LogicalResult convertFunction(func::FuncOp func, gpu::GPUModuleOp gpuModule,
                              scf::ForallOp forall) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ValueRange(ret.getOperands()) != ValueRange(forall.getResults()))
    return func.emitError("attn-to-gpu: the function must return exactly the "
                          "results of its attention (ops after the attention "
                          "are not supported yet)");
  auto plan = forall->getAttrOfType<KernelPlanAttr>(kKernelPlanAttrName);
  OnlineStepOp step = firstStep(forall);
  if (failed(checkPlan(func, forall, step, plan)))
    return failure();

  // Parameters: the function's tensors as memrefs, arguments then results,
  // then the block mask (an i8 buffer both kernels take).
  SmallVector<Type> params;
  auto toMemref = [&](Type t) { return kernelParamType(t, plan); };
  llvm::append_range(params,
                     llvm::map_range(func.getArgumentTypes(), toMemref));
  llvm::append_range(params, llvm::map_range(func.getResultTypes(), toMemref));
  unsigned maskParam = params.size();
  if (plan.hasBlockMask())
    params.push_back(
        MemRefType::get(SmallVector<int64_t>(4, ShapedType::kDynamic),
                        IntegerType::get(func.getContext(), 8)));
  // The tile counter: the next work tile to draw, and the blocks done.
  if (plan.getTileCounter())
    params.push_back(
        MemRefType::get({2}, IntegerType::get(func.getContext(), 32)));

  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc = func.getLoc();
  gpu::GPUFuncOp kernel = createKernel(b, func, params, plan);
  BlockMask mask;
  if (plan.hasBlockMask()) {
    mask = blockMaskOf(step, plan.getBlockM(), plan.getBlockN());
    mask.memref = kernel.getArgument(maskParam);
    kernel->setAttr(
        "flashlight.block_mask",
        b.getDictionaryAttr(
            {b.getNamedAttr(
                 "kernel",
                 b.getStringAttr((func.getName() + "_block_mask").str())),
             b.getNamedAttr("batch", b.getBoolAttr(mask.batch)),
             b.getNamedAttr("heads", b.getBoolAttr(mask.heads)),
             b.getNamedAttr("block", b.getI64IntegerAttr(kBlockMaskThreads))}));
  }

  b.setInsertionPointToStart(&kernel.getBody().front());
  std::unique_ptr<KernelEmitter> emitter;
  if (plan.usesTensorCores()) {
    bool wgmma = plan.getGenerator() == Generator::wgmma;
    SharedMemoryPlan smem(b, loc, /*swizzled=*/wgmma);
    MmaTiles tiles = layoutTiles(smem, b, step, plan);
    if (smem.requested() != plan.getSharedMemory())
      return func.emitError()
             << "attn-to-gpu: the kernel plan's " << plan.getSharedMemory()
             << " bytes of shared memory disagree with its layout's "
             << smem.requested();
    kernel->setAttr("flashlight.dynamic_shared_memory",
                    b.getI64IntegerAttr(smem.requested()));
    // cp.async copies 16 bytes, and the output is stored in element pairs.
    kernel->setAttr("flashlight.pointer_alignment", b.getI64IntegerAttr(16));
    if (!wgmma && step.getKeySide())
      return func.emitError("attn-to-gpu: mma.sync has no key-side product "
                            "(attn-plan takes the reference kernel for it)");
    emitter = wgmma ? createWgmmaEmitter(b, loc, tiles, plan, mask)
                    : createMmaSyncEmitter(b, loc, tiles, plan, mask);
  } else {
    emitter = createRowPerWarpEmitter(b, loc);
  }
  if (plan.getTileCounter())
    emitter->tileCounter = kernel.getArgument(params.size() - 1);
  // A persistent kernel orders its work tiles itself.
  Value queryTile = plan.getPersistent()
                        ? Value()
                        : queryTileOrder(b, loc, forall, step, plan);
  if (failed(emitKernelBody(b, *emitter, kernel, func, forall, queryTile,
                            /*outputs=*/true)))
    return failure();
  if (!mask.memref)
    return success();
  b.setInsertionPointAfter(kernel);
  return emitBlockMaskKernel(b, func, forall, mask.memref.getType(), mask);
}

/// Index math is 64-bit, and so is an `index_cast` a user region converts
/// to a float (ALiBi's `(j - i) as f32`): on the GPU, a 64-bit integer to
/// float conversion runs at a quarter of the 32-bit rate, per element. Where
/// integer range analysis proves the integer fits in 32 bits (static shapes,
/// bounded block ids), convert from 32 bits instead.
LogicalResult narrowIntToFloat(Operation *root) {
  DataFlowSolver solver;
  dataflow::loadBaselineAnalyses(solver);
  solver.load<dataflow::IntegerRangeAnalysis>();
  if (failed(solver.initializeAndRun(root)))
    return failure();
  // Signed conversions need the value in i32's range, unsigned ones in
  // [0, INT32_MAX] (the same bits then mean the same number).
  auto fitsIn32 = [&](Value v, bool isSigned) {
    auto *lattice = solver.lookupState<dataflow::IntegerValueRangeLattice>(v);
    if (!lattice || lattice->getValue().isUninitialized())
      return false;
    const ConstantIntRanges &range = lattice->getValue().getValue();
    return range.smin().getSExtValue() >= (isSigned ? INT32_MIN : 0) &&
           range.smax().getSExtValue() <= INT32_MAX;
  };
  SmallVector<std::pair<Operation *, Value>> work;
  root->walk([&](Operation *op) {
    if (!isa<arith::SIToFPOp, arith::UIToFPOp>(op))
      return;
    // index -> i64 is the identity (index is 64-bit in the kernels).
    auto cast = op->getOperand(0).getDefiningOp<arith::IndexCastOp>();
    if (cast && cast.getType().getIntOrFloatBitWidth() == 64 &&
        fitsIn32(cast.getIn(), isa<arith::SIToFPOp>(op)))
      work.push_back({op, cast.getIn()});
  });
  for (auto [op, index] : work) {
    OpBuilder b(op);
    Value narrow =
        arith::IndexCastOp::create(b, op->getLoc(), b.getI32Type(), index);
    Value wide = isa<arith::SIToFPOp>(op)
                     ? arith::SIToFPOp::create(
                           b, op->getLoc(), op->getResult(0).getType(), narrow)
                           .getResult()
                     : arith::UIToFPOp::create(
                           b, op->getLoc(), op->getResult(0).getType(), narrow)
                           .getResult();
    op->getResult(0).replaceAllUsesWith(wide);
    op->erase();
  }
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
  using AttnToGPUBase::AttnToGPUBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<func::FuncOp, scf::ForallOp>> work;
    for (auto func : module.getOps<func::FuncOp>()) {
      SmallVector<scf::ForallOp> foralls;
      func.walk([&](scf::ForallOp f) {
        if (f->hasAttr(kKernelPlanAttrName))
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
    if (failed(applyPatternsGreedily(gpuModule, std::move(patterns))) ||
        failed(narrowIntToFloat(gpuModule)))
      return signalPassFailure();
  }
};

} // namespace
