//===- Plan.cpp - Decide how each attention becomes a kernel --------------===//
//
// attn-plan is the one place where a kernel's shape is decided. Each rule is
// a function below, in the order the decisions depend on each other:
//
//   1. generator and tiles  -- tensor cores or the reference generator, the
//                              tiles the program's structure prefers
//                              (preferredTiles, fittedTiles), overrides;
//   2. wgmma or mma.sync    -- what warpgroup MMA takes;
//   3. warps                -- query rows per warp, where Q lives;
//   4. sparsity             -- a block-mask pre-kernel or a tile vote;
//   5. the KV loop's form   -- pipelined, mbarriers, producer, ping-pong,
//                              branch lookahead (loopForm);
//   6. registers            -- blocks per SM, setmaxnreg's split;
//   7. the grid             -- a work tile per block, or persistent;
//   8. shared memory        -- the tiles' bytes, the reads staged with K;
//   9. copies               -- TMA for the producer warpgroup's tiles.
//
// The measured reasons behind each rule are decision records in
// docs/decisions, cited by number.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"
#include "flashlight/Dialect/Attn/Analysis/KernelFacts.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

namespace flashlight::attn {
#define GEN_PASS_DEF_ATTNPLAN
#include "flashlight/Dialect/Attn/Transforms/Passes.h.inc"
} // namespace flashlight::attn

using namespace mlir;
using namespace flashlight::attn;

