//===- KernelFacts.cpp - What kernel planning needs to know ---------------===//

#include "flashlight/Dialect/Attn/Analysis/KernelFacts.h"
#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"
#include "flashlight/Dialect/Attn/IR/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace flashlight::attn;

//===----------------------------------------------------------------------===//
// Region facts
//===----------------------------------------------------------------------===//

bool flashlight::attn::votesOnTiles(Operation *op) {
  auto program = cast<ScoreProgramOpInterface>(op);
  if (program.getMaskRegion().empty())
    return false;
  MaskKind kind = MaskScoreAnalysis(op).getMask().kind;
  return kind == MaskKind::DataDependent || kind == MaskKind::Custom;
}

bool flashlight::attn::separableBranches(Region &score, unsigned branches) {
  if (score.empty())
    return true;
  Block &block = score.front();
  for (auto [r, logit] :
       llvm::enumerate(block.getTerminator()->getOperands())) {
    SmallVector<Value> work = {logit};
    DenseSet<Value> seen;
    while (!work.empty()) {
      Value x = work.pop_back_val();
      if (!seen.insert(x).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(x)) {
        if (arg.getOwner() == &block && arg.getArgNumber() < branches &&
            arg.getArgNumber() != r)
          return false;
        continue;
      }
      // Region ops only: the score region is isolated from above.
      llvm::append_range(work, x.getDefiningOp()->getOperands());
    }
  }
  return true;
}

