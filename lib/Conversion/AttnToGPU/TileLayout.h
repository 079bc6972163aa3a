//===- TileLayout.h - How a staging tile sits in shared memory --*- C++ -*-===//
//
// A tensor-core staging tile holds rows of a Q, K or V slice in shared
// memory, in one of two layouts:
// - padded (mma.sync): [rows, d + 8] -- ldmatrix's row addresses then start
//   16 bytes apart in bank terms, free of conflicts;
// - swizzled (wgmma): atoms of one 128-byte row per tile row, the 16-byte
//   chunk j of row r stored at chunk j ^ (r % 8), [buffers * rows * atoms,
//   atom columns] -- what wgmma's 128-byte-swizzle descriptors read, and
//   conflict-free for row-major cp.async copies.
// The layout is a value: SharedMemoryPlan carves tiles by it and the
// emitters index them through it. Private to AttnToGPU.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_TILELAYOUT_H
#define FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_TILELAYOUT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace flashlight::attn_to_gpu {

using namespace mlir;

/// The layout of a staging tile; see the file comment.
class TileLayout {
public:
  /// Rows padded by 8 elements.
  static TileLayout padded() { return TileLayout(false, 0); }
  /// 128-byte swizzled atoms of `elementBits`-bit elements.
  static TileLayout swizzled(int64_t elementBits) {
    return TileLayout(true, elementBits);
  }

  bool isSwizzled() const { return swizzle; }
  /// Columns of one atom (swizzled): a 128-byte row.
  int64_t atomColumns() const;

  /// The memref shape of `buffers` buffers of `rows` rows of `d` elements.
  SmallVector<int64_t, 2> shape(int64_t rows, int64_t d, int64_t buffers) const;
  /// Rows per buffer of `tile` (of this layout, `buffers` buffers) whose rows
  /// hold `d` elements.
  int64_t rows(Value tile, int64_t d, int64_t buffers) const;
  /// The shared-memory indices of element (`row`, `col`) of a tile of
  /// `rowsPerBuffer` rows a buffer; `bufferLines` (swizzled, may be null)
  /// selects a buffer: its first line.
  SmallVector<Value> indices(OpBuilder &b, Location loc, int64_t rowsPerBuffer,
                             Value row, Value col, Value bufferLines) const;

private:
  TileLayout(bool swizzle, int64_t elementBits)
      : swizzle(swizzle), elementBits(elementBits) {}
  bool swizzle;
  int64_t elementBits;
};

} // namespace flashlight::attn_to_gpu

#endif // FLASHLIGHT_LIB_CONVERSION_ATTNTOGPU_TILELAYOUT_H