namespace {

/// Tiles of the reference generator unless overridden: a warp per query
/// row, four rows per block, 32 keys per step.
constexpr int64_t kReferenceBlockM = 4, kReferenceBlockN = 32;

/// block-m x block-n.
using Tiles = std::pair<int64_t, int64_t>;

/// Whether a static `length` counts as the measured length `measured` of
/// a tile rule, rather than the one below it (half of it): lengths from
/// 3/4 of it on, about their geometric middle (N = 1536 and 2000 ran
/// 1.08-1.17x on the 2k rule's tiles, N = 1200 0.95x, 6144 1.06x on the
/// 8k rule's; docs/decisions/003).
bool reaches(int64_t length, int64_t measured) {
  return 4 * length >= 3 * measured;
}

/// Rule 7b, on request (`tile-counter`: measured no faster than one work
/// tile per block, docs/decisions/025): where a mask bounds each query
/// tile's KV range (causal, sliding windows) on two consumer warpgroups of
/// one branch without a block mask or key side, blocks draw their work
/// tiles from a counter, in the order a one-tile grid's blocks start in
/// (longest first), the producer copying Q ahead and leaving each tile's
/// index beside its buffer.
bool wantsTileCounter(const KernelFacts &facts, int64_t consumerGroups,
                      Sparsity sparsity) {
  MaskKind mask = facts.getMask().kind;
  return facts.getNumBranches() == 1 && consumerGroups == 2 &&
         sparsity == Sparsity::none &&
         !cast<AttentionOp>(facts.getOp()).getKeySide() &&
         (mask == MaskKind::Causal || mask == MaskKind::SlidingWindow);
}

/// Rule 1a: the tensor-core tiles the program's structure prefers, before
/// the shared-memory check (docs/decisions/003, 004, 010, 014). `producer`:
/// the producer warpgroup's loop is available; `tma`: it copies with TMA.
Tiles preferredTiles(const KernelFacts &facts, bool wgmma, bool blockMask,
                     bool producer, bool tma) {
  MaskKind mask = facts.getMask().kind;
  int64_t dqk = facts.getSmallestHeadDim(), dv = facts.getValueHeadDim();
  unsigned branches = facts.getNumBranches();
  auto op = cast<AttentionOp>(facts.getOp());
  // A mask no bound describes, without a score region, gets a block mask
  // (the tile vote keeps 64 x 64) on 128 x 128 tiles.
  bool blockMasked =
      blockMask && op.getScore().empty() &&
      (mask == MaskKind::DataDependent || mask == MaskKind::Custom);
  if (blockMasked && wgmma)
    return {128, 128};
  // Several logit branches at D = 64: 128 x 128, so that the producer
  // warpgroup and ping-pong apply.
  if (branches > 1 && wgmma && dv <= 64)
    return {128, 128};
  // One long branch at D = 64 (or 32) with a plain mask and score: three
  // consumer warpgroups on 192 x 128 (docs/decisions/004); with the
  // producer copying with TMA, from N = 2048 without a mask, and at D = 32
  // with one.
  int64_t shortest = facts.getShortestLength();
  int64_t dk = facts.getKeyHeadDimSum();
  int64_t longFrom =
      tma && (mask == MaskKind::None || (dk < 64 && dv < 64)) ? 2048 : 8192;
  if (wgmma && producer && branches == 1 && dk <= 64 && dv <= 64 &&
      !ShapedType::isDynamic(shortest) && reaches(shortest, longFrom) &&
      facts.hasPlainMask() && facts.hasPlainScore())
    return {192, 128};
  bool lean = facts.isLean();
  // Lean programs take 128 x 128; at D = 64 only with the producer
  // warpgroup and ping-pong, from N = 2048 (or runtime lengths) up
  // (docs/decisions/003).
  if (lean && wgmma) {
    bool longRows = ShapedType::isDynamic(shortest) || reaches(shortest, 2048);
    bool wide = (dqk >= 128 && dv >= 128) || (producer && longRows);
    return {128, wide ? 128 : 64};
  }
  // A score region of plain arithmetic (ALiBi; a pair bias wgmma stages
  // with K) with a plain mask at D = 128.
  if (facts.hasArithmeticScore() && facts.hasPlainMask() && wgmma &&
      dqk >= 128 && dv >= 128)
    return {128, 128};
  // No normalizer at D = 128 (the gradient attentions: no row state, one
  // exp per element): two consumer warpgroups on 128 x 64 (docs/decisions/003).
  if (op.getNormalizer() == Normalizer::none && wgmma && dqk >= 128 &&
      dv >= 128)
    return {128, 64};
  return {lean ? 128 : 64, 64};
}

/// Rule 1b: each logit branch stages its own Q and K tiles; with several,
/// or head dims past 128, 128-key tiles may not fit in shared memory;
/// 64-key ones do up to D = 128, and up to D = 256 within sm_90a's budget.
/// `budget` is sm_80's (measured tile choices hold on it, for both
/// generators), or the chip's where the TMA producer takes a lean program
/// (no score region, a plain mask) of one branch whose Q.K head dim is past
/// 128: MLA's 192 / 128 on 128 x 128 (214 KB) ran
/// 1.50-1.64x the 128 x 64 pipelined loop (docs/decisions/003).
Tiles fittedTiles(const KernelFacts &facts, Tiles tiles, int64_t budget) {
  if (tiles.second > 64 &&
      facts.tensorCoreIneligibility(tiles.first, tiles.second, budget,
                                    /*withWgmma=*/true))
    tiles.second = 64;
  return tiles;
}

/// Whether a key-side product's sums can be added by bulk tensor
/// reductions (the plan's bulk_key_side): its 64 x 64 f32 chunks (64 x 32
/// at dqk = 32; whole 32-column TMA boxes) split evenly over the consumer
/// warpgroups, each staging one at a time in its buffer of the weights
/// tile. Atomic adds otherwise.
bool bulkKeySideFits(const KernelFacts &facts, int64_t blockN,
                     int64_t consumerGroups) {
  auto op = cast<AttentionOp>(facts.getOp());
  if (!op.getKeySide() || consumerGroups == 0)
    return false;
  int64_t dqk =
      cast<RankedTensorType>(op.getQueries()[0].getType()).getDimSize(3);
  int64_t columns = ArchInfo::keySideChunkColumns(dqk);
  if (columns % 32 || dqk % columns || blockN % ArchInfo::kWarpgroupRows)
    return false;
  int64_t chunks = blockN / ArchInfo::kWarpgroupRows * (dqk / columns);
  return chunks % consumerGroups == 0;
}

/// The shared memory a tensor-core kernel lays out (attn-to-gpu's
/// SharedMemoryPlan, in its order).
struct SharedMemory {
  int64_t stagedReads = 0;
  /// Whether a staged read is a [block-m, block-n] tile (not one row).
  bool stagedPerQuery = false;
  int64_t bytes = 0;
};

/// Rule 8: the kernel's shared memory -- K and V tiles (double-buffered),
/// Q's where it stays there, the mbarriers of the decoupled loop, the
/// relative-position tables -- and, on wgmma without tables, as many of the
/// score region's tile-shaped reads as fit in sm_90a's budget staged with K
/// (docs/decisions/014); the rest are gathered.
SharedMemory layoutSharedMemory(const KernelFacts &facts, bool wgmma,
                                int64_t blockM, int64_t blockN,
                                int64_t warpRows, int64_t warps,
                                bool queryInSmem, LoopForm loop, bool producer,
                                bool queryAhead, bool bulkKeySide,
                                bool tileCounter) {
  auto op = cast<AttentionOp>(facts.getOp());
  auto tileBytes = [&](Value of, int64_t rows, int64_t buffers) {
    auto type = cast<RankedTensorType>(of.getType());
    int64_t bits = type.getElementTypeBitWidth();
    auto [lines, columns] = ArchInfo::stagingTileShape(
        wgmma, rows, type.getDimSize(3), buffers, bits);
    return lines * columns * bits / 8;
  };
  SharedMemory smem;
  for (Value key : op.getKeys())
    smem.bytes += tileBytes(key, blockN, 2);
  smem.bytes += tileBytes(op.getValue(), blockN, 2);
  // query_ahead: the producer copies the next work tile's Q into a second
  // buffer while the consumers finish the last one.
  if (queryInSmem)
    for (Value query : op.getQueries())
      smem.bytes += tileBytes(query, blockM, queryAhead ? 2 : 1);
  // The key-side product's weights: a [64, block-n] tile per consumer
  // warpgroup (wgmma), which with bulk adds also stages its f32 sums.
  if (wgmma && op.getKeySide()) {
    auto query = cast<RankedTensorType>(op.getQueries()[0].getType());
    smem.bytes +=
        blockM / ArchInfo::kWarpgroupRows *
        ArchInfo::keySideLines(blockN, query.getDimSize(3),
                               query.getElementTypeBitWidth(), bulkKeySide) *
        ArchInfo::kSwizzleBytes;
  }
  if (loop == LoopForm::mbarrier)
    smem.bytes += ArchInfo::barrierWords(producer, queryAhead, tileCounter) * 8;
  if (int64_t terms = facts.getRelativeTermCount())
    smem.bytes +=
        ArchInfo::relativeTableEntries(warps, terms, blockN, warpRows) * 4;
  if (wgmma && !facts.hasRelativeTerms())
    for (tensor::ExtractOp read : facts.getStagedReads()) {
      int64_t row = stagedRowBytes(read, blockN);
      int64_t rows = stagedPerQuery(read) ? blockM : 1;
      // Staged tiles start at 128-byte boundaries (TMA's destinations).
      int64_t at = llvm::alignTo(smem.bytes, ArchInfo::kStagedTileAlignment);
      if (at + 2 * rows * row + ArchInfo::kSwizzleAlignment >
          ArchInfo::kHopperSharedMemory)
        break;
      ++smem.stagedReads;
      smem.stagedPerQuery |= rows > 1;
      smem.bytes = at + 2 * rows * row;
    }
  // Swizzled tiles start at the next 1024-byte boundary past the base.
  if (wgmma)
    smem.bytes += ArchInfo::kSwizzleAlignment;
  return smem;
}

/// The pass's options (overrides) with the chip's facts.
struct Planner {
  const KernelFacts &facts;
  const ArchInfo &arch;
  const AttnPlanOptions &options;

