//===- MaskScoreAnalysis.h - Structure of mask and score regions -*- C++ -*-=//
//
// Reads the regions of an attn op and says what they compute, in the terms
// the tiling and kernel generation need: which (q_idx, kv_idx) pairs the mask
// keeps (a band around the diagonal, a prefix, chunks, or data-dependent),
// how each logit is modified (not at all, by an additive bias, or otherwise),
// and which captured tensors are read, indexed by what.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_DIALECT_ATTN_ANALYSIS_MASKSCOREANALYSIS_H
#define FLASHLIGHT_DIALECT_ATTN_ANALYSIS_MASKSCOREANALYSIS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace flashlight::attn {

/// What a mask region keeps.
enum class MaskKind {
  /// No mask region: every key is kept.
  None,
  /// kv_idx <= q_idx + offset (offset = -band.lo).
  Causal,
  /// kv_idx >= q_idx - offset (offset = band.hi): a causal mask seen from
  /// the keys (the gradient's dK and dV attend from the keys to the
  /// queries that see them).
  ReverseCausal,
  /// band.lo <= q_idx - kv_idx <= band.hi, both bounds finite.
  SlidingWindow,
  /// kv_idx < prefixLength, or inside the band (prefix-LM); with
  /// prefixOnQueries, q_idx < prefixLength, or inside the band (the
  /// prefix-LM seen from the keys: the gradient's dK and dV attend from
  /// every prefix key to every query).
  Prefix,
  /// q_idx / chunkSize == kv_idx / chunkSize, and inside the band if any.
  Chunked,
  /// Reads a captured tensor (document ids, a dense mask, ...).
  DataDependent,
  /// A function of the indices that matches none of the shapes above.
  Custom,
};

/// Inclusive bounds on `d = q_idx - kv_idx`; std::nullopt means unbounded.
struct DiagonalBand {
  std::optional<int64_t> lo, hi;
  bool isUnbounded() const { return !lo && !hi; }
};

/// The structure of a mask region.
struct MaskInfo {
  MaskKind kind = MaskKind::None;
  /// Kept diagonals. For every kind but Prefix, every kept (q_idx, kv_idx)
  /// lies inside the band (for DataDependent and Custom it is the bound the
  /// index-only conjuncts give, possibly unbounded); for Prefix, a pair is kept
  /// iff kv_idx < prefixLength (q_idx with prefixOnQueries) or it lies
  /// inside the band.
  DiagonalBand band;
  /// Prefix: keys with kv_idx < prefixLength are kept for every query.
  int64_t prefixLength = 0;
  /// Prefix: the prefix is of queries instead (q_idx < prefixLength keeps
  /// every key).
  bool prefixOnQueries = false;
  /// Chunked: the chunk size.
  int64_t chunkSize = 0;
};

/// How a score region modifies one branch's logit `s`.
enum class ScoreKind {
  /// new_s = s.
  Identity,
  /// new_s = s + f(indices, captures), f independent of every logit.
  AdditiveBias,
  /// Anything else (softcap, products of logits, ...).
  General,
};

/// What selects a captured tensor's index along one dimension.
enum class IndexRole {
  Batch,    ///< the b index
  Head,     ///< the (query) head index h
  Query,    ///< q_idx
  Key,      ///< kv_idx (score and mask regions)
  Column,   ///< d, the output column (epilogue)
  Constant, ///< a constant (broadcast dims are read at 0)
  Affine,   ///< another affine function of the indices (e.g. q_idx - kv_idx)
  Computed, ///< a non-affine function of the indices (e.g. a bucket of q-k)
  Indirect, ///< a value loaded from a captured tensor
};

/// How one dimension of a captured tensor is indexed.
struct DimAccess {
  IndexRole role;
  /// The constant, for IndexRole::Constant.
  int64_t constant = 0;
};

/// One `tensor.extract` of a captured tensor inside a region.
struct CaptureAccess {
  /// Position of the tensor in the op's captures.
  unsigned capture;
  /// "score", "mask" or "epilogue".
  llvm::StringRef region;
  llvm::SmallVector<DimAccess> dims;
};

/// Analysis of the score, mask and epilogue regions of `attn.attention`,
/// `attn.online_step` or `attn.online_finalize`. Constructed from the op;
/// the op must verify.
class MaskScoreAnalysis {
public:
  explicit MaskScoreAnalysis(mlir::Operation *op);

  const MaskInfo &getMask() const { return mask; }
  /// How branch `branch`'s logit is modified.
  ScoreKind getScoreKind(unsigned branch) const { return scoreKinds[branch]; }
  /// True when every branch's new logit is its old one plus a term that
  /// depends only on (b, h, q_idx, kv_idx) and captured tensors.
  bool scoreDependsOnlyOnIndices() const;
  /// True when the score region reads a captured tensor.
  bool scoreReadsCaptures() const { return scoreReads; }
  /// Every read of a captured tensor, in region order.
  llvm::ArrayRef<CaptureAccess> getCaptureAccesses() const { return accesses; }

  /// One-line summary, e.g. "mask=causal(offset=0) score=[additive]".
  std::string describe() const;

  /// Whether every query row keeps at least one key whatever the data
  /// (causal from the top left, a band around the diagonal, a prefix): no
  /// row of the attention can be fully masked.
  bool rowsNeverEmpty() const;

private:
  mlir::Operation *op;
  MaskInfo mask;
  llvm::SmallVector<ScoreKind> scoreKinds;
  bool scoreReads = false;
  llvm::SmallVector<CaptureAccess> accesses;
};

llvm::StringRef stringifyMaskKind(MaskKind kind);
llvm::StringRef stringifyScoreKind(ScoreKind kind);
llvm::StringRef stringifyIndexRole(IndexRole role);

} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_ANALYSIS_MASKSCOREANALYSIS_H
