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

/// Dynamic shared memory a block may use on sm_80 (163 KB; sm_90a allows
/// 227 KB): the tensor-core tiles must fit on either.
constexpr int64_t kMaxSharedMemory = 166912;
/// sm_90a's (227 KB): what wgmma's kernels (sm_90a only) may add on top,
/// for staged tiles.
constexpr int64_t kMaxSharedMemoryHopper = 232448;

std::optional<std::string>
flashlight::tensorCoreIneligibility(ValueRange keys, Value value, Region &score,
                                    int64_t blockM, int64_t blockN) {
  unsigned branches = keys.size();
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  SmallVector<int64_t> headDims;
  for (Value v : llvm::concat<const Value>(keys, ValueRange(value)))
    headDims.push_back(cast<RankedTensorType>(v.getType()).getDimSize(3));
  if (!element.isF16() && !element.isBF16())
    return std::string("Q/K/V are not f16 or bf16");
  // Q.K may be wider than V (folded extra contractions): Q then stays in
  // shared memory.
  for (auto [n, d] : llvm::enumerate(headDims)) {
    int64_t most = n + 1 == headDims.size() ? 128 : 256;
    if (ShapedType::isDynamic(d) || d % 16 != 0 || d > most)
      return "head dim " + std::to_string(d) +
             " is not a multiple of 16 up to " + std::to_string(most);
  }
  if ((blockM != 64 && blockM != 128 && blockM != 192 && blockM != 256) ||
      (blockN != 32 && blockN != 64 && blockN != 128))
    return "tiles are " + std::to_string(blockM) + "x" +
           std::to_string(blockN) +
           " (block-m 64, 128 or 256, block-n 32, 64 or 128)";
  // Shared memory, as the larger of the two generators lays it out: wgmma
  // has per branch a Q tile and two K tiles, and two V tiles; mma.sync pads
  // rows by 8 elements and has one K and V tile (Q's at most). Plus 1024
  // bytes of alignment slack, the mbarriers and the relative-position
  // tables.
  int64_t dv = headDims.back();
  int64_t wgmma = 2 * blockN * dv, mma = blockN * (dv + 8);
  for (int64_t d : ArrayRef<int64_t>(headDims).drop_back()) {
    wgmma += (blockM + 2 * blockN) * llvm::alignTo(d, 64);
    mma += (blockM + blockN) * (d + 8);
  }
  int64_t elements = std::max(wgmma, mma);
  int64_t bytes =
      elements * element.getIntOrFloatBitWidth() / 8 + 1024 + 64 +
      attn_to_gpu::relativeTableBytes(score, branches, blockM, blockN);
  if (bytes > kMaxSharedMemory)
    return "its tiles (" + std::to_string(branches) + " logit branches) need " +
           std::to_string(bytes) + " bytes of shared memory (at most " +
           std::to_string(kMaxSharedMemory) + ")";
  return std::nullopt;
}