  InFlightDiagnostic error() {
    return facts.getOp()->emitError() << "attn-plan: ";
  }
  InFlightDiagnostic remark() { return facts.getOp()->emitRemark(); }

  FailureOr<KernelPlanAttr> plan();
  FailureOr<KernelPlanAttr> referencePlan();
  FailureOr<KernelPlanAttr> tensorCorePlan(Tiles tiles);
  FailureOr<Generator> chooseGenerator(Tiles tiles, bool votes, bool kvLoop);
};

FailureOr<KernelPlanAttr> Planner::referencePlan() {
  int64_t blockM = options.blockM ? options.blockM : kReferenceBlockM;
  int64_t blockN = options.blockN ? options.blockN : kReferenceBlockN;
  if (blockM * ArchInfo::kThreadsPerWarp > ArchInfo::kMaxThreadsPerBlock)
    return error() << "block-m " << blockM << " needs "
                   << blockM * ArchInfo::kThreadsPerWarp
                   << " threads per block with the reference code generator "
                      "(at most "
                   << ArchInfo::kMaxThreadsPerBlock << ")";
  return KernelPlanAttr::getReference(facts.getOp()->getContext(), blockM,
                                      blockN, !options.staticStrides);
}

FailureOr<KernelPlanAttr> Planner::plan() {
  if (!options.tensorCores)
    return referencePlan();
  // Rule 1: the tiles the structure prefers, then the overrides.
  bool wgmma = arch.hasWgmma && options.wgmma;
  bool producer = options.producerWarpgroup && options.decoupleWarpgroups;
  // (Measured on lean programs: MLA without a mask and causal.)
  bool tmaWide = wgmma && producer && options.tma && facts.isLean() &&
                 facts.getKeyHeadDimSum() > 128 && facts.getNumBranches() == 1;
  Tiles tiles = fittedTiles(
      facts,
      preferredTiles(facts, wgmma, options.blockMask, producer, options.tma),
      tmaWide ? arch.sharedMemory() : ArchInfo::kPortableSharedMemory);
  if (options.blockM)
    tiles.first = options.blockM;
  if (options.blockN)
    tiles.second = options.blockN;
  if (std::optional<std::string> why = facts.tensorCoreIneligibility(
          tiles.first, tiles.second, arch.sharedMemory(), arch.hasWgmma)) {
    remark() << "tensor-core path not taken: " << *why
             << "; using the reference kernel";
    return referencePlan();
  }
  if (facts.getKVTiles(tiles.first, tiles.second) == KVTiles::None) {
    remark() << "tensor-core path not taken: no query row keeps a key; using "
                "the reference kernel";
    return referencePlan();
  }
  return tensorCorePlan(tiles);
}

/// Rule 2: wgmma where it takes the tiles and head dims, else mma.sync.
FailureOr<Generator> Planner::chooseGenerator(Tiles tiles, bool votes,
                                              bool kvLoop) {
  auto [blockM, blockN] = tiles;
  bool wgmmaWanted = arch.hasWgmma && options.wgmma;
  Generator generator = Generator::mma_sync;
  if (wgmmaWanted) {
    // Warpgroups take 64 rows each, three only on the producer warpgroup's
    // dense loop (docs/decisions/004). Head dims are multiples of 16 (the
    // tensor-core path's condition): wgmma contracts Q.K in k16 steps and
    // takes P V's N = Dv, reading the last swizzle atom partly.
    bool producerLoop = blockN == 128 && options.decoupleWarpgroups &&
                        options.producerWarpgroup && !votes && kvLoop;
    // value_columns: a branch's P V starts at its block's swizzle atom.
    std::optional<ArrayRef<int64_t>> columns =
        cast<AttentionOp>(facts.getOp()).getValueColumns();
    int64_t atomColumns =
        ArchInfo::atomElements(facts.getElementType().getIntOrFloatBitWidth());
    bool blocksAligned =
        !columns || llvm::all_of(columns->drop_back(), [&](int64_t w) {
          return w % atomColumns == 0;
        });
    if (blockM != 64 && blockM != 128 && blockM != 192)
      remark() << "wgmma not used: block-m " << blockM
               << " (it takes 64, 128 or 192); using mma.sync";
    else if (!blocksAligned)
      remark() << "wgmma not used: value_columns blocks are not whole "
                  "64-column swizzle atoms; using mma.sync";
    else if (blockM == 192 && !producerLoop)
      return error() << "block-m 192 needs wgmma's producer warpgroup on a "
                        "dense KV loop (block-n 128, a KV loop, no block mask "
                        "or tile vote)";
    else
      generator = Generator::wgmma;
  }
  return generator;
}

FailureOr<KernelPlanAttr> Planner::tensorCorePlan(Tiles tiles) {
  auto [blockM, blockN] = tiles;
  unsigned branches = facts.getNumBranches();
  bool votes = facts.votesOnTiles();
  bool kvLoop = facts.getKVTiles(blockM, blockN) == KVTiles::Loop;
  bool wgmmaWanted = arch.hasWgmma && options.wgmma;
  // Three consumer warpgroups are wgmma's.
  if (blockM == 192 && !wgmmaWanted)
    return error() << "block-m 192 needs wgmma (sm_90a)";

  FailureOr<Generator> chosen = chooseGenerator(tiles, votes, kvLoop);
  if (failed(chosen))
    return failure();
  Generator generator = *chosen;
  bool wgmma = generator == Generator::wgmma;
  if (!wgmma && cast<AttentionOp>(facts.getOp()).getKeySide()) {
    remark() << "tensor-core path not taken: the key-side product (key_side) "
                "is on wgmma (sm_90a) only; using the reference kernel";
    return referencePlan();
  }

  // Rule 3: query rows per warp. mma.sync: 32 (two m16 tiles) on 128-row
  // tiles of one branch, else 16; Q stays in shared memory where its A
  // fragments and the accumulators would not both fit in registers (more
  // than 32 registers of Q per thread). wgmma: 16, Q in shared memory.
  int64_t warpRows = ArchInfo::kMmaRows;
  bool queryInSmem = wgmma;
  if (!wgmma) {
    // Two m16 tiles a warp hold 2 * Dv / 8 accumulator registers per
    // thread: past Dv = 128, one.
    warpRows =
        options.warpRows ? options.warpRows
        : blockM >= 128 && branches == 1 && facts.getValueHeadDim() <= 128
            ? 2 * ArchInfo::kMmaRows
            : ArchInfo::kMmaRows;
    if ((warpRows != 16 && warpRows != 32) || blockM % warpRows)
      return error() << "warp-rows " << warpRows
                     << " must be 16 or 32 and divide block-m " << blockM;
    int64_t mTiles = warpRows / ArchInfo::kMmaRows;
    queryInSmem = mTiles * facts.getKeyHeadDimSum() / 16 * 4 > 32;
  }

  // Rule 4: a mask no bound describes gets a block mask (a pre-kernel)
  // where a KV loop would otherwise vote on each tile (docs/decisions/010).
  bool blockMask = votes && options.blockMask && kvLoop;
  Sparsity sparsity = !votes      ? Sparsity::none
                      : blockMask ? Sparsity::block_mask
                                  : Sparsity::tile_vote;

  // Rule 5: the KV loop's form (docs/decisions/005-009).
  // Software-pipelined: one branch on 64-key tiles, a loop that visits every
  // tile of its range.
  // At Dv = 256 (64-key tiles: 128-key ones do not fit), the producer
  // warpgroup with ping-pong instead (1.20-1.29x); at Dv = 192 too where it
  // copies with TMA (1.36-1.50x; with cp.async its kernel spills and
  // loses, docs/decisions/003).
  bool producerCopiesWithTma = options.producerWarpgroup &&
                               options.decoupleWarpgroups && options.tma &&
                               facts.getStagedReads().empty();
  int64_t valueDim = facts.getValueHeadDim();
  bool pipelined = wgmma && options.overlapSoftmax && !votes && blockN < 128 &&
                   branches == 1 && kvLoop && valueDim != 256 &&
                   !(valueDim > 128 && producerCopiesWithTma);
  // mbarriers instead of the per-step block-wide barrier: two or more
  // warpgroups on the plain loop (dense, or sparse over a block mask); a
  // producer warpgroup on either, copying the tiles the consumers visit,
  // the consumers taking turns.
  bool decoupled = wgmma && options.decoupleWarpgroups && !pipelined &&
                   (!votes || blockMask) && blockM >= 128 && kvLoop;
  bool producer = decoupled && options.producerWarpgroup;
  // A key-side product is summed over every warpgroup's rows, which meet
  // once its weights are staged: no turns (half the atomic adds measured
  // 1.13-1.38x the per-warpgroup sums in turns; docs/decisions/024).
  bool pingPong = producer && options.pingPong &&
                  !cast<AttentionOp>(facts.getOp()).getKeySide();
  LoopForm loop = pipelined   ? LoopForm::pipelined
                  : decoupled ? LoopForm::mbarrier
                              : LoopForm::barrier;
  // Branches run one after the other issue the next one's S early, unless
  // turns already interleave the products.
  bool lookahead =
      wgmma && options.branchLookahead && !pingPong && branches > 1;

  // Rule 6: registers (docs/decisions/011, 007). Blocks per SM that ptxas
  // budgets registers for: each branch's accumulators count.
  int64_t consumerGroups = wgmma ? blockM / ArchInfo::kWarpgroupRows : 0;
  int64_t threads = wgmma ? consumerGroups * ArchInfo::kThreadsPerWarpgroup
                          : blockM / warpRows * ArchInfo::kThreadsPerWarp;
  int64_t dv = facts.getValueHeadDim() * branches;
  bool roomy = warpRows == ArchInfo::kMmaRows && dv <= 64 && !votes &&
               !facts.gathersPerElement();
  int64_t minBlocks = threads > 128 ? 1 : (roomy ? 3 : 2);
  if (wgmma && threads > 128 && threads <= 256 && dv <= 64)
    minBlocks = 2;
  // setmaxnreg: registers move from the producer to the consumers.
  int64_t producerRegisters = 0, consumerRegisters = 0;
  if (producer) {
    minBlocks = 1;
    std::tie(producerRegisters, consumerRegisters) =
        consumerGroups == 3 ? std::pair(32, 160)
        : branches > 1      ? std::pair(24, 240)
                            : std::pair(56, 224);
  }
  // Rule 7: a persistent grid where its blocks' work is even (no mask), so
  // that a static round-robin balances: three consumer warpgroups
  // (192 x 128 at D = 64), and two at D = 64 (128 x 128), whose producer
  // then copies the next work tile's Q ahead as well (docs/decisions/025).
  // The producer copies the next work tile's K/V during the last one's
  // epilogue.
  // On request, a tile counter (wantsTileCounter; where Q's second
  // buffer fits).
  bool evenWork = producer && options.persistent && branches == 1 &&
                  facts.getMask().kind == MaskKind::None;
  bool tileCounter = producer && producerCopiesWithTma && options.persistent &&
                     options.tileCounter &&
                     wantsTileCounter(facts, consumerGroups, sparsity);
  bool evenQueryAhead = evenWork && consumerGroups == 2 &&
                        facts.getKeyHeadDimSum() == 64 && dv == 64;
  // Rule 8: shared memory.
  bool bulkKeySide = wgmma && options.bulkKeySide &&
                     bulkKeySideFits(facts, blockN, consumerGroups);
  auto layout = [&] {
    return layoutSharedMemory(facts, wgmma, blockM, blockN, warpRows,
                              threads / ArchInfo::kThreadsPerWarp, queryInSmem,
                              loop, producer, tileCounter || evenQueryAhead,
                              bulkKeySide, tileCounter);
  };
  SharedMemory smem = layout();
  if (tileCounter && smem.bytes > arch.sharedMemory()) {
    tileCounter = false;
    smem = layout();
  }
  bool queryAhead = tileCounter || evenQueryAhead;
  bool persistent =
      tileCounter || (evenWork && (consumerGroups == 3 || queryAhead));
  // Rule 9: the producer warpgroup copies with TMA, one thread issuing a
  // tile's copies (docs/decisions/026), staged one-row reads (a gradient's
  // row statistics, a key bias) a box each; not with [block-m, block-n]
  // staged tiles (their copies are per thread, bounds-tested per chunk).
  bool tma = producer && options.tma && !smem.stagedPerQuery;
  return KernelPlanAttr::get(
      facts.getOp()->getContext(), generator, blockM, blockN, warpRows,
      consumerGroups, producer, loop, pingPong, lookahead, sparsity,
      queryInSmem, smem.stagedReads, smem.bytes, minBlocks, producerRegisters,
      consumerRegisters, !options.staticStrides,
      facts.getOp()->hasAttr(kAlignedLengthsAttrName), persistent, queryAhead,
      tma, bulkKeySide, tileCounter);
}

struct AttnPlanPass : flashlight::attn::impl::AttnPlanBase<AttnPlanPass> {
  using AttnPlanBase::AttnPlanBase;

  void runOnOperation() override {
    std::optional<ArchInfo> info = ArchInfo::get(arch);
    if (!info) {
      getOperation()->emitError()
          << "attn-plan: unsupported arch '" << arch
          << "' (supported: sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a)";
      return signalPassFailure();
    }
    AttnPlanOptions options{arch,
                            tensorCores,
                            wgmma,
                            blockM,
                            blockN,
                            warpRows,
                            blockMask,
                            overlapSoftmax,
                            decoupleWarpgroups,
                            producerWarpgroup,
                            pingPong,
                            branchLookahead,
                            staticStrides,
                            persistent,
                            tma,
                            bulkKeySide,
                            tileCounter};
    WalkResult result = getOperation()->walk([&](AttentionOp op) {
      KernelFacts facts(op);
      FailureOr<KernelPlanAttr> plan = Planner{facts, *info, options}.plan();
      if (failed(plan))
        return WalkResult::interrupt();
      op->setAttr(kKernelPlanAttrName, *plan);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
