//===- KernelEmitter.h - Walk a tiled attention into a kernel ---*- C++ -*-===//
//
// The structure of a tiled attention (attn-tile's output) is the same for
// every code generator: index math, slices of the arguments, the KV loop
// carrying the online state, the full/partial scf.if, the step and the
// finalize. KernelEmitter walks it and leaves to a subclass how state is
// distributed over threads, how slices are staged and how a step and the
// finalize compute. Private to the AttnToGPU conversion.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_KERNELEMITTER_H
#define FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_KERNELEMITTER_H

#include "flashlight/Conversion/HostToGPU.h"
#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"
#include "flashlight/Dialect/Attn/Analysis/KernelFacts.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include <memory>

namespace flashlight::attn_to_gpu {

using namespace mlir;
using namespace flashlight::attn;

constexpr int64_t kThreadsPerWarp = 32;
constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

/// A slice of a kernel argument: the memref and the slice's offsets/sizes.
struct View {
  Value memref;
  SmallVector<Value> offsets, sizes;
};

/// Walks a tiled attention and emits its kernel body; see the file comment.
class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  virtual ~KernelEmitter() = default;

  /// Kernel memref standing for a function argument or result tensor.
  DenseMap<Value, Value> memrefOf;
  /// Kernel memref each finalize result is stored to.
  DenseMap<Value, Value> outputOf;
  /// Values of the source IR (index math, constants) in the kernel.
  IRMapping map;
  /// This thread's lane, warp and index in the block.
  Value lane, warp, thread;

  /// Converts the ops of `block`, up to `stop` or the terminator.
  LogicalResult convertOps(Block &block, Operation *stop = nullptr);

  /// A persistent kernel (the plan's `persistent`): each block loops over
  /// work tiles. The emitter forks its roles once and calls `loopOverTiles`
  /// on each side of the fork (the emitter knows which side it converts),
  /// which converts the work tile's ops once per tile. Emitters without
  /// roles to fork refuse.
  virtual LogicalResult
  emitPersistent(function_ref<LogicalResult()> loopOverTiles) {
    return failure();
  }
  /// In a persistent kernel: the KV tiles this block visited before the
  /// current work tile (its mbarriers' phases go on from there), and after
  /// a work tile's conversion, the KV tiles it visits.
  Value tileBase, kvTiles;
  /// In a persistent kernel: the work tiles this block took before the
  /// current one (which of Q's two buffers it uses, and their phases).
  Value workIndex;
  /// The plan's tile counter (a kernel parameter, two i32: the next work
  /// tile to draw, the blocks done); null without one.
  Value tileCounter;
  /// With a tile counter: the block's `workIndex`-th work tile as the side
  /// being emitted learns it (the producer draws it from the counter, the
  /// consumers read what it drew), `total` or more past the last one.
  /// Emitters without a tile counter refuse (null).
  virtual Value nextWorkTile(Value workIndex, Value total) { return Value(); }
  /// With a tile counter: after the side's last work tile (the producer
  /// counts the block done; the last block leaves the counter zero).
  virtual void endWorkTiles() {}

  /// The key-side product's output (attn.attention's `key_side`), which the
  /// launcher zeroes and every block adds to; null without one.
  Value keySideOut;
  /// Sets keySideOut to the kernel parameter `out` and marks the tensors
  /// that carry a key-side contribution in `root` (markKeySide). A
  /// generator that adds otherwise than per element prepares its means
  /// here (wgmma's bulk adds: the output's tensor map).
  virtual LogicalResult setKeySide(Value out, Operation *root) {
    keySideOut = out;
    markKeySide(root);
    return success();
  }
  /// Marks the tensors that carry a key-side contribution or a term in
  /// `root` (the steps' key_side and term operands and results, the loops
  /// and branches that carry them): they hold no per-thread values, since
  /// each step adds to `keySideOut` and `termOuts` directly.
  void markKeySide(Operation *root);

