//===- MmaSync.h - Tensor-core code generator -------------------*- C++ -*-===//
//
// FlashAttention-2 style: a block of warps owns block-m query rows, 16 or 32
// (one or two m16 tiles) per warp. Q is staged through shared memory into
// mma A fragments once per query tile -- or, when those would not fit in
// registers next to the accumulators, stays in its own shared-memory tile
// and is read per step; each KV tile is staged in shared memory (rows padded by
// 8 elements so that ldmatrix is free of bank conflicts); S = Q K^T and O += P
// V are mma.sync m16n8k16 (f16/bf16 in, f32 accumulate), with V read through
// ldmatrix.trans and P converted in registers into the A fragments of the PV
// product. Score and mask regions are evaluated per accumulator element at
// its (row, column); row max and sum combine the four lanes of a row with
// two shuffles. The state per thread, per m16 tile: 2 rows' max and
// (lane-partial) sum, Dv / 8 accumulator fragments of 4 floats. Every K and
// V fragment loaded from shared memory feeds the mma of each m16 tile.
//
// The two products, the tiles' layout and the copies' visibility are hooks:
// the wgmma generator (Wgmma.cpp) replaces them and keeps the rest.
// Private to the AttnToGPU conversion.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_MMASYNC_H
#define FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_MMASYNC_H

#include "KernelEmitter.h"
#include "TileLayout.h"

#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace flashlight::attn_to_gpu {

/// The mma.sync code generator; see the file comment. Its hooks (the two
/// products, the tiles' layout, the copies' waits and visibility) are
/// virtual for the wgmma generator.
class MmaSyncEmitter : public KernelEmitter {
public:
  /// The plan's compute threads (wgmma's consumer warpgroups) and m16
  /// tiles per warp.
  MmaSyncEmitter(OpBuilder &b, Location loc, const MmaTiles &tiles,
                 KernelPlanAttr plan, const BlockMask &mask);

protected:
  /// Shared-memory staging tiles: one K (and Q) tile per logit branch, V
  /// shared. Without Q tiles, Q goes through the first K tile into
  /// registers.
  SmallVector<Value, 2> keyTiles, queryTiles;
  Value valueTile;
  /// MmaTiles::relative (null: no relative-position terms).
  Value relativeTable;
  /// MmaTiles::staged: tiles of the step's stagedTileReads, in order.
  SmallVector<Value, 2> stagedTiles;
  /// Maps the step's staged reads, for element `i` of block `nb` of m16
  /// tile `mt` (column `col` of the KV tile), to their values in the
  /// staged tiles (the wgmma generator's).
  virtual void readStaged(IRMapping &m, OnlineStepOp step, int64_t mt,
                          int64_t i, Value col) {}
  /// The logit branch whose product is being emitted: keyTile() and
  /// queryTile() are its tiles.
  unsigned branch = 0;
  Value keyTile() { return keyTiles[branch]; }
  Value queryTile() {
    return queryTiles.empty() ? Value() : queryTiles[branch];
  }
  int64_t threads;
  /// m16 tiles per warp, and the warp's query rows.
  int64_t mTiles;
  /// The plan's aligned_lengths: every tile whole, every index in range.
  bool alignedLengths;
  /// The plan's query rows per block.
  int64_t blockM;
  int64_t rowsPerWarp() const { return 16 * mTiles; }
  /// The block mask that replaces the tile vote (null memref: none).
  BlockMask blockMask;
  /// The plan's sparsity: whether steps skip the tiles a mask no bound
  /// describes empties (a tile vote, or the block mask's byte).
  Sparsity sparsity;
  bool votesOnTiles() const { return sparsity != Sparsity::none; }
  /// When set, stage() copies only where it holds (a thread that is not one
  /// of the `threads` copying ones skips its copies).
  Value copyGuard;
  /// The step being emitted, and (when set) a condition stage() copies
  /// under: where it is false, the tile is zero-filled without reading
  /// global memory.
  OnlineStepOp currentStep;
  Value copyCondition;
  /// Set while copying tiles known to lie within their tensors (the
  /// producer warpgroup's, on static shapes that whole tiles divide): no
  /// clamp or zero fill, so that a thread's copies differ by constant
  /// offsets.
  bool tilesInBounds = false;
  /// Set while the KV loop visits only the tiles the block mask keeps (the
  /// loop then skips empty ones before the step).
  bool keptTilesOnly = false;