bool flashlight::attn::gathersPerElement(Region &region,
                                         ArrayRef<tensor::ExtractOp> except) {
  // Block arguments 1 and 2 are the batch and head: uniform per tile.
  return region
      .walk([&](tensor::ExtractOp extract) {
        if (llvm::is_contained(except, extract))
          return WalkResult::advance();
        bool perElement = llvm::any_of(extract.getIndices(), [](Value index) {
          auto arg = dyn_cast<BlockArgument>(index);
          return !arg || (arg.getArgNumber() != 1 && arg.getArgNumber() != 2);
        });
        return perElement ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

SmallVector<tensor::ExtractOp>
flashlight::attn::stagedTileReads(Region &score, unsigned numLeading) {
  SmallVector<tensor::ExtractOp> reads;
  if (score.empty())
    return reads;
  Block &block = score.front();
  auto isArg = [&](Value v, unsigned n) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &block && arg.getArgNumber() == n;
  };
  // Batch, head or a constant: one value for the whole block.
  auto isUniform = [&](Value index) {
    return isArg(index, numLeading) || isArg(index, numLeading + 1) ||
           index.getDefiningOp<arith::ConstantOp>();
  };
  block.walk([&](tensor::ExtractOp read) {
    auto type = cast<RankedTensorType>(read.getTensor().getType());
    int64_t rank = type.getRank();
    if (rank < 2 || reads.size() == kMaxStagedReads ||
        !isa<BlockArgument>(read.getTensor()) ||
        !isArg(read.getIndices()[rank - 1], numLeading + 3))
      return;
    Value row = read.getIndices()[rank - 2];
    if (!isArg(row, numLeading + 2) && !isUniform(row))
      return;
    // Rows of whole 16-byte chunks: a chunk is in the tensor or past it.
    int64_t bits = type.getElementTypeBitWidth(), n = type.getDimSize(rank - 1);
    if ((bits != 16 && bits != 32) || ShapedType::isDynamic(n) ||
        n * bits / 8 % 16 != 0)
      return;
    if (!llvm::all_of(read.getIndices().drop_back(2), isUniform))
      return;
    reads.push_back(read);
  });
  return reads;
}

bool flashlight::attn::stagedPerQuery(tensor::ExtractOp read) {
  auto program = read->getParentOfType<ScoreProgramOpInterface>();
  auto row = dyn_cast<BlockArgument>(read.getIndices().drop_back().back());
  return row && row.getOwner() == &program.getScoreRegion().front() &&
         row.getArgNumber() == program.getNumLogitBranches() + 2;
}

int64_t flashlight::attn::stagedRowBytes(tensor::ExtractOp read,
                                         int64_t blockN) {
  return blockN * read.getType().getIntOrFloatBitWidth() / 8;
}

std::optional<std::string> flashlight::attn::tensorCoreIneligibility(
    ValueRange keys, Value value, Region &score, int64_t blockM, int64_t blockN,
    int64_t sharedMemory, bool withWgmma) {
  unsigned branches = keys.size();
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  SmallVector<int64_t> headDims;
  for (Value v : llvm::concat<const Value>(keys, ValueRange(value)))
    headDims.push_back(cast<RankedTensorType>(v.getType()).getDimSize(3));
  if (!element.isF16() && !element.isBF16())
    return std::string("Q/K/V are not f16 or bf16");
  // Q.K may be wider than V (folded extra contractions): Q then stays in
  // shared memory.
  for (int64_t d : headDims)
    if (ShapedType::isDynamic(d) || d % 16 != 0 || d > 256)
      return "head dim " + std::to_string(d) +
             " is not a multiple of 16 up to 256";
  if ((blockM != 64 && blockM != 128 && blockM != 192 && blockM != 256) ||
      (blockN != 32 && blockN != 64 && blockN != 128))
    return "tiles are " + std::to_string(blockM) + "x" +
           std::to_string(blockN) +
           " (block-m 64, 128 or 256, block-n 32, 64 or 128)";
  // Shared memory, as the larger of the two generators lays it out (where
  // wgmma may take the tiles; else as mma.sync does): wgmma has per branch
  // a Q tile and two K tiles, and two V tiles, each of whole 64-column
  // atoms; mma.sync pads rows by 8 elements and has one K and V tile (Q's
  // at most). Plus 1024 bytes of alignment slack, the mbarriers and the
  // relative-position tables.
  int64_t dv = headDims.back();
  int64_t wgmma = 2 * blockN * llvm::alignTo(dv, 64), mma = blockN * (dv + 8);
  for (int64_t d : ArrayRef<int64_t>(headDims).drop_back()) {
    wgmma += (blockM + 2 * blockN) * llvm::alignTo(d, 64);
    mma += (blockM + blockN) * (d + 8);
  }
  int64_t elements = withWgmma ? std::max(wgmma, mma) : mma;
  int64_t bytes = elements * element.getIntOrFloatBitWidth() / 8 + 1024 + 64 +
                  relativeTableBytes(score, branches, blockM, blockN);
  if (bytes > sharedMemory)
    return "its tiles (" + std::to_string(branches) + " logit branches) need " +
           std::to_string(bytes) + " bytes of shared memory (at most " +
           std::to_string(sharedMemory) + ")";
  return std::nullopt;
}

bool flashlight::attn::usesMathFunctions(Region &score) {
  return score
      .walk([](Operation *o) {
        return isa_and_nonnull<math::MathDialect>(o->getDialect())
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

//===----------------------------------------------------------------------===//
// KernelFacts
//===----------------------------------------------------------------------===//

KernelFacts::KernelFacts(Operation *attention) : op(attention) {
  auto attn = cast<AttentionOp>(attention);
  branches = attn.getNumBranches();
  Value value = attn.getValue();
  auto shape = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  elementType = cast<RankedTensorType>(value.getType()).getElementType();
  valueHeadDim = shape(value)[3];
  // With value_columns each branch accumulates its own block of V's
  // columns: the widest block is what a branch's accumulators hold.
  if (std::optional<ArrayRef<int64_t>> columns = attn.getValueColumns())
    valueHeadDim = *llvm::max_element(*columns);
  smallestHeadDim = std::numeric_limits<int64_t>::max();
  for (Value v : llvm::concat<const Value>(attn.getKeys(), ValueRange(value))) {
    int64_t d = shape(v)[3];
    smallestHeadDim = std::min(smallestHeadDim, d);
  }
  for (Value key : attn.getKeys())
    keyHeadDimSum += shape(key)[3];
  queryLength = shape(attn.getQueries()[0])[2];
  keyLength = shape(value)[2];
  shortestLength =
      ShapedType::isDynamic(queryLength) || ShapedType::isDynamic(keyLength)
          ? ShapedType::kDynamic
          : std::min(queryLength, keyLength);

  hasMask = !attn.getMask().empty();
  mask = MaskScoreAnalysis(attention).getMask();
  votes = flashlight::attn::votesOnTiles(attention);
  plainMask = mask.kind == MaskKind::None || mask.kind == MaskKind::Causal ||
              mask.kind == MaskKind::Prefix;
  Region &score = attn.getScore();
  lean = score.empty() && plainMask;
  gathers = flashlight::attn::gathersPerElement(score);
  relativeTermCount = relativeTerms(score, branches).terms.size();
  bool relative = relativeTermCount > 0;
  stagedReads = stagedTileReads(score, branches);
  bool math = usesMathFunctions(score);
  plainScore =
      score.empty() || (!gathers && stagedReads.empty() && !relative && !math);
  arithmeticScore = !score.empty() &&
                    !flashlight::attn::gathersPerElement(score, stagedReads) &&
                    !math;
}

std::optional<std::string>
KernelFacts::tensorCoreIneligibility(int64_t blockM, int64_t blockN,
                                     int64_t sharedMemory,
                                     bool withWgmma) const {
  auto attn = cast<AttentionOp>(op);
  return flashlight::attn::tensorCoreIneligibility(
      attn.getKeys(), attn.getValue(), attn.getScore(), blockM, blockN,
      sharedMemory, withWgmma);
}

KVTiles KernelFacts::getKVTiles(int64_t blockM, int64_t blockN) const {
  // attn-tile's KV loop runs over [lo / block-n * block-n, hi), the mask's
  // band for the query tile [q0, q1] (Tile.cpp's KVBounds). Its bounds are
  // constants only where they do not depend on the tile, or where there is
  // one query tile (q0 = 0); canonicalization then folds a loop of one
  // iteration and removes one of none.
  if (ShapedType::isDynamic(queryLength) || ShapedType::isDynamic(keyLength))
    return KVTiles::Loop;
  std::optional<int64_t> q0, q1;
  if (queryLength <= blockM) {
    q0 = 0;
    q1 = queryLength - 1;
  }
  int64_t lo = 0, hi = keyLength;
  bool prefix = hasMask && mask.kind == MaskKind::Prefix;
  // A query tile holding a row of a query prefix keeps every key.
  if (prefix && mask.prefixOnQueries) {
    if (!q0)
      return KVTiles::Loop;
    if (*q0 < mask.prefixLength)
      return keyLength > blockN ? KVTiles::Loop : KVTiles::One;
  }
  bool keyPrefix = prefix && !mask.prefixOnQueries;
  if (hasMask && mask.band.hi && !keyPrefix) {
    if (!q0)
      return KVTiles::Loop;
    lo = std::max<int64_t>(0, *q0 - *mask.band.hi);
  }
  if (hasMask && mask.band.lo) {
    if (!q1)
      return KVTiles::Loop;
    int64_t end = *q1 - *mask.band.lo + 1;
    if (keyPrefix)
      end = std::max(end, mask.prefixLength);
    hi = std::min(hi, end);
  }
  int64_t start = lo / blockN * blockN;
  if (hi <= start)
    return KVTiles::None;
  return hi - start > blockN ? KVTiles::Loop : KVTiles::One;
}