  /// The terms' outputs (attn.attention's `terms`), in order, which the
  /// launcher zeroes and every element of a step adds to; empty without.
  SmallVector<Value> termOuts;
  /// Sets termOuts and marks the tensors that carry them in `root`.
  void setTerms(ArrayRef<Value> outs, Operation *root) {
    termOuts.assign(outs.begin(), outs.end());
    markKeySide(root);
  }

protected:
  /// Per-thread values a state tensor (or a register-held tile) takes.
  virtual int64_t laneCount(Type stateType) = 0;
  /// Adds one element's terms (`values`: the score region's yields after
  /// the logits, at the element's (b, h, q_idx, kv_idx) `indices`; `keep`
  /// whether the mask keeps it, `inBounds` (null: true) whether it is an
  /// element of the problem, not a partial tile's padding) to termOuts: a
  /// term that keeps every dim is stored (each element is visited once),
  /// others are added atomically, but with `partials`, terms that keep
  /// neither q_idx nor kv_idx (a per-head sum), whose sums this thread
  /// collects there (flushTerms adds them), and with `rowPartials`, terms
  /// that keep q_idx but not kv_idx (row sums), collected there per row
  /// (the caller keeps one vector per row it holds and adds them).
  /// With `skipStored`, terms that keep every dim are left to the caller
  /// (who stores two elements at once: termStored).
  void addTerms(OnlineStepOp step, ValueRange values, ArrayRef<Value> indices,
                Value keep, Value inBounds,
                SmallVectorImpl<Value> *partials = nullptr,
                bool skipStored = false,
                SmallVectorImpl<Value> *rowPartials = nullptr);
  /// Whether term `e` of `step` keeps every dim (addTerms stores it).
  bool termStored(OnlineStepOp step, unsigned e);
  /// Adds each thread's `partials` (addTerms') to their terms at `indices`
  /// (the step's, whose (b, h) every element shares): summed over the warp
  /// first, one atomic add per warp. Every lane of the warp calls it.
  void flushTerms(OnlineStepOp step, ArrayRef<Value> partials,
                  ArrayRef<Value> indices);

  /// laneCount of `v`'s type; none for a key-side tensor.
  int64_t lanesOf(Value v) {
    return keySide.contains(v) ? 0 : laneCount(v.getType());
  }
  /// markKeySide's tensors.
  DenseSet<Value> keySide;
  /// Called for every slice of an argument (`sliced`, a tensor of rank 4)
  /// once its view is known: stage it (registers, shared memory) as the
  /// code generator needs.
  virtual LogicalResult onSlice(Value sliced, const View &view) = 0;
  virtual LogicalResult emitStep(OnlineStepOp step) = 0;
  virtual LogicalResult emitFinalize(OnlineFinalizeOp fin) = 0;

  OpBuilder &b;
  Location loc;
  DenseMap<Value, View> views;
  /// Per-thread values of state tensors and of register-held tiles.
  DenseMap<Value, SmallVector<Value>> lanes;
  /// Lower bounds of the (converted) loops around the op being converted.
  SmallVector<Value> loopLowerBounds;

  //===--------------------------------------------------------------------===//
  // Small builders
  //===--------------------------------------------------------------------===//