  /// Whether the block mask keeps anything of the KV tile after the current
  /// one (the last tile stands in past the end: its rows are zero-filled
  /// anyway); null without a block mask.
  Value nextTileKept(int64_t bn);
  /// The block mask's byte for KV tile `tile` of `step`'s rows.
  Value tileByte(OnlineStepOp step, Value tile);
  /// `byte` compared (`pred`) with what `t` says.
  Value tileIs(arith::CmpIPredicate pred, BlockMask::Tile t, Value byte);
  /// The cp.async groups filling the Q tile and the current V tile, and the
  /// current K tiles' views, one per branch (the step prefetches the next
  /// ones).
  Value queryGroup, valueGroup;
  SmallVector<View, 2> keyViews;
  /// Copy groups issued after the current V tile's (the next K tiles'), and
  /// whether this step already waited for V.
  int32_t keyGroupsInFlight = 0;
  bool valuesLanded = false;

  /// [1, 1, rows] (max, sum): the thread's two rows per m16 tile;
  /// [1, 1, rows, D] (accumulator): D / 8 fragments of 4 per m16 tile, tile
  /// major.
  int64_t laneCount(Type type) override;

  Type elementType() {
    return cast<MemRefType>(keyTiles[0].getType()).getElementType();
  }
  Value group() { return arith::DivUIOp::create(b, loc, lane, idx(4)); }
  Value quad() { return arith::RemUIOp::create(b, loc, lane, idx(4)); }
  Value mulI(Value x, int64_t c) {
    return arith::MulIOp::create(b, loc, x, idx(c));
  }
  /// Set once a producer warpgroup forked off: block-wide barriers are then
  /// among the `threads` compute threads only (named barrier 5).
  bool consumersOnly = false;
  /// Sigmoid weights: every other one takes its reciprocal on the FMA pipe
  /// rather than MUFU, which otherwise runs two ops (ex2, rcp) per logit
  /// while the products wait (wgmma; measured on an H100, same run:
  /// +2-6 % sigmoid and sigmoid causal at D = 64 and 128; all of them on
  /// the FMA pipe: 0.91-1.03x).
  bool fmaReciprocals = false;

