//===- KernelFacts.h - What kernel planning needs to know -------*- C++ -*-===//
//
// The facts about one attention that decide how it becomes a kernel: its
// element type and head dims, lengths, branches, the mask's structure, and
// what its score region costs per element (gathers, relative-position
// terms, tiles that can be staged with K, math functions). Computed once per
// op (KernelFacts, an analysis a pass may cache) from the regions, so that
// the planner (`attn-plan`) and the code generators read the same answers.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_DIALECT_ATTN_ANALYSIS_KERNELFACTS_H
#define FLASHLIGHT_DIALECT_ATTN_ANALYSIS_KERNELFACTS_H

#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"
#include "flashlight/Dialect/Attn/Analysis/MaskScoreAnalysis.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Region.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace flashlight::attn {

/// The largest runtime extent (batch, sequence length) a kernel compiled
/// with dynamic extents takes: the runtimes refuse larger ones (the
/// manifest's `max_extent`), so that code generators may compute a query
/// index minus a key index in 32 bits.
constexpr int64_t kMaxRuntimeExtent = (int64_t(1) << 30) - 1;

//===----------------------------------------------------------------------===//
// Region facts
//===----------------------------------------------------------------------===//

/// True when `region` (a score or mask region) reads a captured tensor at an
/// index other than the batch and head arguments: a gather per element.
/// Reads in `except` (staged ones) do not count.
bool gathersPerElement(mlir::Region &region,
                       llvm::ArrayRef<mlir::tensor::ExtractOp> except = {});

/// Whether the score region's logit r reads branch r's score s_r only (or
/// there is no region): the branches' products can then be emitted one
/// after the other.
bool separableBranches(mlir::Region &score, unsigned branches);

/// Whether the score region (whose first `numLeading` arguments are the
/// logits) calls a math-dialect function (tanh, exp, log, ...).
bool usesMathFunctions(mlir::Region &score);

/// The most score-region reads whose tiles the wgmma generator stages.
constexpr unsigned kMaxStagedReads = 2;

/// Score-region reads of a captured tensor at (b or h or constants...,
/// q_idx or b or h or a constant, kv_idx) whose rows are whole 16-byte
/// chunks (a pair bias [B, H, M, N]; a key mask bias [B, 1, 1, N]): the
/// wgmma generator copies their [block-m, block-n] tile (one row when the
/// row index is uniform over the block) with each K tile (cp.async) and
/// reads it from shared memory, rather than each thread gathering its
/// elements from global memory. At most kMaxStagedReads, in region order.
llvm::SmallVector<mlir::tensor::ExtractOp> stagedTileReads(mlir::Region &score,
                                                           unsigned numLeading);
/// Whether a stagedTileReads() read's row index is q_idx (a tile of
/// block-m rows), not uniform over the block (one row).
bool stagedPerQuery(mlir::tensor::ExtractOp read);
/// Bytes of one staged tile's row (block-n elements; its 16-byte chunks are
/// swizzled, not padded, against bank conflicts).
int64_t stagedRowBytes(mlir::tensor::ExtractOp read, int64_t blockN);

/// At most this many relative-position terms get a table.
constexpr size_t kMaxRelativeTerms = 2;

/// The terms of a score region (whose first `numLeading` arguments are the
/// logits) that depend on the query and key indices only through j - i and
/// are worth a table per warp (RelativeTerms.cpp); empty otherwise.
struct RelativeTerms {
  /// The region's ops computing from j - i, in order, and the sign of each
  /// that takes the difference itself (+1: j - i, -1: i - j).
  llvm::SmallVector<mlir::Operation *> ops;
  llvm::DenseMap<mlir::Operation *, int> differences;
  /// The f32 values of those ops that the rest of the region reads.
  llvm::SmallVector<mlir::Value> terms;
  explicit operator bool() const { return !terms.empty(); }
};
RelativeTerms relativeTerms(mlir::Region &score, unsigned numLeading);

/// Shared memory the tensor-core generator's relative-position tables take
/// at most with block-m x block-n tiles (0 without such terms).
int64_t relativeTableBytes(mlir::Region &score, unsigned numLeading,
                           int64_t blockM, int64_t blockN);

/// True when the tensor-core generator evaluates `op`'s mask (an
/// attn.attention or attn.online_step) on a whole KV tile first and skips
/// the tile if nothing is kept: masks whose kept tiles no bound describes
/// (data-dependent or of no known shape).
bool votesOnTiles(mlir::Operation *op);