  /// A score region's logit floored at -1e5 (a softmax's). A program's
  /// finite mask fill (finfo.min added to the scores) is otherwise beyond
  /// what the exp2 step takes: scaled by log2(e) it overflows to -inf (a row
  /// of them gives 0, not the program's mean of V), and near -1e30 the FMA
  /// `x * f - m * f` leaves a residual of ~1e23 (exp2 of it is inf, then
  /// inf * 0 = NaN). At -1e5 the residual is below 0.004 and exp2 of any
  /// floored logit beside a real one is 0; no real logit is that low.
  Value floorLogit(Value x) {
    return arith::MaximumFOp::create(b, loc, x, f32(-1e5));
  }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value addI(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value minI(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  /// The generator's own float arithmetic may contract into fma (as nvcc's
  /// default does); user regions keep their ops' flags.
  static constexpr arith::FastMathFlags kContract =
      arith::FastMathFlags::contract;
  /// A logit's chain (scale, score region, the exponent's factor) may also
  /// reassociate, so that its constant factors fold: sigmoid's
  /// (s * scale + bias) * -log2 e is one FFMA per logit instead of an FFMA
  /// and an FMUL. The row sums and rescales keep their order: nothing there
  /// folds.
  static constexpr arith::FastMathFlags kLogit =
      arith::FastMathFlags::contract | arith::FastMathFlags::reassoc;
  /// x * y in a logit's chain (kLogit).
  Value mulLogit(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, kLogit);
  }
  Value add(Value x, Value y) {
    return arith::AddFOp::create(b, loc, x, y, kContract);
  }
  Value mul(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, kContract);
  }
  Value sub(Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y, kContract);
  }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  /// `values` combined pairwise by `combine` (a tree of depth log2 n, not a
  /// chain of n): a softmax row's max, whose chain of fixed-latency
  /// dependencies delays every exponential of the row.
  Value pairwise(ArrayRef<Value> values,
                 llvm::function_ref<Value(Value, Value)> combine);
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value exp2(Value x) { return math::Exp2Op::create(b, loc, x); }
  /// exp2 that flushes subnormal results to 0: one MUFU.EX2, where math.exp2
  /// (ex2.approx.f32) costs a compare and two predicated multiplies around it
  /// to scale subnormals. For softmax weights and rescales (exponents <= 0),
  /// anything below 2^-126 is 0 next to the row max's weight of 1.
  Value exp2Ftz(Value x);
  /// 1 / y on the FMA pipe: a bit-trick estimate (0x7EF311C7 minus y's
  /// bits, within 5.1 %) and two Newton steps, within 6.6e-6 for y >= 1
  /// (checked over [1, 2^40] in f32). y is clamped to 1e30 first, so that
  /// y = inf gives about 0, as rcp.approx does.
  Value reciprocalOnFma(Value y);
  /// 1 / (1 + 2^(-x log2 e)) with ex2.approx.ftz and rcp.approx.ftz: two
  /// MUFU instructions and an FMA, where math.exp and an IEEE division cost
  /// a dozen (the division's slow path included). Both approximations are
  /// within a few ulp; a large -x gives rcp(inf) = 0, a large x 1. With
  /// `fmaReciprocal`, the reciprocal is on the FMA pipe (reciprocalOnFma).
  Value sigmoid(Value x, bool fmaReciprocal = false);
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value cmpF(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value cmpI(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value dim(Value memref, int64_t d) {
    return memref::DimOp::create(b, loc, memref, d);
  }

  /// Where a finalize stores: the output memref and the (batch, head)
  /// offsets of its block.
  struct FinalizeTarget {
    Value out;
    MemRefType type;
    Value b0, h0;
  };
  /// `fin`'s target; an error when its result is not an output.
  FailureOr<FinalizeTarget> finalizeTarget(OnlineFinalizeOp fin);
  /// Loads `memref[indices]` as f32.
  Value loadF32(Value memref, ValueRange indices);

  /// Final normalization of one softmax row from its base-2 state (max `m`,
  /// sum `l`): the factor that turns the accumulator into the output, and
  /// the natural-log LSE. With `sink` (a [H] memref read at `head`), the
  /// sink is one more key with that logit and value 0; without, a row with no
  /// kept key (l = 0) gives output 0 and LSE -inf.
  std::pair<Value, Value> normalizeRow(Value m, Value l, Value sink,
                                       Value head);

  /// Sum over the warp; every lane gets the result.
  Value warpSum(Value x);

  /// Inlines a region of an attn op: `leading` then the four indices then
  /// the captures (as memrefs; tensor.extract becomes memref.load). With
  /// `pre` (inlineIndependent's), the ops it holds are not cloned again.
  SmallVector<Value> inlineRegion(Region &region, ValueRange leading,
                                  ArrayRef<Value> indices, ValueRange captures,
                                  const IRMapping *pre = nullptr);

  /// The ops of `region` that do not depend on its first `numLeading` block
  /// arguments (a score region's logits), inlined here: inlineRegion then
  /// completes them. A per-element gather (a bias table) issued before
  /// S = Q K^T has its latency hidden behind the product.
  /// Ops whose results `rm` already maps (reads from a staged tile) stay.
  IRMapping inlineIndependent(Region &region, unsigned numLeading,
                              ArrayRef<Value> indices, ValueRange captures,
                              IRMapping rm = IRMapping());

  /// Maps a region's index then capture block arguments, from `first` on.
  void mapIndicesAndCaptures(Block &block, IRMapping &rm, unsigned first,
                             ArrayRef<Value> indices, ValueRange captures);

  /// Clones one op of a region whose first `numLeading` block arguments
  /// precede the indices.
  void inlineOp(Operation &op, IRMapping &rm, unsigned numLeading);
  /// Set while inlining an epilogue whose result is stored in 16 bits:
  /// its divisions and math functions may be approximate (afn:
  /// div.approx.f32, __nv_fast_expf, ...). Their f32 errors (a few ulp;
  /// fast exp's grow with |x|, to ~1e-5 relative at |x| = 80) vanish in
  /// the store's rounding (2^-9 for bf16, 2^-12 for f16). Evoformer's gate,
  /// sigmoid(g) = 1 / (1 + exp(-g)), took an IEEE division (with its slow
  /// path) and an accurate exp per output element. Also set while inlining
  /// a tensor-core kernel's score region: its logits become weights
  /// rounded to 16 bits (sigmoid attention's gradient program computes
  /// 1 / (1 + exp(-s)) per element: 2.1-2.4x faster with afn). Ops whose
  /// results are compared, converted to integers or rounded to integral
  /// values stay exact (inlineOp).
  bool approximateFunctions = false;

  /// `memref[ids]` loaded once where its indices are all defined, outside
  /// any loop (the kernel's entry block), and reused; null when an index is
  /// defined elsewhere. Captures are read-only inputs, so the load may move.
  Value loadOnce(Value memref, ArrayRef<Value> ids);
  /// loadOnce's loads: ({memref, indices...}, value).
  SmallVector<std::pair<SmallVector<Value>, Value>> loadedOnce;

  /// Flattens the per-lane values of `values`.
  SmallVector<Value> flatten(ValueRange values);
  /// Flattens `loop`'s init values, but those of key-side iteration
  /// arguments: their init is a zero fill, which CSE may share with a
  /// state's (same type), so the argument, not the value, decides.
  SmallVector<Value> flattenInits(scf::ForOp loop);

  /// Distributes `flat` over `values` by their lane counts.
  void distribute(ValueRange values, ValueRange flat);

  //===--------------------------------------------------------------------===//
  // Ops of the tiled form
  //===--------------------------------------------------------------------===//

  /// Converts one op of the tiled form: index math is cloned, slices and
  /// casts of arguments become views, fills and the loop's and branch's
  /// results become per-thread values, and the step and the finalize go to
  /// the code generator.
  LogicalResult convertOp(Operation &op);

  /// The view of a slice of an argument, then onSlice.
  LogicalResult convertSlice(tensor::ExtractSliceOp slice);

  /// What a slice feeds in a step: the query or key of one of the step's
  /// `branches` logit branches, or the value.
  struct Role {
    enum Kind { Query, Key, Values } kind;
    unsigned branch, branches;
  };
  /// The roles of `v` (directly or through tensor.cast), queries first,
  /// then keys, then the value: one slice may feed several (a K shared by
  /// two branches; K and V of the same tensor, merged by CSE).
  static SmallVector<Role> rolesOf(Value v);

  /// An offset or size of the source IR as a kernel value.
  Value materialize(OpFoldResult ofr);

  /// The KV loop, carrying the flattened per-thread state.
  virtual LogicalResult convertFor(scf::ForOp loop);

  /// The full/partial scf.if, yielding the flattened per-thread state.
  LogicalResult convertIf(scf::IfOp branch);
};

/// One warp per query row, lanes across the head dim; no tensor cores. The
/// reference code generator: correct for every program.
std::unique_ptr<KernelEmitter> createRowPerWarpEmitter(OpBuilder &b,
                                                       Location loc);

/// The shared-memory tiles of the tensor-core generator: one K tile per
/// logit branch and V ([block-n, D + 8]) and, when Q is read from shared
/// memory each step rather than held in registers, one Q tile per branch
/// ([block-m, D + 8]; else none).
struct MmaTiles {
  SmallVector<Value, 2> keys, queries;
  Value values;
  /// wgmma without a block-wide barrier per step: 4 mbarriers (i64) in
  /// shared memory, K/V buffer 0 and 1 full, then empty (with a producer,
  /// 8: those for K, then for V); else null.
  Value barriers;
  /// The relative-position tables (f32, [warp][buffer][term][position]),
  /// when the score region has RelativeTerms; else null.
  Value relative;
  /// wgmma: one tile per stagedTileReads() read, [2 * rows, block-n + 16
  /// bytes] (rows: block-m, or 1 for a row uniform over the block),
  /// double-buffered as K is; and those reads (of one of the
  /// kernel's steps: every step's score region reads the same).
  SmallVector<Value, 2> staged;
  SmallVector<tensor::ExtractOp, 2> stagedReads;
  /// wgmma with a key-side product: one [64, block-n] weights tile per
  /// consumer warpgroup (swizzled, as a V tile), which the key-side product
  /// reads as its MN-major A operand; else null.
  Value keySideWeights;
};

/// A block mask (BlockMask.cpp): an i8 buffer [B', H', M tiles, N tiles]
/// classifying each (query tile, KV tile) of a data-dependent mask once per
/// call, written by a pre-kernel and read by the attention kernel.
struct BlockMask {
  /// What a tile's byte says.
  enum Tile : int8_t { Empty = 0, Partial = 1, Full = 2 };
  /// The buffer, a parameter of the kernel being emitted.
  Value memref;
  /// Whether the mask reads `b` / `h` (else that dim is 1, read at 0).
  bool batch = false, heads = false;
  int64_t blockM = 0, blockN = 0;

  /// The byte's indices for the tile at (b0, h0, q0, k0).
  SmallVector<Value> indices(OpBuilder &b, Location loc, Value b0, Value h0,
                             Value q0, Value k0) const;
};

/// The block mask `step` would use (without its memref): whether its mask
/// region reads `b` and `h`.
BlockMask blockMaskOf(OnlineStepOp step, int64_t blockM, int64_t blockN);

/// The pre-kernel's code generator: a block of `threads` threads per
/// (query tile, KV tile); block id x is `queryTile * N tiles + kvTile`.
/// `kvTile` is that KV tile's index.
std::unique_ptr<KernelEmitter>
createBlockMaskEmitter(OpBuilder &b, Location loc, const BlockMask &mask,
                       Value kvTile, int64_t threads);

/// Tensor cores (mma.sync m16n8k16, ldmatrix), warps of the plan's
/// warp_rows query rows. With `mask.memref`, a mask that votesOnTiles reads
/// the block mask instead.
std::unique_ptr<KernelEmitter> createMmaSyncEmitter(OpBuilder &b, Location loc,
                                                    const MmaTiles &tiles,
                                                    KernelPlanAttr plan,
                                                    const BlockMask &mask);

/// Hopper warpgroup MMA (sm_90a): the mma.sync generator's structure with
/// both products on wgmma; one warpgroup (128 threads) per 64 query rows.
/// `tiles` are stored as 8x8 core matrices ([rows / 8 * D / 8, 64]); Q is
/// always in shared memory. The plan's loop form says whether the KV loop
/// is software-pipelined (each warpgroup's softmax of tile t overlaps its
/// P V of tile t - 1) or on mbarriers (with a producer warpgroup and turns),
/// and whether branches run one after the other issue the next one's S
/// before this one's softmax (lookahead).
std::unique_ptr<KernelEmitter> createWgmmaEmitter(OpBuilder &b, Location loc,
                                                  const MmaTiles &tiles,
                                                  KernelPlanAttr plan,
                                                  const BlockMask &mask);

} // namespace flashlight::attn_to_gpu

#endif // FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_KERNELEMITTER_H