  /// A barrier among the compute threads: the whole block, or named
  /// barrier 5 once a producer warpgroup forked off (consumersOnly).
  void barrier();
  /// bar.sync `id`, `count`: a barrier among `count` threads.
  void namedBarrier(Value id, int64_t count);
  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
  }

  /// Copies rows [start, start + tile rows) x [0, D) of `view` (a
  /// [1, 1, *, D] slice) into `tile` with cp.async, 16 bytes per copy; rows
  /// past the tensor's end are zero-filled. The copies of the tile form one
  /// group, so a wait can name it.
  Value stage(const View &view, Value tile);
  /// The elements a cp.async of `n` reads from global memory: all, or none
  /// (zero fill) where `valid` (null: always) is false.
  Value copiedElements(Value valid, int64_t n);
  /// Waits until at most `pending` copy groups are in flight (`group` among
  /// the completed ones), then until every thread's copies are visible.
  void waitCopies(Value group, int32_t pending);

  /// How the staging tiles sit in shared memory (the plan's generator's).
  TileLayout layout;
  /// The first line of the buffer stage() writes (swizzled, double-buffered
  /// tiles; null: buffer 0 or a padded tile).
  Value stageOffset;
  /// Rows per buffer of a staging tile whose rows hold `d` elements (Q's
  /// tiles have queryBuffers buffers, K's and V's two).
  int64_t tileRows(Value tile, int64_t d) {
    return layout.rows(tile, d,
                       llvm::is_contained(queryTiles, tile) ? queryBuffers : 2);
  }
  /// Buffers of each Q tile: two in a persistent kernel (the producer fills
  /// the next work tile's while the consumers use this one's), else one.
  int64_t queryBuffers = 1;
  /// The tile (row, column) that 16-byte copy `c` of a tile of `d` columns
  /// fills: row-major, so that a warp's copies read whole rows.
  virtual std::pair<Value, Value> chunkOrigin(Value c, int64_t d);
  /// The shared-memory indices of element (row, col) of `tile` (in the
  /// buffer stageOffset selects).
  SmallVector<Value> tileIndices(Value tile, Value row, Value col, int64_t d) {
    return layout.indices(b, loc, tileRows(tile, d), row, col, stageOffset);
  }
  /// Runs in each thread after its copies landed, before the barrier that
  /// shows them to the block.
  virtual void publishCopies() {}
  /// Runs once Q's copies are issued: here, lets them land.
  virtual void afterQueryCopies() { waitCopies(queryGroup, 0); }
  /// Copy groups a step leaves in flight when it starts on S = Q K^T: V's,
  /// which lands during S and the softmax.
  virtual int32_t pendingAtStep() { return 1; }
  /// Lets the current V tile land (the next K tiles may still be in
  /// flight), once per step.
  virtual void waitForValues();
  /// Lets the step's tiles land and shows them to every warp.
  virtual void waitForStep() { waitCopies(valueGroup, pendingAtStep()); }

  /// ldmatrix of `tiles` 8x8 tiles at `tile[row, col]`, as packed i32s.
  SmallVector<Value> ldmatrix(Value tile, Value row, Value col, int tiles,
                              bool transpose);
  /// An mma operand register from two packed elements: nvvm.mma.sync takes
  /// f16 pairs as vector<2xf16> and bf16 pairs as i32.
  Value asOperand(Value pair);
  /// Two f32 as one mma A-fragment register of two f16/bf16.
  Value pack(Value lo, Value hi);
  /// c += a * b on a 16x8x16 tile; four f32 in and out.
  SmallVector<Value> mma(ArrayRef<Value> a, ArrayRef<Value> bFrag,
                         ArrayRef<Value> c);
  /// Reduces over the four lanes that share a row.
  Value quadReduce(Value x, bool isMax);
  /// Stages slice `v` for each of its roles (rolesOf).
  LogicalResult onSlice(Value v, const View &view) override;
  /// Stages slice `v` for one of its roles.
  virtual LogicalResult onRole(Value v, const View &view, Role role);
  /// Once every warp is done reading the K tiles, refills them with the
  /// next `bn` keys (rows past the end are zero-filled).
  virtual void prefetchNextKey(int64_t bn);

  /// This thread's query row for accumulator element `i` (0..3) of m16
  /// tile `mt`: rows g and g + 8 of the tile.
  Value rowOf(Value q0, int64_t mt, int64_t i);
  /// Fills this warp's relative-position table for the KV tile at `k0`
  /// (`bn` keys): entry t of term k holds the term at j - i = d0 + t, where
  /// d0 is the smallest j - i of the warp's elements (its last row, the
  /// tile's first key). The lanes split the bn + rows - 1 entries; a
  /// position no (query, key) pair of the tensors has is evaluated at the
  /// nearest one that exists, so that a gather stays in bounds. Tiles
  /// alternate between two buffers: the warp's sync after this step's
  /// writes also orders the previous step's reads of the other buffer
  /// before the next step's writes to it. Returns the table's first entry.
  Value fillRelativeTable(OnlineStepOp step, const RelativeTerms &relative,
                          Value b0, Value h0, Value q0, Value k0, Value lastRow,
                          Value lastKey, int64_t bn);

  /// The relative-position terms of element i (at tile column `col`) of
  /// m16 tile mt, read from the table at `base`, as a mapping for
  /// inlineRegion: the region's other relative ops map to themselves, which
  /// only tells inlineRegion not to clone them (only relative ops read them).
  IRMapping readRelativeTable(const RelativeTerms &relative, Value base,
                              int64_t bn, int64_t mt, int64_t i, Value col);

  /// Fragments of 4 f32 per m16 tile and 8-column block: [mt][block][i].
  using Fragments = SmallVector<SmallVector<SmallVector<Value>>>;

  /// S = Q K^T of the current branch for its K tile (`bn` keys); `q` holds
  /// Q's A fragments when Q is not read from its shared-memory tile.
  virtual Fragments scoreProduct(ArrayRef<Value> q, int64_t dqk, int64_t bn);

  /// P's A fragments from its f32 fragments `p`: [mt][k] for keys
  /// [16k, 16k + 16), blocks 2k and 2k + 1.
  Fragments packWeights(const Fragments &p, int64_t bn);

  /// O = alpha * O + P V over the current V tile (`bn` keys), once V has
  /// landed; `p` holds the weights as f32 fragments (as scoreProduct's),
  /// `alpha[r]` the rescale of row r (null: 1). Returns the new
  /// accumulators.
  virtual SmallVector<Value> valueProduct(const Fragments &p,
                                          ArrayRef<Value> acc,
                                          ArrayRef<Value> alpha, int64_t dv,
                                          int64_t bn);

  /// The logit branches in the order their products are emitted: each
  /// branch alone (S, softmax and P V of one branch before the next S, so
  /// that one S is live at a time) when the score region's logit r reads
  /// s_r only; else all S first, in one group.
  static SmallVector<SmallVector<unsigned>> branchGroups(OnlineStepOp step);

  /// Scoped state of one product (SaveAndRestore around the call): whether
  /// the P V being emitted is the step's last (the wgmma generator then
  /// releases the step's buffers), and, while a branch's S is emitted, the
  /// branch whose S comes next in the step if another group follows (wgmma
  /// issues it ahead).
  bool lastValueProduct = true;
  std::optional<unsigned> nextScoreBranch;
  /// While a branch of an attention with value_columns weighs its block of
  /// V: the block's first column and the V tile's width (0: the whole
  /// tile, every branch's).
  struct ValueBlock {
    int64_t column = 0, tileWidth = 0;
  } valueBlock;

  //===--------------------------------------------------------------------===//
  // The step, in stages
  //===--------------------------------------------------------------------===//

  /// One online-softmax step over a KV tile: beginStep, findDiagonalBand,
  /// voteOnTile (and enterKeptTile, when a tile may be skipped), planLogits,
  /// then per branch group emitBranchGroup, then the new state (newState).
  LogicalResult emitStep(OnlineStepOp step) override;

  /// What the stages of one step share. Rows are indexed [m16 tile][half],
  /// accumulators [m16 tile][nd][i].
  struct StepFrame {
    OnlineStepOp step;
    Normalizer normalizer;
    bool softmax;
    unsigned branches;
    /// V's head dim, keys per KV tile, its 8-key blocks, this thread's rows.
    int64_t dv, bn, blocks, rows;
    /// value_columns: each branch's first column of V (empty: every
    /// branch weighs all of V).
    SmallVector<int64_t> columns;
    /// V's view, the tile's key count and (batch, head, query, key) offsets,
    /// the tensors' last query row and key.
    View values;
    Value kn, b0, h0, q0, k0, lastRow, lastKey;
    /// The incoming state, flattened, and per branch (max and sum: softmax).
    SmallVector<Value> state;
    SmallVector<SmallVector<Value>> m, l, acc;
    /// maskPartialTile's mask values per element [mt][nb][i]; else empty.
    SmallVector<Value> maskBits;
    /// findDiagonalBand's band, i - j at each m16 tile's first element, and
    /// the keys left from this thread's first column (i32).
    std::optional<DiagonalBand> band;
    SmallVector<Value> bandBase;
    Value columnsLeft;
    /// planLogits's, per branch: the logit's scale, the exponent's factor
    /// (0: none), whether the max is taken on the raw scores; the relative
    /// terms and their table; staged reads; gathers issued before S.
    SmallVector<double> scale, factor;
    SmallVector<bool> rawMax;
    RelativeTerms relative;
    Value tableBase;
    bool staged = false, early = false;
    /// The new state, per branch.
    SmallVector<SmallVector<Value>> newMax, newSum, newAcc;
  };

  /// The frame of `step`: its offsets, bounds and incoming state.
  StepFrame beginStep(OnlineStepOp step);
  /// This thread's (row, key) indices of element i of block nb of m16 tile
  /// mt, clamped into the tensors, and its column in the tile.
  std::pair<Value, SmallVector<Value>>
  elementIndices(const StepFrame &f, int64_t mt, int64_t nb, int64_t i);
  /// The mask region's value at an element (maskBits, once evaluated).
  Value maskOf(const StepFrame &f, int64_t mt, int64_t nb, int64_t i);
  /// A mask that is exactly a diagonal band (a sliding window, causal) on
  /// static lengths below 2^30: keeps() then tests i - j with 32-bit
  /// compares against immediates.
  void findDiagonalBand(StepFrame &f);
  /// Whether an element is kept: within the tile's keys and the mask (the
  /// band's compares, or the mask region).
  Value keeps(const StepFrame &f, int64_t mt, int64_t nb, int64_t i);

  /// Whether the tile is computed at all (null: always), and whether its
  /// mask must be evaluated per element (null: never; a full tile keeps
  /// every element).
  struct TileVote {
    Value anyKept, partial;
  };
  /// Lets the step's copies land; a mask that votesOnTiles is first
  /// evaluated on the whole tile (or read from the block mask).
  TileVote voteOnTile(const StepFrame &f);
  /// Opens the scf.if that skips the tile unless `anyKept`: the skipping
  /// branch keeps the copy groups in step and yields the state unchanged.
  /// Leaves the builder in the computing branch.
  scf::IfOp enterKeptTile(const StepFrame &f, Value anyKept);

  /// The logits' scale and the exponent's factor per branch, how the score
  /// region's per-element inputs come (scoreRegionInputs), and the
  /// relative-position table, filled.
  void planLogits(StepFrame &f);

  /// The branches `groups[g]`: S, the score region and mask, the softmax
  /// and P V (the last group's S is followed by the next K's prefetch).
  void emitBranchGroup(StepFrame &f, ArrayRef<SmallVector<unsigned>> groups,
                       size_t g, Value partial);
  /// What the score region's ops need beforehand per element [mt][nb][i]:
  /// its gathers (f.early), relative-position terms or staged reads.
  SmallVector<IRMapping> scoreRegionInputs(const StepFrame &f);
  /// S = Q K^T of each branch of `groups[g]`, per branch.
  SmallVector<Fragments> scoreProducts(const StepFrame &f,
                                       ArrayRef<SmallVector<unsigned>> groups,
                                       size_t g);
  /// Evaluates the mask of every element into maskBits, on partial tiles
  /// only (`partial`; elsewhere every element is kept).
  void maskPartialTile(StepFrame &f, Value partial);
  /// Stores the terms that keep every dim of two elements of one row,
  /// adjacent columns (`indices`: the first's), as 8-byte pairs.
  void storeTermPairs(OnlineStepOp step, ValueRange first, ValueRange second,
                      Value keepFirst, Value keepSecond,
                      ArrayRef<Value> indices);
  /// Adds this thread's row sums of the row terms (`partials`, addTerms'
  /// rowPartials, of the row at `indices`) to their terms: summed over the
  /// quad that holds the row first, one atomic add per row and term.
  void flushRowTerms(OnlineStepOp step, ArrayRef<Value> partials,
                     ArrayRef<Value> indices);
  /// Whether element `i` of block `nb` of m-tile `mt` is an element of the
  /// problem, not a partial tile's padding (null where the lengths are
  /// aligned: every element is).
  Value inBounds(const StepFrame &f, int64_t mt, int64_t nb, int64_t i);
  /// Turns the scores `s` of `group` into logits (the scale, the score
  /// region with inputs `pre`, the mask) and adds the step's terms; returns
  /// whether each element is kept, [mt][nb][i].
  Fragments applyScoreAndMask(const StepFrame &f, ArrayRef<unsigned> group,
                              MutableArrayRef<Fragments> s,
                              ArrayRef<IRMapping> pre);
  /// Branch r's weights in `s`, its new row max and sum (softmax); returns
  /// the rows' rescale alpha (null: 1).
  SmallVector<Value> weigh(StepFrame &f, unsigned r, Fragments &s,
                           const Fragments &kept);
  /// O = alpha O + P V of branch r; `last`: the step's last P V.
  void accumulate(StepFrame &f, unsigned r, const Fragments &s,
                  ArrayRef<Value> alpha, bool last);
  /// Runs once a group's weights are all computed, before its P Vs
  /// (several branches: `weights` in branch order).
  virtual void groupWeighed(ArrayRef<const Fragments *> weights, int64_t bn) {}
  /// The key-side product (attn.online_step's key_side) of branch r's
  /// weights `w`, in two halves: stageKeySide once the weights are
  /// computed (before the P Vs), keySideProduct after the group's P Vs are
  /// issued. The wgmma generator's; the plan takes no other tensor-core
  /// generator for it.
  virtual void stageKeySide(StepFrame &f, const Fragments &w) {}
  virtual void keySideProduct(StepFrame &f, unsigned r) {}
  /// The step's key-side branch if it is in `group`.
  std::optional<unsigned> keySideIn(const StepFrame &f,
                                    ArrayRef<unsigned> group) {
    std::optional<uint64_t> r = OnlineStepOp(f.step).getKeySideBranch();
    if (!keySideOut || !r || !llvm::is_contained(group, unsigned(*r)))
      return std::nullopt;
    return unsigned(*r);
  }
  /// weigh then accumulate, one branch.
  void weighAndAccumulate(StepFrame &f, unsigned r, Fragments &s,
                          const Fragments &kept, bool last);
  /// Softmax: branch r's new row max and the rescale `alpha` of each row,
  /// and the exponent's offset (the new max; 0 while a row kept nothing).
  void updateRowMax(StepFrame &f, unsigned r, const Fragments &s,
                    MutableArrayRef<Value> alpha,
                    SmallVectorImpl<Value> &offset);
  /// Replaces the logits `s` of branch r by their weights (exp2 under
  /// softmax, else the normalizer of kept elements); returns the rows'
  /// sums (softmax; this thread's part).
  SmallVector<Value> rowWeights(const StepFrame &f, unsigned r, Fragments &s,
                                const Fragments &kept, ArrayRef<Value> offset);
  /// The new state, flattened: every branch's max, then sums, then
  /// accumulators.
  SmallVector<Value> newState(const StepFrame &f);

  //===--------------------------------------------------------------------===//
  // The finalize
  //===--------------------------------------------------------------------===//

  /// The epilogue's reads at (b | h | q | constant..., d) of a capture whose
  /// rows hold an even number of elements: the thread's two columns d and
  /// d + 1 (d even) come from one load of both, mapped into paired[0] and
  /// paired[1] (Evoformer's gate: 64 16-bit loads a thread became 32).
  void pairEpilogueReads(attn::OnlineFinalizeOp fin, ArrayRef<Value> indices,
                         MutableArrayRef<IRMapping> paired);

  /// Stores the output block: `pairs` holds the thread's column pairs
  /// (d, d + 1), ordered [m16 tile][8 columns][row half]. Here, one aligned
  /// two-element store each (per-element stores made the epilogue
  /// store-bound); the manifest asks for 16-byte aligned tensors.
  virtual void storeOutput(const FinalizeTarget &target, Value q0,
                           ArrayRef<Value> pairs);

  LogicalResult emitFinalize(OnlineFinalizeOp fin) override;
};

} // namespace flashlight::attn_to_gpu

#endif // FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_MMASYNC_H
