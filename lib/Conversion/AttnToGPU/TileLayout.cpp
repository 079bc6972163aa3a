//===- TileLayout.cpp - How a staging tile sits in shared memory ----------===//

#include "TileLayout.h"

#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace flashlight::attn_to_gpu;
using flashlight::attn::ArchInfo;

/// Bytes of the chunks the swizzle permutes (and cp.async copies).
static constexpr int64_t kChunkBytes = 16;
/// Rows over which the swizzle's xor pattern repeats.
static constexpr int64_t kSwizzleRows =
    ArchInfo::kSwizzleAlignment / ArchInfo::kSwizzleBytes;

int64_t TileLayout::atomColumns() const {
  return ArchInfo::atomElements(elementBits);
}

SmallVector<int64_t, 2> TileLayout::shape(int64_t rows, int64_t d,
                                          int64_t buffers) const {
  auto [lines, columns] =
      ArchInfo::stagingTileShape(swizzle, rows, d, buffers, elementBits);
  return {lines, columns};
}

int64_t TileLayout::rows(Value tile, int64_t d, int64_t buffers) const {
  auto type = cast<MemRefType>(tile.getType());
  if (!swizzle)
    return type.getDimSize(0);
  return type.getNumElements() / llvm::alignTo(d, atomColumns()) / buffers;
}

SmallVector<Value> TileLayout::indices(OpBuilder &b, Location loc,
                                       int64_t rowsPerBuffer, Value row,
                                       Value col, Value bufferLines) const {
  if (!swizzle)
    return {row, col};
  auto idx = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  int64_t atom = atomColumns();
  int64_t perChunk = kChunkBytes * 8 / elementBits;
  // The line is atom * rows + row (rows per buffer), in the buffer.
  Value atomIndex = arith::DivUIOp::create(b, loc, col, idx(atom));
  Value line = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, atomIndex, idx(rowsPerBuffer)),
      row);
  if (bufferLines)
    line = arith::AddIOp::create(b, loc, line, bufferLines);
  Value chunk = arith::DivUIOp::create(
      b, loc, arith::RemUIOp::create(b, loc, col, idx(atom)), idx(perChunk));
  Value swizzled = arith::XOrIOp::create(
      b, loc, chunk, arith::RemUIOp::create(b, loc, row, idx(kSwizzleRows)));
  return {line,
          arith::AddIOp::create(
              b, loc, arith::MulIOp::create(b, loc, swizzled, idx(perChunk)),
              arith::RemUIOp::create(b, loc, col, idx(perChunk)))};
}
