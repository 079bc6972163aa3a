//===- ArchInfo.h - Facts about the target chips ----------------*- C++ -*-===//
//
// The numbers the kernel planner and the code generators rely on, named
// once: a literal 64 in a generator says warpgroup rows, swizzle-atom
// elements or something else only through these names.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_DIALECT_ATTN_ANALYSIS_ARCHINFO_H
#define FLASHLIGHT_DIALECT_ATTN_ANALYSIS_ARCHINFO_H

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace flashlight::attn {

/// A target chip and the hardware facts the generators use.
struct ArchInfo {
  /// Threads per warp.
  static constexpr int64_t kThreadsPerWarp = 32;
  /// Warps per warpgroup (sm_90a's wgmma is issued by one).
  static constexpr int64_t kWarpsPerWarpgroup = 4;
  static constexpr int64_t kThreadsPerWarpgroup =
      kWarpsPerWarpgroup * kThreadsPerWarp;
  /// Rows of one wgmma product (m64): the query rows of a warpgroup.
  static constexpr int64_t kWarpgroupRows = 64;
  /// Rows of one mma.sync product (m16).
  static constexpr int64_t kMmaRows = 16;
  /// Bytes of one row of wgmma's 128-byte swizzle atom, and the alignment
  /// a tile of such atoms needs.
  static constexpr int64_t kSwizzleBytes = 128;
  static constexpr int64_t kSwizzleAlignment = 1024;
  /// Threads a block may have.
  static constexpr int64_t kMaxThreadsPerBlock = 1024;
  /// Dynamic shared memory a block may use on sm_80 (163 KB): the
  /// tensor-core tiles must fit on every supported chip.
  static constexpr int64_t kPortableSharedMemory = 166912;
  /// sm_90's (227 KB): what sm_90a-only kernels may add for staged tiles.
  static constexpr int64_t kHopperSharedMemory = 232448;
  /// Staged score-read tiles start at this alignment (TMA's destinations).
  static constexpr int64_t kStagedTileAlignment = 128;
  /// Dynamic shared memory a block of this chip's kernels may use: the
  /// tensor-core tiles must fit (each chip's kernel is planned apart).
  int64_t sharedMemory() const {
    return hasWgmma ? kHopperSharedMemory : kPortableSharedMemory;
  }

  /// Elements of a 16-bit type in one swizzle-atom row: the column width of
  /// wgmma's shared-memory tiles.
  static constexpr int64_t atomElements(int64_t elementBits) {
    return kSwizzleBytes * 8 / elementBits;
  }

  /// The shape of a tensor-core staging tile of `buffers` buffers of `rows`
  /// rows of `d` elements: rows padded by 8 elements (mma.sync), or
  /// 128-byte swizzled atoms, [buffers * rows * atoms, atom columns] (wgmma).
  static std::pair<int64_t, int64_t> stagingTileShape(bool swizzled,
                                                      int64_t rows, int64_t d,
                                                      int64_t buffers,
                                                      int64_t elementBits) {
    if (!swizzled)
      return {rows, d + 8};
    int64_t atom = atomElements(elementBits);
    return {buffers * rows * ((d + atom - 1) / atom), atom};
  }

  /// Columns of one key-side chunk (wgmma's m64nN product per 64 keys):
  /// the head dim up to one 16-bit swizzle atom.
  static constexpr int64_t keySideChunkColumns(int64_t dqk) {
    return dqk < 64 ? dqk : 64;
  }

  /// 128-byte lines of one consumer warpgroup's buffer of the key-side
  /// tile (wgmma): its [64, block-n] 16-bit weights, and with bulk adds
  /// (the plan's bulk_key_side) at least one f32 staging chunk of 64 keys
  /// by min(dqk, 64) columns, which the buffer holds once the chunk
  /// products have read the weights.
  static int64_t keySideLines(int64_t blockN, int64_t dqk, int64_t elementBits,
                              bool bulk) {
    int64_t atom = atomElements(elementBits);
    int64_t weights = kWarpgroupRows * ((blockN + atom - 1) / atom);
    int64_t staging =
        bulk ? kWarpgroupRows * keySideChunkColumns(dqk) * 4 / kSwizzleBytes
             : 0;
    return std::max(weights, staging);
  }

  /// The chip, as `--arch` names it (sm_80, ..., sm_90a).
  std::string chip;
  /// Whether warpgroup MMA is available (sm_90a only: wgmma needs the
  /// arch-specific target).
  bool hasWgmma = false;

  /// The facts of `chip`, or nothing if no generator supports it.
  static std::optional<ArchInfo> get(llvm::StringRef chip) {
    if (chip == "sm_90a")
      return ArchInfo{chip.str(), true};
    if (chip == "sm_80" || chip == "sm_86" || chip == "sm_87" ||
        chip == "sm_89" || chip == "sm_90")
      return ArchInfo{chip.str(), false};
    return std::nullopt;
  }

  /// mbarriers of the decoupled KV loop: buffer 0 and 1 full, then empty;
  /// with a producer warpgroup, those of K and then those of V; in a
  /// persistent kernel, then those of Q (the producer copies it into two
  /// buffers).
  static constexpr int64_t mbarrierCount(bool producer,
                                         bool persistent = false) {
    return producer ? (persistent ? 12 : 8) : 4;
  }
  /// 8-byte words of the mbarrier region: the mbarriers, then with a tile
  /// counter (the plan's tile_counter) a slot per Q buffer, where the
  /// producer leaves the work tile it drew for the consumers.
  static constexpr int64_t barrierWords(bool producer, bool persistent,
                                        bool tileCounter) {
    return mbarrierCount(producer, persistent) + (tileCounter ? 2 : 0);
  }
  /// f32 entries of the relative-position tables: per warp, two buffers of
  /// block-n + rows - 1 positions per term.
  static constexpr int64_t relativeTableEntries(int64_t warps, int64_t terms,
                                                int64_t blockN,
                                                int64_t warpRows) {
    return warps * 2 * terms * (blockN + warpRows - 1);
  }
};

} // namespace flashlight::attn

#endif // FLASHLIGHT_DIALECT_ATTN_ANALYSIS_ARCHINFO_H