/// tensorCoreTiles' choice by the program's structure, before the shared
/// memory check.
static std::pair<int64_t, int64_t>
preferredTiles(flashlight::attn::AttentionOp op, bool wgmma, bool blockMask,
               bool threeWarpgroups) {
  using namespace flashlight;
  attn::MaskScoreAnalysis analysis(op);
  attn::MaskKind mask = analysis.getMask().kind;
  bool lean = op.getScore().empty() &&
              (mask == attn::MaskKind::None || mask == attn::MaskKind::Causal ||
               mask == attn::MaskKind::Prefix);
  // The smallest head dim, and whether every one is whole 64-column atoms
  // (wgmma's).
  int64_t dqk = std::numeric_limits<int64_t>::max();
  bool atoms = true;
  Value value = op.getValue();
  for (Value v : llvm::concat<const Value>(op.getKeys(), ValueRange(value))) {
    int64_t d = cast<RankedTensorType>(v.getType()).getDimSize(3);
    dqk = std::min(dqk, d);
    atoms &= d % 64 == 0;
  }
  int64_t dv = cast<RankedTensorType>(op.getValue().getType()).getDimSize(3);
  // Data-dependent masks without a score region get a block mask (unless
  // `blockMask` is off; the tile vote keeps 64x64): the kernel then
  // evaluates the mask on partial tiles only, and 128x128 tiles ran fastest
  // for document masks at D = 64 and 128 (64x64: 0.6-0.7x, 128x64:
  // 0.75-0.85x; docs/benchmarks).
  bool blockMasked =
      blockMask && op.getScore().empty() &&
      (mask == attn::MaskKind::DataDependent || mask == attn::MaskKind::Custom);
  if (blockMasked && wgmma && atoms)
    return {128, 128};
  // Several logit branches at D = 64: 128 x 128 tiles, so that the
  // producer warpgroup and ping-pong apply: 1.00-1.11x one warpgroup on
  // 64 x 64 (differential, causal, N = 2k / 8k, H100), which itself had
  // run 1.245x two warpgroups on 128 x 64 without them.
  if (op.getNumBranches() > 1 && wgmma && atoms && dv <= 64)
    return {128, 128};
  bool plainMask = mask == attn::MaskKind::None ||
                   mask == attn::MaskKind::Causal ||
                   mask == attn::MaskKind::Prefix;
  // Long sequences at D = 64 with one branch, a plain mask and a score of
  // plain arithmetic (no gather, staged tile or math-dialect op): 192 x 128
  // tiles (three consumer warpgroups taking turns, FlashAttention-3's D = 64
  // configuration). Measured on an H100 against the tiles before (same
  // runs, docs/benchmarks): vanilla, causal, GQA, prefix LM and ALiBi
  // +8-15 % at N = 8k and 16k (2k: -2 to -4 %); sink +10 %, sigmoid
  // +9-19 %, causal sigmoid +5 % at 8k (2k: 0.87-1.03x); 4k mixed
  // (0.95-1.06x); a tanh soft-cap 0.96-0.99x.
  auto length = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getDimSize(2);
  };
  int64_t shortest = std::min(length(op.getQueries()[0]), length(value));
  auto usesMath = [&] {
    return op.getScore()
        .walk([](Operation *o) {
          return isa_and_nonnull<math::MathDialect>(o->getDialect())
                     ? WalkResult::interrupt()
                     : WalkResult::advance();
        })
        .wasInterrupted();
  };
  bool plainScore =
      op.getScore().empty() ||
      (!attn_to_gpu::gathersPerElement(op.getScore()) &&
       attn_to_gpu::stagedTileReads(op.getScore(), 1).empty() &&
       !attn_to_gpu::relativeTerms(op.getScore(), 1) && !usesMath());
  if (wgmma && threeWarpgroups && atoms && op.getNumBranches() == 1 &&
      dqk == 64 && dv == 64 && !ShapedType::isDynamic(shortest) &&
      shortest >= 8192 && plainMask && plainScore)
    return {192, 128};
  if (lean && wgmma && atoms)
    return {128, dqk >= 128 && dv >= 128 ? 128 : 64};
  // A score region of plain arithmetic (ALiBi's slope[h] * (j - i)): no
  // math-dialect op, no per-element gather. With a lean mask at D = 128 it
  // also runs fastest on 128 x 128 tiles (measured on an H100, same run:
  // ALiBi +10-15 % from 4k, -3 % at 1k; 128 x 64 lost at D = 64 and 128,
  // and a tanh soft-cap lost up to 9 % on 128 x 128 below 16k).
  // Reads wgmma stages with K (a pair bias) are no gathers: with the
  // producer warpgroup copying them, Evoformer's pair bias at D = 128 ran
  // 1.16-1.17x its 64 x 64 kernel (H100, same run; at D = 64, 0.94-0.98x).
  SmallVector<tensor::ExtractOp> staged;
  if (wgmma)
    staged = attn_to_gpu::stagedTileReads(op.getScore(), op.getNumBranches());
  bool arithmeticScore =
      !op.getScore().empty() &&
      !attn_to_gpu::gathersPerElement(op.getScore(), staged) && !usesMath();
  if (arithmeticScore && plainMask && wgmma && dqk >= 128 && dv >= 128 && atoms)
    return {128, 128};
  return {lean ? 128 : 64, 64};
}