/// Why the tensor-core generators cannot take an attention whose logit
/// branches have the key tensors `keys` and the value `value` (Q.K's and
/// V's head dims, the element type) and the score region `score`, on
/// `blockM` x `blockN` tiles (shared memory included), or nothing if they
/// can.
std::optional<std::string>
tensorCoreIneligibility(mlir::ValueRange keys, mlir::Value value,
                        mlir::Region &score, int64_t blockM, int64_t blockN,
                        int64_t sharedMemory, bool withWgmma);

//===----------------------------------------------------------------------===//
// KernelFacts
//===----------------------------------------------------------------------===//

/// How many KV tiles `attn-tile`'s loop visits, as canonicalization leaves
/// it: none (the loop is removed), one (folded into straight-line code) or
/// a loop.
enum class KVTiles { None, One, Loop };

/// The facts of one attn.attention the kernel planner reads; see the file
/// comment. Constructible from the op alone, so a pass may cache it
/// (`getChildAnalysis`).
class KernelFacts {
public:
  explicit KernelFacts(mlir::Operation *attention);

  /// The op the facts are about.
  mlir::Operation *getOp() const { return op; }
  /// Q/K/V's element type.
  mlir::Type getElementType() const { return elementType; }
  /// Logit branches.
  unsigned getNumBranches() const { return branches; }
  /// The smallest head dim of Q.K and V, and V's (with value_columns, the
  /// widest branch block's: what one branch accumulates).
  int64_t getSmallestHeadDim() const { return smallestHeadDim; }
  int64_t getValueHeadDim() const { return valueHeadDim; }
  /// The head dims of Q.K summed over the branches.
  int64_t getKeyHeadDimSum() const { return keyHeadDimSum; }
  /// min(M, N), dynamic if either is.
  int64_t getShortestLength() const { return shortestLength; }
  /// The mask's structure.
  const MaskInfo &getMask() const { return mask; }
  /// A mask no bound describes (votesOnTiles).
  bool votesOnTiles() const { return votes; }
  /// No score region, and no mask or a causal or prefix one.
  bool isLean() const { return lean; }
  /// No mask, or a causal or prefix one.
  bool hasPlainMask() const { return plainMask; }
  /// The score region gathers per element (outside the staged reads).
  bool gathersPerElement() const { return gathers; }
  /// The score region is plain arithmetic: no gather, staged tile,
  /// relative-position term or math function (or there is none).
  bool hasPlainScore() const { return plainScore; }
  /// The score region is arithmetic that wgmma can feed (no math function,
  /// no gather beyond staged reads).
  bool hasArithmeticScore() const { return arithmeticScore; }
  /// The score region has relative-position terms worth a table, and how
  /// many.
  bool hasRelativeTerms() const { return relativeTermCount > 0; }
  int64_t getRelativeTermCount() const { return relativeTermCount; }
  /// Reads wgmma can stage with K (stagedTileReads).
  llvm::ArrayRef<mlir::tensor::ExtractOp> getStagedReads() const {
    return stagedReads;
  }

  /// Why the tensor-core generators cannot take the attention on `blockM`
  /// x `blockN` tiles within `sharedMemory` bytes a block (`withWgmma`: as
  /// the larger of wgmma's and mma.sync's layouts, else mma.sync's), or
  /// nothing.
  std::optional<std::string> tensorCoreIneligibility(int64_t blockM,
                                                     int64_t blockN,
                                                     int64_t sharedMemory,
                                                     bool withWgmma) const;
  /// What `attn-tile` on `blockM` x `blockN` tiles leaves of the KV loop
  /// after canonicalization: a loop unless its bounds (the mask's band for
  /// the query tile) are constants at most one tile apart.
  KVTiles getKVTiles(int64_t blockM, int64_t blockN) const;

private:
  mlir::Operation *op;
  mlir::Type elementType;
  unsigned branches = 1;
  int64_t smallestHeadDim = 0, valueHeadDim = 0, keyHeadDimSum = 0;
  int64_t queryLength = 0, keyLength = 0, shortestLength = 0;
  MaskInfo mask;
  bool hasMask = false, votes = false, lean = false, plainMask = false,
       gathers = false, plainScore = false, arithmeticScore = false;
  int64_t relativeTermCount = 0;
  llvm::SmallVector<mlir::tensor::ExtractOp> stagedReads;
};

} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_ANALYSIS_KERNELFACTS_H