std::pair<int64_t, int64_t>
flashlight::tensorCoreTiles(attn::AttentionOp op, bool wgmma, bool blockMask,
                            bool threeWarpgroups) {
  std::pair<int64_t, int64_t> tiles =
      preferredTiles(op, wgmma, blockMask, threeWarpgroups);
  // Each logit branch stages its own Q and K tiles: with several, 128-key
  // tiles may not fit in shared memory, 64-key ones do up to D = 128.
  if (tiles.second > 64 &&
      tensorCoreIneligibility(op.getKeys(), op.getValue(), op.getScore(),
                              tiles.first, tiles.second))
    tiles.second = 64;
  return tiles;
}

using namespace flashlight::attn;
using namespace flashlight::attn_to_gpu;

namespace {

/// Why the tensor-core generator cannot take `step`, or nothing if it can.
std::optional<std::string> mmaIneligibility(OnlineStepOp step, int64_t blockM,
                                            int64_t blockN) {
  return flashlight::tensorCoreIneligibility(step.getKeys(), step.getValue(),
                                             step.getScore(), blockM, blockN);
}

/// The block id along `d` of a grid that is `gridSize` blocks along it:
/// when that is a constant, it bounds the id (integer range analysis then
/// knows the index math of static shapes).
gpu::BlockIdOp blockId(OpBuilder &b, Location loc, gpu::Dimension d,
                       OpFoldResult gridSize) {
  std::optional<int64_t> size = getConstantIntValue(gridSize);
  return gpu::BlockIdOp::create(b, loc, d,
                                size ? b.getIndexAttr(*size) : IntegerAttr());
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
  for (Operation &op : forall.getTerminator().getYieldingOps()) {
    if (!outputs)
      break;
    auto insert = cast<tensor::ParallelInsertSliceOp>(op);
    auto dest = cast<BlockArgument>(insert.getDest());
    unsigned result = dest.getArgNumber() - forall.getRank();
    Value source = insert.getSource();
    while (auto cast = source.getDefiningOp<tensor::CastOp>())
      source = cast.getSource();
    emitter.outputOf[source] = kernel.getArgument(numArgs + result);
  }
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value warpSize = arith::ConstantIndexOp::create(b, loc, kThreadsPerWarp);
  emitter.thread = tid;
  emitter.warp = arith::DivUIOp::create(b, loc, tid, warpSize);
  emitter.lane = arith::RemUIOp::create(b, loc, tid, warpSize);
  gpu::Dimension dims[] = {gpu::Dimension::z, gpu::Dimension::y,
                           gpu::Dimension::x};
  for (auto [iv, d, bound] :
       llvm::zip(forall.getInductionVars(), dims, forall.getMixedUpperBound()))
    emitter.map.map(iv, d == gpu::Dimension::x && queryTile
                            ? queryTile
                            : blockId(b, loc, d, bound).getResult());

  // Values the loop nest uses from before the forall (sizes, constants).
  if (failed(emitter.convertOps(func.getBody().front(), forall)) ||
      failed(emitter.convertOps(*forall.getBody())))
    return failure();
  gpu::ReturnOp::create(b, loc);
  return success();
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
  for (Type t : func.getArgumentTypes()) {
    auto tensor = cast<RankedTensorType>(t);
    params.push_back(
        MemRefType::get(tensor.getShape(), tensor.getElementType()));
  }
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

/// Converts one function whose body is a tiled attention.
LogicalResult convertFunction(func::FuncOp func, gpu::GPUModuleOp gpuModule,
                              scf::ForallOp forall, bool tensorCores,
                              int64_t warpRows, bool wgmma,
                              bool blockMaskOption, bool overlapSoftmax,
                              bool decoupleWarpgroups, bool branchLookahead,
                              bool producerWarpgroup, bool pingPong) {
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

  // The code generator: tensor cores where asked and the program fits.
  int64_t blockN = forall->getAttrOfType<IntegerAttr>("attn.block_n").getInt();
  OnlineStepOp step;
  forall.walk([&](OnlineStepOp s) {
    if (!step)
      step = s;
  });
  std::optional<std::string> notMma =
      step ? mmaIneligibility(step, blockM.getInt(), blockN)
           : std::optional<std::string>("it has no online step");
  bool useMma = tensorCores && !notMma;
  if (tensorCores && notMma)
    func.emitRemark() << "tensor-core path not taken: " << *notMma
                      << "; using the reference kernel";

  // Three consumer warpgroups are wgmma's (mma.sync takes up to 128 rows
  // here and 256 in 32-row warps).
  if (useMma && blockM.getInt() == 192 && !wgmma)
    return func.emitError() << "attn-to-gpu: block-m 192 needs wgmma (sm_90a)";
  if (!useMma && blockM.getInt() * kThreadsPerWarp > 1024)
    return func.emitError() << "attn-to-gpu: block-m " << blockM.getInt()
                            << " needs " << blockM.getInt() * kThreadsPerWarp
                            << " threads per block with the reference code "
                               "generator (at most 1024)";

  // Hopper's warpgroup MMA takes 64 query rows per warpgroup, up to two
  // warpgroups (more would leave under 128 registers per thread), and head
  // dims of whole 128-byte swizzle atoms.
  auto headDim = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getDimSize(3);
  };
  unsigned branches = step ? step.getNumBranches() : 1;
  bool useWgmma = false;
  // Whether a step votes on its tiles (a mask no bound describes).
  bool votes = false;
  forall.walk([&](OnlineStepOp s) { votes |= votesOnTiles(s); });

  if (useMma && wgmma) {
    std::optional<int64_t> partial;
    Value value = step.getValue();
    // Q.K's head dims fill their last atom partly (a folded contraction's
    // extra columns); V's fill whole atoms.
    for (Value v : llvm::concat<const Value>(step.getKeys(), ValueRange(value)))
      if (headDim(v) % (v == value ? 64 : 16))
        partial = headDim(v);
    // Three consumer warpgroups exist on the producer warpgroup's dense
    // loop only (Wgmma.cpp).
    bool producerLoop = blockN == 128 && decoupleWarpgroups &&
                        producerWarpgroup && !votes &&
                        step->getParentOfType<scf::ForOp>();
    if (blockM.getInt() != 64 && blockM.getInt() != 128 &&
        blockM.getInt() != 192)
      func.emitRemark() << "wgmma not used: block-m " << blockM.getInt()
                        << " (it takes 64, 128 or 192); using mma.sync";
    else if (blockM.getInt() == 192 && !producerLoop)
      return func.emitError()
             << "attn-to-gpu: block-m 192 needs wgmma's producer warpgroup "
                "on a dense KV loop (block-n 128, a KV loop, no block mask "
                "or tile vote)";
    else if (partial)
      func.emitRemark() << "wgmma not used: head dim " << *partial
                        << " (it takes Q.K's in multiples of 16, V's of 64); "
                           "using mma.sync";
    else
      useWgmma = true;
  }

  // Tensor cores: 16 * mTiles query rows per warp; Q stays in shared memory
  // when its A fragments and the accumulators would not both fit in
  // registers (more than 32 registers of Q per thread).
  int64_t mTiles = 1;
  bool queryInSmem = useWgmma;
  if (useMma && !useWgmma) {
    // Several branches each hold accumulators and a live S: one m16 tile
    // per warp (two spilled with two branches).
    int64_t rows = warpRows                                  ? warpRows
                   : blockM.getInt() >= 128 && branches == 1 ? 32
                                                             : 16;
    if ((rows != 16 && rows != 32) || blockM.getInt() % rows)
      return func.emitError()
             << "attn-to-gpu: warp-rows " << rows
             << " must be 16 or 32 and divide block-m " << blockM.getInt();
    mTiles = rows / 16;
    int64_t dqk = 0;
    for (Value key : step.getKeys())
      dqk += headDim(key);
    queryInSmem = mTiles * dqk / 16 * 4 > 32;
  }

  // A mask no bound describes gets a block mask (a trailing i8 parameter
  // both kernels take) where the tensor-core generator would vote on tiles.
  BlockMask mask;
  bool buildMask =
      useMma && votes && blockMaskOption && step->getParentOfType<scf::ForOp>();
  if (buildMask)
    params.push_back(
        MemRefType::get(SmallVector<int64_t>(4, ShapedType::kDynamic),
                        IntegerType::get(func.getContext(), 8)));

  OpBuilder b = OpBuilder::atBlockEnd(gpuModule.getBody());
  Location loc = func.getLoc();
  auto kernel = gpu::GPUFuncOp::create(b, loc, func.getName(),
                                       b.getFunctionType(params, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int64_t threads = useWgmma ? blockM.getInt() / 64 * 4 * kThreadsPerWarp
                    : useMma ? blockM.getInt() / (16 * mTiles) * kThreadsPerWarp
                             : blockM.getInt() * kThreadsPerWarp;
  kernel.setKnownBlockSizeAttr(
      b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  if (useMma) {
    // Blocks per SM that ptxas budgets registers for. Left alone, its
    // heuristic for 128 threads sometimes aims at 4 blocks (128 registers)
    // and spills. Measured on an H100 (docs/benchmarks): 16-row warps run
    // best at 3 blocks of 128 threads up to D = 64 and at 2 beyond (3 spill
    // there, as they do when the mask is also evaluated for a tile vote);
    // 32-row warps need 2 (up to 255 registers). Each branch holds its
    // own accumulators: what counts is their columns in all.
    int64_t dv = headDim(step.getValue()) * branches;
    // A score region that gathers from a captured tensor per element (T5's
    // bucket table; not ALiBi's slope[h]) keeps addresses live across the
    // tile: at 3 blocks (168 registers) T5 spilled 8 bytes once exp2 became
    // one instruction.
    bool gathers = gathersPerElement(step.getScore());
    bool roomy = mTiles == 1 && dv <= 64 && !votes && !gathers;
    int64_t blocksPerSM = threads > 128 ? 1 : (roomy ? 3 : 2);
    // wgmma keeps 16 rows per warp at any block size: with D = 64 its
    // state fits twice in the register file at 256 threads (128 registers);
    // not at 384 (85: too few for a 64 x 128 accumulator).
    if (useWgmma && threads > 128 && threads <= 256 && dv <= 64)
      blocksPerSM = 2;
    kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                    b.getI32IntegerAttr(blocksPerSM));
  }
  if (buildMask) {
    mask = blockMaskOf(step, blockM.getInt(), blockN);
    mask.memref = kernel.getArgument(params.size() - 1);
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
  kernel->setAttr("flashlight.block_m", blockM);
  kernel->setAttr("flashlight.codegen",
                  b.getStringAttr(useWgmma ? "wgmma"
                                  : useMma ? "mma.sync"
                                           : "reference"));

  b.setInsertionPointToStart(&kernel.getBody().front());
  std::unique_ptr<KernelEmitter> owner;
  if (useMma) {
    // K, V (and Q) tiles in dynamic shared memory (more than the 48 KB of
    // static shared memory with Q). For mma.sync, rows padded by 8 elements:
    // ldmatrix rows then start 16 bytes apart in bank terms, free of
    // conflicts. For wgmma, 128-byte swizzled tiles (Wgmma.cpp), which must
    // start 1024-byte aligned: the views start past the base's misalignment
    // (1024 bytes are reserved for it).
    auto smem = gpu::AddressSpaceAttr::get(b.getContext(),
                                           gpu::AddressSpace::Workgroup);
    Value base = gpu::DynamicSharedMemoryOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                        MemRefLayoutAttrInterface(), smem));
    int64_t bytes = 0;
    Value shift = arith::ConstantIndexOp::create(b, loc, 0);
    if (useWgmma) {
      Value address =
          memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base);
      Value atom = arith::ConstantIndexOp::create(b, loc, 1024);
      shift = arith::RemUIOp::create(
          b, loc,
          arith::SubIOp::create(b, loc, atom,
                                arith::RemUIOp::create(b, loc, address, atom)),
          atom);
    }
    // A `shape` buffer of `element`s `at` bytes into the shared window.
    auto viewAt = [&](int64_t at, ArrayRef<int64_t> shape, Type element) {
      auto type =
          MemRefType::get(shape, element, MemRefLayoutAttrInterface(), smem);
      return memref::ViewOp::create(
          b, loc, type, base,
          arith::AddIOp::create(b, loc, shift,
                                arith::ConstantIndexOp::create(b, loc, at)),
          ValueRange{});
    };
    // The next such buffer.
    auto carve = [&](ArrayRef<int64_t> shape, Type element) -> Value {
      Value view = viewAt(bytes, shape, element);
      bytes += cast<MemRefType>(view.getType()).getNumElements() *
               element.getIntOrFloatBitWidth() / 8;
      return view;
    };
    auto tile = [&](Value of, int64_t rows) {
      auto t = cast<RankedTensorType>(of.getType());
      int64_t d = t.getDimSize(3);
      SmallVector<int64_t, 2> shape = {rows, d + 8};
      if (useWgmma) // K and V double-buffered: 2 tiles each, whole atoms.
        shape = {(llvm::is_contained(step.getQueries(), of) ? 1 : 2) * rows *
                     int64_t(llvm::divideCeil(d, 64)),
                 64};
      return carve(shape, t.getElementType());
    };
    MmaTiles tiles;
    for (Value key : step.getKeys())
      tiles.keys.push_back(tile(key, blockN));
    tiles.values = tile(step.getValue(), blockN);
    for (Value query : step.getQueries())
      if (queryInSmem)
        tiles.queries.push_back(tile(query, blockM.getInt()));
    // wgmma's software-pipelined KV loop needs a loop (not folded away)
    // that visits every tile of its range (no tile vote or block mask).
    // Measured on an H100 (docs/benchmarks): it gains up to 8 % with
    // 64-key tiles; 128 x 128 tiles (255 registers, where the two
    // warpgroups' products already interleave) lost 1-4 %.
    // One branch per warpgroup only: the loop carries one P.
    bool pipelined = useWgmma && overlapSoftmax && !votes && blockN < 128 &&
                     branches == 1 &&
                     step->getParentOfType<scf::ForOp>();
    // Two warpgroups on the plain loop (dense, or sparse over a block
    // mask): mbarriers instead of the per-step block-wide barrier
    // (Wgmma.cpp), so that the warpgroups need not run the same step.
    // Measured on an H100 (docs/benchmarks): +0-9 % for causal-like
    // programs, document mask +1-18 %, vanilla D = 128 +8-13 % (once exp2
    // was one instruction; before, vanilla lost 2-8 %), ALiBi +-2 %. The
    // pipelined 64-key loop keeps its barrier: with mbarriers (V a step
    // behind K, so 8 of them) it lost 0-9 %.
    if (useWgmma && decoupleWarpgroups && !pipelined && (!votes || buildMask) &&
        blockM.getInt() >= 128 &&
        step->getParentOfType<scf::ForOp>()) {
      // A producer warpgroup (Wgmma.cpp) for the dense loop; it fills K and
      // V through barriers of their own (8).
      tiles.producer = producerWarpgroup && !buildMask;
      tiles.barriers = carve({tiles.producer ? 8 : 4}, b.getI64Type());
      tiles.pingPong = tiles.producer && pingPong;
      if (tiles.producer) {
        kernel.setKnownBlockSizeAttr(
            b.getDenseI32ArrayAttr({int32_t(threads + 128), 1, 1}));
        kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                        b.getI32IntegerAttr(1));
      }
    }
    // The relative-position tables (MmaSync.h's fillRelativeTable): per
    // warp two buffers of block-n + rows - 1 f32 entries per term.
    if (RelativeTerms relative = relativeTerms(step.getScore(), branches)) {
      int64_t rows = useWgmma ? 16 : 16 * mTiles;
      int64_t entries = threads / kThreadsPerWarp * 2 * relative.terms.size() *
                        (blockN + rows - 1);
      tiles.relative = carve({entries}, b.getF32Type());
    }
    // wgmma: pair-bias-like reads staged with K, where the tiles fit in
    // sm_90a's budget (the eligibility check does not count them: without
    // them the program still runs, gathering).
    if (useWgmma && !tiles.relative)
      for (tensor::ExtractOp read :
           stagedTileReads(step.getScore(), branches)) {
        int64_t row = stagedRowBytes(read, blockN);
        int64_t rows = stagedPerQuery(read) ? blockM.getInt() : 1;
        if (bytes + 2 * rows * row + 1024 > kMaxSharedMemoryHopper)
          break;
        tiles.stagedReads.push_back(read);
        tiles.staged.push_back(
            carve({2 * rows, row * 8 / read.getType().getIntOrFloatBitWidth()},
                  read.getType()));
      }
    // wgmma: plus the 1024 bytes the alignment shift may skip.
    kernel->setAttr("flashlight.dynamic_shared_memory",
                    b.getI64IntegerAttr(bytes + (useWgmma ? 1024 : 0)));
    // cp.async copies 16 bytes, and the output is stored in element pairs.
    kernel->setAttr("flashlight.pointer_alignment", b.getI64IntegerAttr(16));
    owner = useWgmma
                ? createWgmmaEmitter(b, loc, tiles, threads, mask,
                                     pipelined ? blockN : 0, branchLookahead)
                : createMmaSyncEmitter(b, loc, tiles, threads, mTiles, mask);
  } else {
    owner = createRowPerWarpEmitter(b, loc);
  }
  // When a query tile's KV range grows with its index (causal), the grid
  // runs the longest tiles first, so that the short ones fill the tail.
  Value queryTile;
  if (useMma && step && boundGrowsWithQueryTile(forall, step)) {
    OpFoldResult tiles = forall.getMixedUpperBound().back();
    std::optional<int64_t> size = getConstantIntValue(tiles);
    Value x = blockId(b, loc, gpu::Dimension::x, tiles);
    Value gridSize =
        size ? Value(arith::ConstantIndexOp::create(b, loc, *size))
             : Value(gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
    Value last = arith::SubIOp::create(
        b, loc, gridSize, arith::ConstantIndexOp::create(b, loc, 1));
    queryTile = arith::SubIOp::create(b, loc, last, x);
  }
  if (failed(emitKernelBody(b, *owner, kernel, func, forall, queryTile,
                            /*outputs=*/true)))
    return failure();
  if (!mask.memref)
    return success();
  b.setInsertionPointAfter(kernel);
  return emitBlockMaskKernel(b, func, forall, params.back(), mask);
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
      if (failed(convertFunction(
              func, gpuModule, forall, tensorCores, warpRows, wgmma, blockMask,
              overlapSoftmax, decoupleWarpgroups, branchLookahead,
              producerWarpgroup, pingPong)))
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
