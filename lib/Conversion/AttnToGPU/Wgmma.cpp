//===- Wgmma.cpp - Hopper warpgroup-MMA code generator --------------------===//
//
// sm_90a: the mma.sync generator's structure (tile staging, the KV loop's
// copy groups, the per-element softmax, the finalize) with both products on
// wgmma. A warpgroup (4 consecutive warps) owns 64 query rows; warp w of it
// holds rows [16w, 16w + 16), and its m64nN accumulator is the mma.sync m16n8
// C fragment repeated over N / 8, so the per-element code carries over.
//
// - Tiles (Q, K, V) use the 128-byte swizzle: a tile is split into atoms of
//   64 columns (128 bytes per row), each [rows][128 bytes] with the 16-byte
//   chunk j of row r stored at chunk j ^ (r % 8); tiles start 1024-byte
//   aligned. A warp's row-major cp.async copies and wgmma's reads are then
//   free of bank conflicts (docs/decisions/002). A head dim that is not a
//   multiple of 64 fills its last atom in part; the products stop at it.
// - S = Q K^T: wgmma m64n(block-n)k16 with Q and K from shared memory (both
//   K-major: a k16 step moves 32 bytes within an atom; 8-row groups are 1024
//   bytes apart).
// - O = alpha * O + P V: wgmma m64n(Dv)k16 with P from registers (the same
//   A fragments as mma.sync) and V from shared memory, transposed (V's rows
//   are keys, the contraction dimension; atoms along D are rows * 128 bytes
//   apart): MLIR 22's NVVM op has no register-A form, so this one is inline
//   PTX.
// - cp.async writes through the generic proxy and wgmma reads through the
//   async proxy: each thread fences (fence.proxy.async) after its copies
//   land, before the barrier.
// - K and V are double-buffered (tile t in buffer t % 2), and tile t + 1's
//   copies are issued right after S = Q K_t^T, so that they have the whole
//   softmax and P V (V) or the next S (K) to land: at wgmma's speed one
//   buffer's latency is not hidden. A step waits for K_t and V_t together
//   (one barrier per step); that barrier also tells that every warpgroup is
//   done with tile t - 1, whose buffers the prefetch then refills.
// - Two loop forms beyond that (docs/design.md): with 64-key tiles the loop
//   is software-pipelined (softmax_t overlaps P_{t-1} V_{t-1}); otherwise
//   two warpgroups replace the per-step barrier by mbarriers
//   (buffer full / empty), so that the warpgroups need not run in lockstep.
// - On that loop with 128- or 192-row tiles and no block mask, one more
//   (producer) warpgroup copies K and V, and the two or three consumers
//   take turns issuing their products (P_t V_t, then S_{t+1}) so that one's
//   softmax runs while another's products do (FlashAttention-3's ping-pong
//   schedule). With the plan's `tma`, one producer thread copies each tile
//   with TMA instead (a box per atom; TMA's 128-byte swizzle is the tiles'
//   layout), and the tile's full mbarrier completes on its bytes
//   (docs/decisions/026).
//
//===----------------------------------------------------------------------===//

#include "CopyPipeline.h"
#include "MmaSync.h"
#include "WgmmaOps.h"

#include "llvm/Support/SaveAndRestore.h"

using namespace flashlight::attn_to_gpu;

namespace {

/// wgmma's geometry, named once (ArchInfo holds the chip's facts):
/// a warpgroup's rows (m64) and threads, a swizzle atom's row bytes and its
/// 8-row block (the descriptors' stride), the 16-byte chunk that cp.async
/// copies and the swizzle permutes, and K of one product (16-bit operands).
constexpr int64_t kGroupRows = ArchInfo::kWarpgroupRows;
constexpr int64_t kGroupThreads = ArchInfo::kThreadsPerWarpgroup;
constexpr int64_t kRowBytes = ArchInfo::kSwizzleBytes;
constexpr int64_t kAtomBlockBytes = ArchInfo::kSwizzleAlignment;
constexpr int64_t kChunkBytes = 16;
constexpr int64_t kProductK = 16;
/// Accumulator registers past which branch lookahead would leave too few for
/// the softmax (docs/decisions/009).
constexpr int64_t kMaxLookaheadAccumulators = 128;

class WgmmaEmitter : public MmaSyncEmitter {
public:
  WgmmaEmitter(OpBuilder &b, Location loc, const MmaTiles &tiles,
               KernelPlanAttr plan, const BlockMask &mask)
      : MmaSyncEmitter(b, loc, tiles, plan, mask),
        pipelinedN(plan.getLoop() == LoopForm::pipelined ? plan.getBlockN()
                                                         : 0),
        lookahead(plan.getLookahead()), stagedReads(tiles.stagedReads),
        barriers(tiles.barriers), producer(plan.getProducer()),
        pingPong(plan.getPingPong()),
        registerSplit(plan.getProducerRegisters(), plan.getConsumerRegisters()),
        consumerGroups(plan.getConsumerGroups()),
        producerCopiesQuery(plan.getQueryAhead()), tma(plan.getTma()),
        bulkKeySide(plan.getBulkKeySide()) {
    fmaReciprocals = true;
    queryBuffers = producerCopiesQuery ? 2 : 1;
    // Tile addresses in the shared window, once at the kernel's start.
    auto address = [&](Value tile) -> Value {
      Value pointer =
          memref::ExtractAlignedPointerAsIndexOp::create(b, loc, tile);
      return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), pointer);
    };
    for (Value tile : keyTiles)
      keyAddresses.push_back(address(tile));
    for (Value tile : queryTiles)
      queryAddresses.push_back(address(tile));
    valueAddress = address(valueTile);
    keySideTile = tiles.keySideWeights;
    if (keySideTile) {
      keySideAddress = address(keySideTile);
      keySideLines = cast<MemRefType>(keySideTile.getType()).getDimSize(0) /
                     consumerGroups;
    }
  }

protected:
  /// The tiles' shared-memory addresses, one K and Q tile per branch.
  SmallVector<Value, 2> keyAddresses, queryAddresses;
  Value valueAddress;
  /// MmaTiles::keySideWeights and its address (null without a key side).
  Value keySideTile, keySideAddress;
  /// 128-byte lines of a consumer warpgroup's buffer of keySideTile
  /// (ArchInfo::keySideLines).
  int64_t keySideLines = 0;
  /// Software-pipelined KV loop (0: off; else block-n): a step issues
  /// S_t = Q K_t^T, then the P V of tile t - 1, and computes softmax_t while
  /// that P V runs. Tile t's V is copied one step after its K.
  int64_t pipelinedN;
  /// Whether the next branch's S is issued ahead (branch-lookahead).
  bool lookahead;
  /// MmaTiles::stagedReads, and the Q tile's view (its batch, head and
  /// first row place the staged tiles).
  SmallVector<tensor::ExtractOp, 2> stagedReads;
  View queryView;
  /// The pipelined loop's accumulator lanes: O, not yet rescaled by
  /// alpha_{t-1}, then P_{t-1} (bn / 4 registers as f32 bit patterns), then
  /// alpha_{t-1} (two rows). The rescale runs while S_t does, before P V.
  struct Carried {
    SmallVector<Value> o, p, alpha;
  };
  Carried split(ArrayRef<Value> lanes) {
    int64_t pn = pipelinedN / 4, on = int64_t(lanes.size()) - pn - 2;
    return {SmallVector<Value>(lanes.take_front(on)),
            SmallVector<Value>(lanes.slice(on, pn)),
            SmallVector<Value>(lanes.take_back(2))};
  }
  /// The accumulators `o` times the rescale of their rows (`alpha[r]`;
  /// null: 1).
  SmallVector<Value> rescaled(ArrayRef<Value> o, ArrayRef<Value> alpha) {
    SmallVector<Value> out(o);
    for (auto [j, v] : llvm::enumerate(out))
      if (Value f = alpha[(j % 4) / 2])
        v = mul(v, f);
    return out;
  }
  /// Set while emitting a step that owes the previous tile's P V, and the
  /// first (peeled) step, which copies K_0 alone.
  bool owesValueProduct = false, peeled = false;
  /// The owed P V's accumulator struct while it is in flight.
  Value inflight;
  /// Decoupled warpgroups (null: off): mbarriers say when a K/V buffer is
  /// full (every thread's copies landed: cp.async.mbarrier.arrive) and when
  /// it is empty again (every thread is done with its P V), so that no
  /// block-wide barrier ties the warpgroups to the same step.
  Value barriers, barrierBase;
  /// The producer copies the tiles the block mask keeps only, and the
  /// consumers' loop is the sparse one (convertProducerFor).
  bool keptTilesCopied = false;
  /// The current tile's index in the KV loop (the sparse loop: among the
  /// kept tiles; a persistent kernel: among the block's tiles so far), and
  /// in the current work tile's KV loop.
  Value tileIndex, localTile;
  /// Which side of a persistent kernel's fork is being emitted (Both: the
  /// kernel of one work tile per block, forking at its KV loop).
  enum class Side { Both, Producer, Consumer } side = Side::Both;
  /// The plan's producer warpgroup and ping-pong turns.
  bool producer, pingPong;
  /// Registers per thread after the fork (setmaxnreg): the producer's and
  /// each consumer's (the plan's split; docs/decisions/007).
  std::pair<int32_t, int32_t> registerSplit;
  /// The consumer warpgroups (block-m / 64).
  int64_t consumerGroups;
  /// The plan's query_ahead (a persistent kernel): the producer copies each
  /// work tile's Q into buffer workIndex % 2 (mbarriers 8, 9 full; 10, 11
  /// empty), so that the next work tile's Q lands while the consumers
  /// finish the last one.
  bool producerCopiesQuery;
  /// The current work tile's Q buffer (producerCopiesQuery).
  Value queryBuffer;
  /// The plan's tma: one producer thread copies each tile with TMA, and the
  /// copies complete on the tile's full barrier (one arrival: that
  /// thread's, which also says how many bytes to expect).
  bool tma;
  /// The plan's bulk_key_side: the key-side product's chunks are staged in
  /// f32 in the warpgroup's buffer of the weights tile and added to the
  /// output by one thread's bulk tensor reductions.
  bool bulkKeySide;
  /// The tensor-map parameters added so far: (memref argument, box rows,
  /// box columns, 128-byte swizzle, parameter).
  SmallVector<std::tuple<Value, int64_t, int64_t, bool, Value>> tensorMaps;
  /// Ping-pong: the named barrier of warpgroup `g`'s turn (after the
  /// warpgroups' own, 1..3, and the consumers' 5 with three of them).
  Value turnBarrier(Value g) {
    return arith::AddIOp::create(b, loc, g, i32(consumerGroups == 2 ? 3 : 6));
  }
  /// A turn barrier involves the warpgroup handing the turn and the one
  /// taking it.
  void turnSync(Value g, bool arrive) {
    if (arrive)
      NVVM::BarrierArriveOp::create(b, loc, turnBarrier(g),
                                    i32(2 * kGroupThreads));
    else
      namedBarrier(turnBarrier(g), 2 * kGroupThreads);
  }

  /// mbarrier `i` (0, 1: buffer full; 2, 3: buffer empty; with a producer
  /// warpgroup, those are K's, and 4, 5 and 6, 7 V's; 8, 9 and 10, 11 Q's
  /// where the producer copies Q) as a shared pointer.
  Value barrierAt(int64_t i, Value buffer = Value()) {
    Value offset = i64(8 * i);
    if (buffer)
      offset =
          arith::AddIOp::create(b, loc, offset,
                                arith::IndexCastUIOp::create(
                                    b, loc, b.getI64Type(), mulI(buffer, 8)));
    Value address = arith::AddIOp::create(b, loc, barrierBase, offset);
    return LLVM::IntToPtrOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3), address);
  }
  /// Waits for the phase of parity `(use / 2) % 2` of mbarrier `kind` (0
  /// full, 2 empty) of buffer `use % 2`: the use-th fill or release of it.
  void waitBarrier(int64_t kind, Value use) {
    Value buffer = arith::RemUIOp::create(b, loc, use, idx(2));
    Value phase = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, use, idx(2)), idx(2));
    copies::waitPhase(
        b, loc, barrierAt(kind, buffer),
        arith::IndexCastUIOp::create(b, loc, b.getI32Type(), phase));
  }
  void waitForStep() override {
    // Ping-pong: a step starts in the turn its last P V (or the loop's
    // start) took.
    turnOpen = pingPong;
    if (!barriers)
      return MmaSyncEmitter::waitForStep();
    // K_t and V_t landed (every thread's copies); the async proxy (wgmma)
    // then reads them after this thread's proxy fence (with a producer,
    // after the producer's).
    waitBarrier(0, tileIndex);
    if (!producer)
      publishCopies();
  }

  int64_t laneCount(Type type) override {
    int64_t n = MmaSyncEmitter::laneCount(type);
    if (pipelinedN && cast<RankedTensorType>(type).getRank() == 4)
      n += pipelinedN / 4 + 2;
    return n;
  }
  /// The current tile's buffer (0 or 1).
  Value parity;
  View valueView;

  /// Columns of a swizzle atom: a 128-byte row of the tiles' elements.
  int64_t atomColumns() { return layout.atomColumns(); }

  /// Copies `view` into buffer `buffer` of the double-buffered `tile`.
  Value stageBuffer(const View &view, Value tile, Value buffer, int64_t d) {
    llvm::SaveAndRestore<Value> offset(
        stageOffset,
        mulI(buffer, tileRows(tile, d) * llvm::divideCeil(d, atomColumns())));
    return stage(view, tile);
  }

  /// Thread 0 sets up the mbarriers, before Q's copies: the barrier after
  /// them (afterQueryCopies) shows the mbarriers to every thread before
  /// their first use.
  void initBarriers() {
    barrierBase = arith::IndexCastUIOp::create(
        b, loc, b.getI64Type(),
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, barriers));
    Value tid = thread;
    auto ifFirst =
        scf::IfOp::create(b, loc, cmpI(arith::CmpIPredicate::eq, tid, idx(0)));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
    // One arrival per thread: its copies landed (full), it is done with
    // the tile (empty); one per warp for empty was slower
    // (docs/decisions/006).
    // With a producer warpgroup, its 128 threads fill the buffers (with
    // TMA, one thread, and the bytes).
    int64_t fillers = tma ? 1 : kGroupThreads;
    for (int64_t i = 0;
         i < ArchInfo::mbarrierCount(producer, producerCopiesQuery); ++i)
      copies::initBarrier(b, loc, barrierAt(i),
                          i32(producer && i % 4 < 2 ? fillers : threads));
  }

  /// Copies the K tiles of every branch at `offset` (null: the current
  /// ones) into buffer `buffer`, and the staged reads' tiles with them.
  void stageKeys(Value offset, Value buffer) {
    for (auto [tile, view] : llvm::zip_equal(keyTiles, keyViews)) {
      View at = view;
      if (offset)
        at.offsets[2] = offset;
      stageBuffer(at, tile, buffer,
                  cast<MemRefType>(view.memref.getType()).getDimSize(3));
    }
    for (auto [read, tile] : llvm::zip_equal(stagedReads, stagedTiles))
      stageRead(read, tile, offset ? offset : keyViews[0].offsets[2], buffer);
  }

  /// Copies the [block-m, block-n] tile at (Q's first row, `k0`) of the
  /// tensor `read` reads (one row at `k0` when its row index is uniform over
  /// the block) into buffer `buffer` of `tile`, 16 bytes a copy; chunks past
  /// the tensor's rows or columns are zero-filled (a row holds whole chunks:
  /// stagedTileReads).
  /// Where a staged read's tiles come from: the captured tensor, this
  /// block's indices of its outer dims (batch, head or constants) and the
  /// first row (Q's first row, or the read's uniform row index).
  struct StagedOrigin {
    Value memref;
    SmallVector<Value> outer;
    Value firstRow;
  };
  StagedOrigin stagedOrigin(tensor::ExtractOp read) {
    auto step = read->getParentOfType<OnlineStepOp>();
    unsigned numLeading = step.getNumBranches();
    auto arg = cast<BlockArgument>(read.getTensor());
    StagedOrigin o;
    o.memref = memrefOf.lookup(
        step.getCaptures()[arg.getArgNumber() - numLeading - 4]);
    // A batch, head or constant index's value for this block.
    auto uniform = [&](Value index) -> Value {
      if (auto c = index.getDefiningOp<arith::ConstantOp>())
        return idx(cast<IntegerAttr>(c.getValue()).getInt());
      return queryView
          .offsets[cast<BlockArgument>(index).getArgNumber() - numLeading];
    };
    o.outer = llvm::map_to_vector(read.getIndices().drop_back(2),
                                  [&](Value i) { return uniform(i); });
    o.firstRow = stagedPerQuery(read)
                     ? queryView.offsets[2]
                     : uniform(read.getIndices().drop_back().back());
    return o;
  }

  void stageRead(tensor::ExtractOp read, Value tile, Value k0, Value buffer) {
    auto [memref, at, firstRow] = stagedOrigin(read);
    auto tileType = cast<MemRefType>(tile.getType());
    int64_t perChunk = kChunkBytes * 8 / tileType.getElementTypeBitWidth();
    int64_t rows = tileType.getDimSize(0) / 2, cols = tileType.getDimSize(1);
    int64_t chunksPerRow = cols / perChunk, chunks = rows * chunksPerRow;
    unsigned rank = at.size() + 2;
    Value height = dim(memref, rank - 2), width = dim(memref, rank - 1);
    Value lastRow = arith::SubIOp::create(b, loc, height, idx(1));
    Value lastChunk = arith::SubIOp::create(b, loc, width, idx(perChunk));
    Value tid = thread;
    SmallVector<Value> tokens;
    // As in stage(): rows a constant apart where threads cover whole rows.
    Value ownRow, ownCol;
    if (threads % chunksPerRow == 0) {
      ownRow = arith::DivUIOp::create(b, loc, tid, idx(chunksPerRow));
      ownCol = mulI(arith::RemUIOp::create(b, loc, tid, idx(chunksPerRow)),
                    perChunk);
    }
    for (int64_t first = 0; first < chunks; first += threads) {
      Value c = addI(tid, idx(first));
      // Fewer chunks than threads (a one-row tile): the rest copy nothing.
      std::optional<OpBuilder::InsertionGuard> guard;
      if (first + threads > chunks) {
        auto ifCopies = scf::IfOp::create(
            b, loc, cmpI(arith::CmpIPredicate::ult, c, idx(chunks)));
        guard.emplace(b);
        b.setInsertionPointToStart(&ifCopies.getThenRegion().front());
      }
      Value row = ownRow ? addI(ownRow, idx(first / chunksPerRow))
                         : arith::DivUIOp::create(b, loc, c, idx(chunksPerRow));
      Value col =
          ownRow ? ownCol
                 : mulI(arith::RemUIOp::create(b, loc, c, idx(chunksPerRow)),
                        perChunk);
      Value globalRow = addI(firstRow, row);
      Value globalCol = addI(k0, col);
      SmallVector<Value> src(at);
      Value valid = copyCondition;
      if (tilesInBounds) {
        src.append({globalRow, globalCol});
      } else {
        Value inside = arith::AndIOp::create(
            b, loc, cmpI(arith::CmpIPredicate::slt, globalRow, height),
            cmpI(arith::CmpIPredicate::slt, globalCol, width));
        valid = valid ? arith::AndIOp::create(b, loc, inside, valid) : inside;
        src.append({minI(globalRow, lastRow), minI(globalCol, lastChunk)});
      }
      Value token = copies::asyncCopy(b, loc, tile,
                                      ValueRange{addI(mulI(buffer, rows), row),
                                                 stagedColumn(tile, row, col)},
                                      memref, src, perChunk,
                                      copiedElements(valid, perChunk));
      // (The commit below takes the guarded copies without their tokens.)
      if (!guard)
        tokens.push_back(token);
    }
    copies::commitGroup(b, loc, tokens);
  }

  /// A staged read of element `i` of m16 tile 0 (wgmma: 16 rows a warp):
  /// the current buffer's line of the element's row.
  void readStaged(IRMapping &m, OnlineStepOp step, int64_t, int64_t i,
                  Value col) override {
    if (stagedTiles.empty())
      return;
    Value ownRow = addI(mulI(warp, 16), addI(group(), idx(8 * (i / 2))));
    // Where the shared-memory budget stopped the staging early, the reads
    // past the last tile keep their gather.
    SmallVector<tensor::ExtractOp> reads =
        stagedTileReads(step.getScore(), step.getNumBranches());
    for (size_t k = 0; k < std::min(reads.size(), stagedTiles.size()); ++k) {
      tensor::ExtractOp read = reads[k];
      Value tile = stagedTiles[k];
      // Elements 2j and 2j + 1 are adjacent columns of one row (even ones
      // first; the swizzle keeps pairs together): one 32-bit load serves
      // both.
      if (i % 2) {
        m.map(read.getResult(), pairedStaged[k]);
        mapWidened(m, read, pairedWidened[k]);
        continue;
      }
      auto type = cast<MemRefType>(tile.getType());
      int64_t rows = type.getDimSize(0) / 2;
      Value row = stagedPerQuery(read) ? ownRow : idx(0);
      Value pair = vector::LoadOp::create(
          b, loc, VectorType::get({2}, type.getElementType()), tile,
          ValueRange{addI(mulI(parity, rows), row),
                     stagedColumn(tile, row, col)},
          /*nontemporal=*/false,
          llvm::Align(2 * type.getElementTypeBitWidth() / 8));
      m.map(read.getResult(), vector::ExtractOp::create(b, loc, pair, 0));
      pairedStaged.resize(std::max<size_t>(pairedStaged.size(), k + 1));
      pairedWidened.resize(pairedStaged.size());
      pairedStaged[k] = vector::ExtractOp::create(b, loc, pair, 1);
      // bf16 widens to f32 by position alone: the even column is the low
      // half shifted up, the odd one the high half masked. (The fpext of
      // each half costs ptxas an extra PRMT to split the word.)
      if (!type.getElementType().isBF16())
        continue;
      Value word = vector::ExtractOp::create(
          b, loc,
          vector::BitCastOp::create(b, loc,
                                    VectorType::get({1}, b.getI32Type()), pair),
          0);
      auto asF32 = [&](Value bits) {
        return arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
      };
      mapWidened(m, read, asF32(arith::ShLIOp::create(b, loc, word, i32(16))));
      pairedWidened[k] = asF32(arith::AndIOp::create(
          b, loc, word, i32(static_cast<int32_t>(0xFFFF0000u))));
    }
  }
  /// The odd column of the pair readStaged loaded last, per staged read.
  SmallVector<Value, 2> pairedStaged;
  /// The same, widened to f32 (bf16 only).
  SmallVector<Value, 2> pairedWidened;

  /// Maps the f32 extensions of a staged bf16 read to `widened` (null:
  /// none), so that inlining the score region skips them.
  static void mapWidened(IRMapping &m, tensor::ExtractOp read, Value widened) {
    if (!widened)
      return;
    for (Operation *user : read->getUsers())
      if (auto ext = dyn_cast<arith::ExtFOp>(user);
          ext && ext.getType().isF32())
        m.map(ext.getResult(), widened);
  }

  /// Where column `col` of row `row` of a staged tile lies: 16-byte chunk j
  /// of row r is stored at chunk j ^ (r % 8) (fewer chunks a row: r modulo
  /// their number), so that the fragment reads of 8 rows at one column hit
  /// 8 different chunks (unswizzled rows of 2^k bytes: an 8-way bank
  /// conflict). Chunks are a power of two elements: one xor of the column.
  Value stagedColumn(Value tile, Value row, Value col) {
    auto type = cast<MemRefType>(tile.getType());
    int64_t perChunk = kChunkBytes * 8 / type.getElementTypeBitWidth();
    int64_t chunks = type.getDimSize(1) / perChunk;
    Value rowBits =
        arith::RemUIOp::create(b, loc, row, idx(std::min<int64_t>(8, chunks)));
    return arith::XOrIOp::create(b, loc, col, mulI(rowBits, perChunk));
  }

  LogicalResult onRole(Value v, const View &view, Role role) override {
    if (barriers && !barrierBase)
      initBarriers();
    if (role.kind == Role::Query) {
      queryView = view;
      if (producerCopiesQuery && side == Side::Producer)
        return copyQueryAhead(view, role);
      // The consumers copy none of Q: they wait until it landed (their
      // waits for copy groups then count none of their own).
      if (producerCopiesQuery && side == Side::Consumer) {
        queryGroup = copies::commitGroup(b, loc, {});
        queryBuffer = arith::RemUIOp::create(b, loc, workIndex, idx(2));
        if (role.branch + 1 == role.branches)
          waitBarrier(8, workIndex);
        return success();
      }
      // The producer's waits count copy groups after an (empty) one of its
      // own: its side copies none of Q.
      if (side == Side::Producer) {
        queryGroup = copies::commitGroup(b, loc, {});
        return success();
      }
      // A persistent kernel's consumers are all done with the last work
      // tile's Q (every warpgroup's last S read it) before the next Q's
      // copies land there.
      if (side == Side::Consumer)
        barrier();
      // The producer warpgroup's threads copy none of Q.
      if (producer)
        copyGuard = cmpI(arith::CmpIPredicate::ult, thread, idx(threads));
      LogicalResult staged = MmaSyncEmitter::onRole(v, view, role);
      copyGuard = Value();
      return staged;
    }
    // Waits count groups, and their token only has to dominate them: Q's,
    // from before the loop, serves every wait.
    valueGroup = queryGroup;
    if (role.kind == Role::Key) {
      keyViews.resize(role.branches);
      keyViews[role.branch] = view;
      return success();
    }
    // V's slice follows the K slices: the first tile's K and V are copied
    // here, later ones by the previous step's prefetch.
    valueView = view;
    const View &keyView = keyViews[0];
    int64_t d = cast<MemRefType>(keyView.memref.getType()).getDimSize(3);
    int64_t dv = cast<RankedTensorType>(v.getType()).getDimSize(3);
    int64_t bn = tileRows(keyTiles[0], d);
    std::optional<OpBuilder::InsertionGuard> guard;
    if (pipelinedN && !loopLowerBounds.empty()) {
      // The peeled first step copies K_0; every step copies its V and the
      // next K (prefetchNextKey).
      Value tile = arith::DivUIOp::create(
          b, loc,
          arith::SubIOp::create(b, loc, keyView.offsets[2],
                                loopLowerBounds.back()),
          idx(bn));
      parity = arith::RemUIOp::create(b, loc, tile, idx(2));
      if (peeled)
        stageKeys(Value(), parity);
      return success();
    }
    if (keptTilesOnly) {
      // The loop carries the buffer; the first kept tile is staged here
      // (the producer warpgroup stages every one).
      parity = keptParity;
      if (producer) {
        localTile = tileIndex;
        return success();
      }
      auto ifFirst =
          scf::IfOp::create(b, loc,
                            cmpI(arith::CmpIPredicate::eq, keyView.offsets[2],
                                 mulI(firstKeptTile, bn)));
      guard.emplace(b);
      b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
    } else if (loopLowerBounds.empty()) {
      parity = idx(0);
    } else {
      Value start = loopLowerBounds.back();
      Value tile = arith::DivUIOp::create(
          b, loc, arith::SubIOp::create(b, loc, keyView.offsets[2], start),
          idx(bn));
      // A persistent kernel's mbarrier phases go on across work tiles.
      localTile = tile;
      tileIndex = tileBase ? addI(tile, tileBase) : tile;
      parity = arith::RemUIOp::create(b, loc, tileIndex, idx(2));
      // The producer warpgroup copies every tile.
      if (producer)
        return success();
      auto ifFirst = scf::IfOp::create(
          b, loc, cmpI(arith::CmpIPredicate::eq, keyView.offsets[2], start));
      guard.emplace(b);
      b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
    }
    stageKeys(Value(), parity);
    stageBuffer(valueView, valueTile, parity, dv);
    if (barriers && !loopLowerBounds.empty())
      copies::arriveWhenCopiesLand(b, loc, barrierAt(0, parity));
    return success();
  }

  /// K_t and V_t both land before S: one barrier per step.
  int32_t pendingAtStep() override { return 0; }
  void waitForValues() override {}

  /// K and V of the next tile into the other buffers: no barrier, as the one
  /// after K_t and V_t landed already ordered every read of them (tile
  /// t - 1).
  void prefetchNextKey(int64_t bn) override {
    if (producer)
      return;
    Value next = arith::SubIOp::create(b, loc, idx(1), parity);
    View value = valueView;
    Value offset = addI(keyViews[0].offsets[2], idx(bn));
    if (keptTilesOnly) {
      // The next tile the loop visits: the next one the block mask keeps.
      Value tile = nextKeptTile(
          addI(arith::DivUIOp::create(b, loc, keyViews[0].offsets[2], idx(bn)),
               idx(1)),
          endTile);
      offset = mulI(tile, bn);
    }
    value.offsets[2] = offset;
    int64_t dv = cast<MemRefType>(value.memref.getType()).getDimSize(3);
    if (pipelinedN) {
      // V_t goes where V_{t-2} was: its P V finished before this step's
      // barrier, and V_{t-1}'s (in flight now) is in the other buffer.
      stageKeys(offset, next);
      stageBuffer(valueView, valueTile, parity, dv);
      return;
    }
    // A tile the block mask drops (or past the loop's end) is not read from
    // global memory.
    copyCondition =
        keptTilesOnly
            ? cmpI(arith::CmpIPredicate::slt,
                   arith::DivUIOp::create(b, loc, offset, idx(bn)), endTile)
            : nextTileKept(bn);
    if (barriers) {
      // The other buffer held tile t - 1: every thread must be done with it.
      auto ifUsed = scf::IfOp::create(
          b, loc, cmpI(arith::CmpIPredicate::ugt, tileIndex, idx(0)));
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifUsed.getThenRegion().front());
      waitBarrier(2, arith::SubIOp::create(b, loc, tileIndex, idx(1)));
    }
    stageKeys(offset, next);
    stageBuffer(value, valueTile, next, dv);
    if (barriers)
      copies::arriveWhenCopiesLand(b, loc, barrierAt(0, next));
    copyCondition = Value();
  }

  /// Sparse iteration (keptTilesOnly): the first kept tile, the loop's end
  /// (in tiles) and the loop-carried buffer of the next kept tile.
  Value firstKeptTile, endTile, keptParity;

  Value isEmpty(Value byte) {
    return tileIs(arith::CmpIPredicate::eq, BlockMask::Empty, byte);
  }

  /// The first tile in [from, end) the block mask keeps, else `end`.
  Value nextKeptTile(Value from, Value end) {
    Type index = b.getIndexType();
    auto loop = scf::WhileOp::create(b, loc, TypeRange{index}, from);
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&loop.getBefore(), {}, {index}, {loc});
    Value t = before->getArgument(0);
    auto ifIn = scf::IfOp::create(b, loc, TypeRange{b.getI1Type()},
                                  cmpI(arith::CmpIPredicate::slt, t, end),
                                  /*withElseRegion=*/true);
    b.setInsertionPointToStart(&ifIn.getThenRegion().front());
    scf::YieldOp::create(b, loc, isEmpty(tileByte(currentStep, t)));
    b.setInsertionPointToStart(&ifIn.getElseRegion().front());
    scf::YieldOp::create(
        b, loc, ValueRange{arith::ConstantIntOp::create(b, loc, 0, 1)});
    b.setInsertionPointAfter(ifIn);
    scf::ConditionOp::create(b, loc, ifIn.getResult(0), t);
    Block *after = b.createBlock(&loop.getAfter(), {}, {index}, {loc});
    scf::YieldOp::create(b, loc, addI(after->getArgument(0), idx(1)));
    return loop.getResult(0);
  }

  /// The KV loop's step when `loop` is a KV loop the block mask thins
  /// (the step directly in its body), else null.
  OnlineStepOp sparseStep(scf::ForOp loop) {
    if (!blockMask.memref || !votesOnTiles())
      return OnlineStepOp();
    OnlineStepOp step;
    for (Operation &op : loop.getBody()->without_terminator())
      if (auto s = dyn_cast<OnlineStepOp>(op))
        step = s;
    return step;
  }

  LogicalResult convertFor(scf::ForOp loop) override {
    // The KV loop: a step in its body, or in its full/partial scf.if.
    bool kvLoop = false;
    loop.getBody()->walk([&](OnlineStepOp) { kvLoop = true; });
    if (pipelinedN && kvLoop)
      return convertPipelinedFor(loop);
    OnlineStepOp step = sparseStep(loop);
    if (step)
      currentStep = step;
    if (producer && kvLoop)
      return convertProducerFor(loop);
    if (!step)
      return MmaSyncEmitter::convertFor(loop);
    return convertSparseFor(loop, step);
  }

  /// With a block mask, the KV loop visits the tiles it keeps only: an
  /// empty tile costs a byte load, no copies, wait or barrier. Each kept
  /// tile prefetches the next kept one into the other buffer, so the buffer
  /// is loop-carried; with a producer warpgroup, which copies the kept
  /// tiles in the same order (emitKeptTile), the consumers copy nothing
  /// and count the kept tiles for the mbarriers' phases.
  LogicalResult convertSparseFor(scf::ForOp loop, OnlineStepOp step) {
    int64_t bn = blockMask.blockN;
    Value lb = map.lookup(loop.getLowerBound());
    Value ub = map.lookup(loop.getUpperBound());
    if (!producer) {
      // The loop's end in tiles: an empty range (ub may even be negative
      // for early query tiles) scans nothing, and no scan leaves this row.
      endTile =
          minI(arith::CeilDivUIOp::create(
                   b, loc, arith::MaxSIOp::create(b, loc, ub, lb), idx(bn)),
               dim(blockMask.memref, 3));
      firstKeptTile =
          nextKeptTile(arith::DivUIOp::create(b, loc, lb, idx(bn)), endTile);
    }

    SmallVector<Value> init = flattenInits(loop);
    size_t stateSize = init.size();
    init.push_back(idx(0));
    // With mbarriers, the number of kept tiles visited so far says which
    // phase of a buffer's barriers a step waits for.
    if (barriers)
      init.push_back(idx(0));
    auto newLoop =
        scf::ForOp::create(b, loc, lb, ub, map.lookup(loop.getStep()), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(newLoop.getBody());
    ValueRange args = newLoop.getRegionIterArgs();
    Value iv = newLoop.getInductionVar();
    Value kept = arith::XOrIOp::create(
        b, loc,
        isEmpty(tileByte(step, arith::DivUIOp::create(b, loc, iv, idx(bn)))),
        arith::ConstantIntOp::create(b, loc, 1, 1));
    auto ifKept = scf::IfOp::create(b, loc, TypeRange(ValueRange(init)), kept,
                                    /*withElseRegion=*/true);
    scf::YieldOp::create(b, loc, ifKept.getResults());
    // An empty tile: the state and buffer go on unchanged.
    b.setInsertionPointToStart(&ifKept.getElseRegion().front());
    scf::YieldOp::create(b, loc, args);

    b.setInsertionPointToStart(&ifKept.getThenRegion().front());
    map.map(loop.getInductionVar(), iv);
    distribute(loop.getRegionIterArgs(), args.take_front(stateSize));
    keptParity = args[stateSize];
    if (barriers)
      tileIndex = args[stateSize + 1];
    {
      llvm::SaveAndRestore<bool> sparse(keptTilesOnly, true);
      loopLowerBounds.push_back(lb);
      LogicalResult body = convertOps(*loop.getBody());
      loopLowerBounds.pop_back();
      if (failed(body))
        return failure();
    }
    SmallVector<Value> next =
        flatten(loop.getBody()->getTerminator()->getOperands());
    next.push_back(arith::SubIOp::create(b, loc, idx(1), keptParity));
    if (barriers)
      next.push_back(addI(tileIndex, idx(1)));
    scf::YieldOp::create(b, loc, next);
    b.setInsertionPointAfter(newLoop);
    distribute(loop.getResults(),
               ValueRange(newLoop.getResults()).take_front(stateSize));
    return success();
  }

  /// This thread's warpgroup.
  Value warpgroup() {
    return arith::DivUIOp::create(b, loc, warp,
                                  idx(ArchInfo::kWarpsPerWarpgroup));
  }
  /// This thread's warpgroup (0 or 1) as an i32, plus `plus`.
  Value groupId(int64_t plus) {
    return arith::IndexCastUIOp::create(b, loc, b.getI32Type(),
                                        addI(warpgroup(), idx(plus)));
  }
  /// Runs `body` in warpgroup `g` only.
  void inGroup(int64_t g, function_ref<void()> body) {
    auto ifGroup = scf::IfOp::create(
        b, loc, cmpI(arith::CmpIPredicate::eq, warpgroup(), idx(g)));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifGroup.getThenRegion().front());
    body();
  }

  /// A persistent kernel's producer side of Q (branch `role.branch`): once
  /// the consumers released the buffer (work tile workIndex - 2's Q), the
  /// copies into buffer workIndex % 2. They land, and the full barrier says
  /// so, after the first K tile's copies were issued (emitProducerLoop).
  LogicalResult copyQueryAhead(const View &view, Role role) {
    queryBuffer = arith::RemUIOp::create(b, loc, workIndex, idx(2));
    if (role.branch == 0)
      waitReleased(10, workIndex);
    if (tma) {
      // The copies complete on Q's full barrier: no fill after K_0.
      queryGroup = copies::commitGroup(b, loc, {});
      Value full = barrierAt(8, queryBuffer);
      int64_t d = cast<MemRefType>(view.memref.getType()).getDimSize(3);
      int64_t rows = tileRows(queryTiles[role.branch], d);
      copies::arriveExpectingBytes(b, loc, full,
                                   tileBytes(queryTiles[role.branch], d));
      return copyByTensorMap(view, queryAddresses[role.branch], queryBuffer,
                             rows, d, full);
    }
    llvm::SaveAndRestore<Value> producerThread(
        thread, arith::SubIOp::create(b, loc, thread, idx(threads)));
    llvm::SaveAndRestore<int64_t> producerThreads(threads, kGroupThreads);
    Value tile = queryTiles[role.branch];
    queryGroup =
        stageBuffer(view, tile, queryBuffer,
                    cast<MemRefType>(view.memref.getType()).getDimSize(3));
    return success();
  }

  /// With a tile counter: the slot beside Q's buffer `buffer` where the
  /// producer leaves the work tile it drew (the words past the mbarriers).
  Value tileSlot(Value buffer) {
    return barrierAt(ArchInfo::mbarrierCount(producer, producerCopiesQuery),
                     buffer);
  }

  /// With a tile counter (the producer copying Q ahead with TMA): the
  /// producer's one issuing thread draws work tile `use` once the consumers
  /// released Q's buffer use % 2 (they read its slot before), leaves it in
  /// the slot, and Q's copies then complete the buffer's full barrier; past
  /// the last work tile no copies follow, so it arrives there itself. The
  /// consumers read the slot once that barrier completed.
  Value nextWorkTile(Value use, Value total) override {
    if (!tileCounter || !producerCopiesQuery || !tma || side == Side::Both)
      return Value();
    Value buffer = arith::RemUIOp::create(b, loc, use, idx(2));
    if (side == Side::Consumer) {
      waitBarrier(8, use);
      Value tile =
          LLVM::LoadOp::create(b, loc, b.getI32Type(), tileSlot(buffer));
      return arith::IndexCastUIOp::create(b, loc, b.getIndexType(), tile);
    }
    waitReleased(10, use);
    Value drawn =
        memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi, i32(1),
                                    tileCounter, ValueRange{idx(0)});
    LLVM::StoreOp::create(b, loc, drawn, tileSlot(buffer));
    Value tile = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), drawn);
    auto ifPast =
        scf::IfOp::create(b, loc, cmpI(arith::CmpIPredicate::uge, tile, total));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifPast.getThenRegion().front());
    arriveOn(8, buffer);
    return tile;
  }

  /// With a tile counter, the producer's side: the block is done drawing
  /// (fences order its last draw before, and the reset after, the count of
  /// blocks done: the atomics are relaxed); the last block done sets the
  /// counter back to zero for the next launch on the stream.
  void endWorkTiles() override {
    if (!tileCounter || side != Side::Producer)
      return;
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    Value done =
        memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addi, i32(1),
                                    tileCounter, ValueRange{idx(1)});
    Value blocks = arith::IndexCastUIOp::create(
        b, loc, b.getI32Type(),
        gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
    auto ifLast =
        scf::IfOp::create(b, loc,
                          cmpI(arith::CmpIPredicate::eq, done,
                               arith::SubIOp::create(b, loc, blocks, i32(1))));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifLast.getThenRegion().front());
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    for (int64_t i = 0; i < 2; ++i)
      memref::StoreOp::create(b, loc, i32(0), tileCounter, ValueRange{idx(i)});
  }

  /// The dense KV loop with a producer warpgroup: threads 256..383 copy
  /// tile t into buffer t % 2 once both consumers released tile t - 2
  /// (empty barrier) and arrive on its full barrier as the copies land; the
  /// consumers (the loop as MmaSyncEmitter emits it, with no copies) wait
  /// for full and release after their P V. The producer then exits, and
  /// block-wide barriers become the consumers' own.
  LogicalResult convertProducerFor(scf::ForOp loop) {
    // Both sides visit the same tiles: the kept ones where the consumers'
    // loop is the sparse one.
    keptTilesCopied = static_cast<bool>(sparseStep(loop));
    if (side == Side::Producer)
      return emitProducerSide(loop);
    if (side == Side::Consumer)
      return emitConsumerLoop(loop);
    auto fork = scf::IfOp::create(
        b, loc, cmpI(arith::CmpIPredicate::uge, thread, idx(threads)));
    consumersOnly = true;
    setMaxRegisters(registerSplit.second, /*increase=*/true);
    if (failed(emitConsumerLoop(loop)))
      return failure();
    Operation *consumerLoop = fork->getNextNode();
    while (consumerLoop && !isa<scf::ForOp>(consumerLoop))
      consumerLoop = consumerLoop->getNextNode();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&fork.getThenRegion().front());
    // The producer's copies need the K/V views' other offsets before the
    // loop: constants are re-created, anything else must come from outside.
    auto available = [&](Value &v) {
      Operation *def = v.getDefiningOp();
      if (!def || !consumerLoop || !consumerLoop->isAncestor(def))
        return true;
      if (auto c = dyn_cast<arith::ConstantOp>(def)) {
        v = arith::ConstantOp::create(b, loc, c.getValue()).getResult();
        return true;
      }
      return false;
    };
    SmallVector<View *> copied;
    for (View &view : keyViews)
      copied.push_back(&view);
    copied.push_back(&valueView);
    for (View *view : copied)
      for (auto [i, offset] : llvm::enumerate(view->offsets))
        if (i != 2 && !available(offset))
          return loop.emitError("attn-to-gpu: producer-warpgroup needs the "
                                "K/V slices' batch and head outside the KV "
                                "loop");
    setMaxRegisters(registerSplit.first, /*increase=*/false);
    if (tma) {
      OpBuilder::InsertionGuard issuer(b);
      enterIssuer();
      if (failed(emitTensorMapProducerLoop(loop)))
        return failure();
    } else {
      emitProducerLoop(loop);
    }
    NVVM::Exit::create(b, loc);
    return success();
  }

  /// TMA: moves the builder into an `scf.if` that only the producer
  /// warpgroup's first thread takes, the one that issues every copy (the
  /// warpgroup's other threads are done).
  void enterIssuer() {
    auto ifIssuer = scf::IfOp::create(
        b, loc, cmpI(arith::CmpIPredicate::eq, thread, idx(threads)));
    b.setInsertionPointToStart(&ifIssuer.getThenRegion().front());
  }

  /// setmaxnreg: this warpgroup's registers per thread become `count`.
  void setMaxRegisters(int32_t count, bool increase) {
    NVVM::SetMaxRegisterOp::create(
        b, loc, b.getI32IntegerAttr(count),
        NVVM::SetMaxRegisterActionAttr::get(
            b.getContext(), increase ? NVVM::SetMaxRegisterAction::increase
                                     : NVVM::SetMaxRegisterAction::decrease));
  }

  /// The consumers' side of the producer's KV loop (the loop as
  /// MmaSyncEmitter emits it, with no copies).
  LogicalResult emitConsumerLoop(scf::ForOp loop) {
    // The consumers' Q copies land (a barrier among them).
    waitCopies(queryGroup, 0);
    // Ping-pong: a turn issues the products between two softmaxes back to
    // back (P V of the previous branch or tile, then the next S), so that
    // one warpgroup's products run while another computes its softmax
    // (turnBarrier(g): warpgroup g's turn; turns go 0, 1, .., 0). The last
    // warpgroup gives warpgroup 0 the first turn (S_0 alone), the last P V
    // is a turn alone, and warpgroup 0 takes the turn the last one hands
    // it last.
    if (pingPong) {
      inGroup(consumerGroups - 1, [&] { turnSync(i32(0), /*arrive=*/true); });
      turnSync(groupId(0), /*arrive=*/false);
    }
    OnlineStepOp step = sparseStep(loop);
    if (failed(keptTilesCopied ? convertSparseFor(loop, step)
                               : MmaSyncEmitter::convertFor(loop)))
      return failure();
    Value tiles = tileBase ? kvTileCount(loop) : Value();
    // Every S of this work tile completed (the softmax read them): the
    // producer may copy work tile workIndex + 2's Q into this buffer.
    if (producerCopiesQuery)
      arriveOn(10, queryBuffer);
    if (pingPong) {
      endTurn();
      // The last P V, left in flight by its turn.
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
      // A persistent kernel's producer may refill the last tile's V buffer
      // with the next work tile's: this thread is done with it.
      if (tiles) {
        auto ifAny = scf::IfOp::create(
            b, loc, cmpI(arith::CmpIPredicate::ugt, tiles, idx(0)));
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(&ifAny.getThenRegion().front());
        releaseValues(arith::RemUIOp::create(
            b, loc,
            arith::SubIOp::create(b, loc, addI(tileBase, tiles), idx(1)),
            idx(2)));
      }
      inGroup(0, [&] { turnSync(i32(0), /*arrive=*/false); });
    }
    kvTiles = tiles;
    return success();
  }

  /// The tiles `loop` (the source KV loop) visits.
  Value kvTileCount(scf::ForOp loop) {
    Value lb = map.lookup(loop.getLowerBound());
    Value ub = map.lookup(loop.getUpperBound());
    Value span = arith::MaxSIOp::create(
        b, loc, arith::SubIOp::create(b, loc, ub, lb), idx(0));
    return arith::CeilDivUIOp::create(b, loc, span, map.lookup(loop.getStep()));
  }

  /// A persistent kernel's producer side of a work tile's KV loop: the K/V
  /// views (the loop body's slices, converted here for their offsets; the
  /// steps are the consumers'), then the copies.
  LogicalResult emitProducerSide(scf::ForOp loop) {
    Value lb = map.lookup(loop.getLowerBound());
    map.map(loop.getInductionVar(), lb);
    // The body's ops before the first that holds a step (its full/partial
    // scf.if, or the step).
    Operation *step = nullptr;
    for (Operation &op : loop.getBody()->without_terminator()) {
      bool holds = false;
      op.walk([&](OnlineStepOp) { holds = true; });
      if (holds) {
        step = &op;
        break;
      }
    }
    loopLowerBounds.push_back(lb);
    LogicalResult views = convertOps(*loop.getBody(), step);
    loopLowerBounds.pop_back();
    if (failed(views))
      return failure();
    if (!tma) {
      kvTiles = emitProducerLoop(loop);
      return success();
    }
    FailureOr<Value> tiles = emitTensorMapProducerLoop(loop);
    if (failed(tiles))
      return failure();
    kvTiles = *tiles;
    return success();
  }

  /// The tensor map of kernel argument `memref` (a tensor whose innermost
  /// dim is contiguous) for boxes of `rows` rows and `columns` columns (0:
  /// one swizzle atom of 16-bit elements; a box row is at most the 128-byte
  /// swizzle span): a parameter after the others, which
  /// flashlight.tensor_maps lists (param: the memref's index, box: columns
  /// and rows) for the manifest and flashlight-tensor-map-params.
  FailureOr<Value> tensorMap(Value memref, int64_t rows, int64_t columns = 0,
                             bool swizzled = true) {
    if (!columns)
      columns = atomColumns();
    for (auto &[listed, boxRows, boxColumns, boxSwizzled, param] : tensorMaps)
      if (listed == memref && boxRows == rows && boxColumns == columns &&
          boxSwizzled == swizzled)
        return param;
    auto arg = dyn_cast<BlockArgument>(memref);
    auto kernel =
        arg ? dyn_cast<gpu::GPUFuncOp>(arg.getOwner()->getParentOp()) : nullptr;
    if (!kernel)
      return emitError(loc, "attn-to-gpu: a TMA copy's tensor is not a "
                            "kernel parameter");
    unsigned index = kernel.getNumArguments();
    if (failed(kernel.insertArgument(index,
                                     LLVM::LLVMPointerType::get(b.getContext()),
                                     b.getDictionaryAttr({}), loc)))
      return failure();
    Value param = kernel.getArgument(index);
    SmallVector<Attribute> listed;
    if (auto old = kernel->getAttrOfType<ArrayAttr>("flashlight.tensor_maps"))
      llvm::append_range(listed, old);
    SmallVector<NamedAttribute> entry = {
        b.getNamedAttr("param", b.getI64IntegerAttr(arg.getArgNumber())),
        b.getNamedAttr("box", b.getI64ArrayAttr({columns, rows}))};
    if (!swizzled)
      entry.push_back(b.getNamedAttr("swizzle", b.getI64IntegerAttr(0)));
    listed.push_back(b.getDictionaryAttr(entry));
    kernel->setAttr("flashlight.tensor_maps", b.getArrayAttr(listed));
    tensorMaps.push_back({memref, rows, columns, swizzled, param});
    return param;
  }

  /// TMA: copies the [rows, d] slice of `view` (its rows from offsets[2])
  /// into buffer `buffer` of the tile at shared address `tile`, one atom of
  /// columns a copy (the tile's [rows][128 bytes] atoms are the boxes, and
  /// TMA's 128-byte swizzle is the tiles' own); the copies complete on
  /// `full`.
  LogicalResult copyByTensorMap(const View &view, Value tile, Value buffer,
                                int64_t rows, int64_t d, Value full) {
    FailureOr<Value> map = tensorMap(view.memref, rows);
    if (failed(map))
      return failure();
    int64_t atoms = llvm::divideCeil(d, atomColumns());
    int64_t atomBytes = rows * kRowBytes;
    Value base = arith::AddIOp::create(
        b, loc, tile,
        arith::IndexCastUIOp::create(b, loc, b.getI64Type(),
                                     mulI(buffer, atoms * atomBytes)));
    // Coordinates innermost first: column, row, then the outer dims.
    SmallVector<Value> coordinates = {Value(), toI32(view.offsets[2])};
    for (int64_t dim = 1; dim >= 0; --dim)
      coordinates.push_back(toI32(view.offsets[dim]));
    for (int64_t a = 0; a < atoms; ++a) {
      coordinates[0] = i32(int32_t(a * atomColumns()));
      copies::tensorCopy(
          b, loc, arith::AddIOp::create(b, loc, base, i64(a * atomBytes)), *map,
          coordinates, full);
    }
    return success();
  }

  /// Bytes of one buffer of `tile` (head dim `d`): whole atoms of rows.
  int64_t tileBytes(Value tile, int64_t d) {
    return tileRows(tile, d) * llvm::divideCeil(d, atomColumns()) * kRowBytes;
  }

  /// TMA: the K tiles of every branch at row `k0` into buffer `buffer`,
  /// and the staged reads' one-row tiles with them, after announcing their
  /// bytes on K's full barrier.
  LogicalResult copyKeysByTensorMap(Value k0, Value buffer) {
    Value full = barrierAt(0, buffer);
    int64_t bytes = 0;
    for (auto [tile, view] : llvm::zip_equal(keyTiles, keyViews)) {
      int64_t d = cast<MemRefType>(view.memref.getType()).getDimSize(3);
      bytes += tileBytes(tile, d);
    }
    for (Value tile : stagedTiles)
      bytes += stagedRowBytes(tile);
    copies::arriveExpectingBytes(b, loc, full, bytes);
    for (auto [i, view] : llvm::enumerate(keyViews)) {
      View at = view;
      at.offsets[2] = k0;
      int64_t d = cast<MemRefType>(view.memref.getType()).getDimSize(3);
      if (failed(copyByTensorMap(at, keyAddresses[i], buffer,
                                 tileRows(keyTiles[i], d), d, full)))
        return failure();
    }
    for (auto [read, tile] : llvm::zip_equal(stagedReads, stagedTiles))
      if (failed(copyStagedRowByTensorMap(read, tile, k0, buffer, full)))
        return failure();
    return success();
  }

  /// Bytes of one buffer of a one-row staged tile.
  static int64_t stagedRowBytes(Value tile) {
    auto type = cast<MemRefType>(tile.getType());
    return type.getDimSize(1) * type.getElementTypeBitWidth() / 8;
  }

  /// TMA: the one-row staged tile of `read` at key `k0` (block-n columns of
  /// its uniform row) into buffer `buffer` of `tile`, one unswizzled box
  /// (the tile's rows are plain: stagedColumn leaves row 0's columns in
  /// place); columns past the tensor read as zeros, as the per-thread
  /// copies' zero fill.
  LogicalResult copyStagedRowByTensorMap(tensor::ExtractOp read, Value tile,
                                         Value k0, Value buffer, Value full) {
    auto [memref, outer, row] = stagedOrigin(read);
    int64_t columns = cast<MemRefType>(tile.getType()).getDimSize(1);
    FailureOr<Value> map =
        tensorMap(memref, /*rows=*/1, columns, /*swizzled=*/false);
    if (failed(map))
      return failure();
    // Coordinates innermost first: the key, the row, then the outer dims.
    SmallVector<Value> coordinates = {toI32(k0), toI32(row)};
    for (Value index : llvm::reverse(outer))
      coordinates.push_back(toI32(index));
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, tile);
    Value dst = arith::IndexCastUIOp::create(
        b, loc, b.getI64Type(), addI(base, mulI(buffer, stagedRowBytes(tile))));
    copies::tensorCopy(b, loc, dst, *map, coordinates, full);
    return success();
  }

  /// TMA: V's tile at row `k0` into buffer `buffer`.
  LogicalResult copyValuesByTensorMap(Value k0, Value buffer) {
    View value = valueView;
    value.offsets[2] = k0;
    int64_t dv = cast<MemRefType>(value.memref.getType()).getDimSize(3);
    int64_t rows = tileRows(valueTile, dv);
    Value full = barrierAt(4, buffer);
    copies::arriveExpectingBytes(b, loc, full, tileBytes(valueTile, dv));
    return copyByTensorMap(value, valueAddress, buffer, rows, dv, full);
  }

  /// Waits until the consumers released buffer `use % 2` for the use-th
  /// time less two (mbarrier `kind`: 2 K's, 6 V's, 10 Q's), if it was used.
  void waitReleased(int64_t kind, Value use) {
    auto ifUsed =
        scf::IfOp::create(b, loc, cmpI(arith::CmpIPredicate::uge, use, idx(2)));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifUsed.getThenRegion().front());
    waitBarrier(kind, arith::SubIOp::create(b, loc, use, idx(2)));
  }

  /// The TMA form of emitProducerLoop, run by one producer thread: tile
  /// t's K once the consumers released tile t - 2's, then its V likewise;
  /// each full barrier completes when its bytes landed.
  FailureOr<Value> emitTensorMapProducerLoop(scf::ForOp loop) {
    auto producerLoop =
        scf::ForOp::create(b, loc, map.lookup(loop.getLowerBound()),
                           map.lookup(loop.getUpperBound()),
                           map.lookup(loop.getStep()), ValueRange{idx(0)});
    OpBuilder::InsertionGuard loopGuard(b);
    b.setInsertionPointToStart(producerLoop.getBody());
    Value k0 = producerLoop.getInductionVar();
    Value t = producerLoop.getRegionIterArgs()[0];
    FailureOr<Value> next = emitKeptTile(k0, t, [&]() -> LogicalResult {
      Value g = tileBase ? addI(t, tileBase) : t;
      Value buffer = arith::RemUIOp::create(b, loc, g, idx(2));
      waitReleased(2, g);
      if (failed(copyKeysByTensorMap(k0, buffer)))
        return failure();
      waitReleased(6, g);
      return copyValuesByTensorMap(k0, buffer);
    });
    if (failed(next))
      return failure();
    scf::YieldOp::create(b, loc, ValueRange{*next});
    return producerLoop.getResult(0);
  }

  /// The producer's side of the KV tile at key `k0`, the `t`-th it copies:
  /// `copy` where the block mask keeps the tile (every tile without one), so
  /// that the producer fills the buffers in the order the consumers' sparse
  /// loop visits them. Returns the count of tiles copied with this one.
  FailureOr<Value> emitKeptTile(Value k0, Value t,
                                function_ref<LogicalResult()> copy) {
    if (!keptTilesCopied) {
      if (failed(copy()))
        return failure();
      return addI(t, idx(1));
    }
    Value byte = tileByte(
        currentStep, arith::DivUIOp::create(b, loc, k0, idx(blockMask.blockN)));
    Value kept = tileIs(arith::CmpIPredicate::ne, BlockMask::Empty, byte);
    auto ifKept = scf::IfOp::create(b, loc, TypeRange{b.getIndexType()}, kept,
                                    /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifKept.getElseRegion().front());
    scf::YieldOp::create(b, loc, t);
    b.setInsertionPointToStart(&ifKept.getThenRegion().front());
    if (failed(copy()))
      return failure();
    scf::YieldOp::create(b, loc, addI(t, idx(1)));
    return ifKept.getResult(0);
  }

  /// The producer warpgroup's copies of `loop`'s K/V tiles: tile t into
  /// buffer t % 2 (t counted from tileBase in a persistent kernel) once
  /// the consumers released tile t - 2. Returns the tiles copied.
  Value emitProducerLoop(scf::ForOp loop) {
    Value lb = map.lookup(loop.getLowerBound());
    Value ub = map.lookup(loop.getUpperBound());
    Value stepSize = map.lookup(loop.getStep());
    // The producer's thread index, thread count and bounds facts, for the
    // copies below.
    llvm::SaveAndRestore<Value> producerThread(
        thread, arith::SubIOp::create(b, loc, thread, idx(threads)));
    llvm::SaveAndRestore<int64_t> producerThreads(threads, kGroupThreads);
    llvm::SaveAndRestore<bool> inBounds(tilesInBounds,
                                        producerTilesInBounds(loop));
    // A tile is full once its copies landed and this thread's proxy fence
    // ordered them before the consumers' wgmma reads (the async proxy): the
    // fence here, once per producer thread, spares every consumer one per
    // wait. The thread lets a tile's copies land only after issuing the
    // next copies (`pending` groups): V_{t-1} after K_t, K_t after V_t.
    auto fill = [&](int64_t kind, Value into, int32_t pending) {
      copies::waitGroups(b, loc, queryGroup, pending);
      publishCopies();
      arriveOn(kind, into);
    };
    auto global = [&](Value t) { return tileBase ? addI(t, tileBase) : t; };
    auto producerLoop =
        scf::ForOp::create(b, loc, lb, ub, stepSize, ValueRange{idx(0)});
    {
      OpBuilder::InsertionGuard loopGuard(b);
      b.setInsertionPointToStart(producerLoop.getBody());
      Value k0 = producerLoop.getInductionVar();
      Value t = producerLoop.getRegionIterArgs()[0];
      FailureOr<Value> next = emitKeptTile(k0, t, [&] {
        Value g = global(t);
        Value buffer = arith::RemUIOp::create(b, loc, g, idx(2));
        // Buffer g % 2 held tile g - 2: both consumers must be done with
        // it, K (released after S) and V (after P V) on their own barriers,
        // so that K_t's copies need not wait for P_{t-2} V_{t-2}.
        waitReleased(2, g);
        stageKeys(k0, buffer);
        // Q, copied before K_0, landed: the consumers may start.
        if (producerCopiesQuery) {
          auto ifFirst = scf::IfOp::create(
              b, loc, cmpI(arith::CmpIPredicate::eq, t, idx(0)));
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
          fill(8, queryBuffer, int32_t(keyTiles.size() + stagedTiles.size()));
        }
        {
          auto ifAfterFirst = scf::IfOp::create(
              b, loc, cmpI(arith::CmpIPredicate::uge, t, idx(1)));
          OpBuilder::InsertionGuard g2(b);
          b.setInsertionPointToStart(&ifAfterFirst.getThenRegion().front());
          fill(4, arith::SubIOp::create(b, loc, idx(1), buffer),
               int32_t(keyTiles.size() + stagedTiles.size()));
        }
        waitReleased(6, g);
        View value = valueView;
        value.offsets[2] = k0;
        stageBuffer(value, valueTile, buffer,
                    cast<MemRefType>(value.memref.getType()).getDimSize(3));
        fill(0, buffer, 1);
        return success();
      });
      // The copies above cannot fail.
      scf::YieldOp::create(b, loc, ValueRange{*next});
    }
    // The last V lands, and its full barrier says so: no later copy does.
    Value tiles = producerLoop.getResult(0);
    {
      auto ifAny = scf::IfOp::create(
          b, loc, cmpI(arith::CmpIPredicate::uge, tiles, idx(1)),
          /*withElseRegion=*/producerCopiesQuery);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&ifAny.getThenRegion().front());
      fill(4,
           arith::RemUIOp::create(
               b, loc, arith::SubIOp::create(b, loc, global(tiles), idx(1)),
               idx(2)),
           0);
      // No KV tile: Q's copies land here.
      if (producerCopiesQuery) {
        b.setInsertionPointToStart(&ifAny.getElseRegion().front());
        fill(8, queryBuffer, 0);
      }
    }
    return tiles;
  }

  /// A persistent kernel: thread 0 sets up the mbarriers once, the fork
  /// follows, and each side loops over the block's work tiles.
  LogicalResult
  emitPersistent(function_ref<LogicalResult()> loopOverTiles) override {
    if (!producer || !barriers)
      return failure();
    initBarriers();
    barrier();
    auto fork = scf::IfOp::create(
        b, loc, cmpI(arith::CmpIPredicate::uge, thread, idx(threads)));
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&fork.getThenRegion().front());
      setMaxRegisters(registerSplit.first, /*increase=*/false);
      llvm::SaveAndRestore<Side> producerSide(side, Side::Producer);
      std::optional<OpBuilder::InsertionGuard> issuer;
      if (tma) {
        issuer.emplace(b);
        enterIssuer();
      }
      if (failed(loopOverTiles()))
        return failure();
      issuer.reset();
      NVVM::Exit::create(b, loc);
    }
    consumersOnly = true;
    setMaxRegisters(registerSplit.second, /*increase=*/true);
    llvm::SaveAndRestore<Side> consumerSide(side, Side::Consumer);
    return loopOverTiles();
  }

  /// The finalize, on the consumers' side only: the producer's side of a
  /// persistent kernel stores nothing.
  LogicalResult emitFinalize(OnlineFinalizeOp fin) override {
    if (side == Side::Producer)
      return success();
    // The key side's last bulk reductions complete before the block's
    // shared memory (their source) goes away.
    if (keySideTile && bulkKeySide)
      inGroupLeader([&] { copies::waitBulkGroups(b, loc, 0, false); });
    return MmaSyncEmitter::emitFinalize(fin);
  }

  /// Whether every tile the producer copies lies within its tensor: query
  /// and key lengths that whole tiles divide (static ones, or runtime ones
  /// the plan says are aligned), and a KV loop whose tiles start at
  /// multiples of block-n (attn-tile aligns its start). Its keys are then
  /// all below the key length, and a staged read's rows and columns are
  /// (query, key) pairs the program itself reads.
  bool producerTilesInBounds(scf::ForOp loop) {
    auto length = [](Value memref, unsigned d) {
      return cast<MemRefType>(memref.getType()).getDimSize(d);
    };
    int64_t bn = tileRows(keyTiles[0], length(keyViews[0].memref, 3));
    int64_t bm = tileRows(queryTiles[0], length(queryView.memref, 3));
    int64_t keys = length(keyViews[0].memref, 2);
    int64_t queries = length(queryView.memref, 2);
    if (alignedLengths) {
      // (A staged read of a runtime extent still tests its bounds below.)
      keys = ShapedType::isDynamic(keys) ? bn : keys;
      queries = ShapedType::isDynamic(queries) ? bm : queries;
    }
    auto multipleOf = [](Value v, int64_t k) {
      std::optional<int64_t> c = getConstantIntValue(v);
      if (!c)
        if (auto mul = v.getDefiningOp<arith::MulIOp>())
          c = getConstantIntValue(mul.getRhs());
      return c && *c % k == 0;
    };
    if (ShapedType::isDynamic(keys) || keys % bn ||
        ShapedType::isDynamic(queries) || queries % bm ||
        !multipleOf(loop.getLowerBound(), bn) ||
        getConstantIntValue(loop.getStep()) != bn)
      return false;
    for (tensor::ExtractOp read : stagedReads) {
      auto type = cast<RankedTensorType>(read.getTensor().getType());
      int64_t height = type.getDimSize(type.getRank() - 2);
      int64_t width = type.getDimSize(type.getRank() - 1);
      if (ShapedType::isDynamic(width) || width < keys ||
          (stagedPerQuery(read) &&
           (ShapedType::isDynamic(height) || height < queries)))
        return false;
    }
    return true;
  }

  /// The KV loop, software-pipelined: when it runs at all, its first step
  /// (peeled) computes S_0 and P_0; each later step t issues S_t and the
  /// P V of tile t - 1; after the loop, the last tile's P V.
  LogicalResult convertPipelinedFor(scf::ForOp loop) {
    Value lb = map.lookup(loop.getLowerBound());
    Value ub = map.lookup(loop.getUpperBound());
    Value stepSize = map.lookup(loop.getStep());
    SmallVector<Value> init = flattenInits(loop);
    auto ifAny = scf::IfOp::create(b, loc, TypeRange(ValueRange(init)),
                                   cmpI(arith::CmpIPredicate::slt, lb, ub),
                                   /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifAny.getElseRegion().front());
    scf::YieldOp::create(b, loc, init);
    b.setInsertionPointToStart(&ifAny.getThenRegion().front());
    loopLowerBounds.push_back(lb);
    auto convertBody = [&](Value iv, ValueRange state) {
      map.map(loop.getInductionVar(), iv);
      distribute(loop.getRegionIterArgs(), state);
      if (failed(convertOps(*loop.getBody())))
        return std::optional<SmallVector<Value>>();
      return std::optional(
          flatten(loop.getBody()->getTerminator()->getOperands()));
    };
    std::optional<SmallVector<Value>> first;
    {
      llvm::SaveAndRestore<bool> firstStep(peeled, true);
      first = convertBody(lb, init);
    }
    if (!first)
      return failure();
    auto newLoop =
        scf::ForOp::create(b, loc, addI(lb, stepSize), ub, stepSize, *first);
    {
      OpBuilder::InsertionGuard loopGuard(b);
      b.setInsertionPointToStart(newLoop.getBody());
      std::optional<SmallVector<Value>> next;
      {
        llvm::SaveAndRestore<bool> laterStep(owesValueProduct, true);
        next =
            convertBody(newLoop.getInductionVar(), newLoop.getRegionIterArgs());
      }
      if (!next)
        return failure();
      scf::YieldOp::create(b, loc, *next);
    }
    loopLowerBounds.pop_back();
    // The last tile's P V, once its V has landed.
    distribute(loop.getResults(), newLoop.getResults());
    Value last = arith::DivUIOp::create(
        b, loc,
        arith::SubIOp::create(b, loc, arith::SubIOp::create(b, loc, ub, idx(1)),
                              lb),
        stepSize);
    waitCopies(queryGroup, 0);
    for (Value result : loop.getResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      // (A term carries no per-thread values: its steps added to it.)
      if (type.getRank() != 4 || keySide.contains(result))
        continue;
      SmallVector<Value> &acc = lanes[result];
      int64_t dv = type.getDimSize(3);
      Carried carried = split(acc);
      Value o =
          issueValueProduct(carried.p, rescaled(carried.o, carried.alpha),
                            arith::RemUIOp::create(b, loc, last, idx(2)), dv);
      finishProducts();
      llvm::copy(unpack(o, dv / 2), acc.begin());
    }
    scf::YieldOp::create(b, loc, flatten(loop.getResults()));
    b.setInsertionPointAfter(ifAny);
    distribute(loop.getResults(), ifAny.getResults());
    return success();
  }

  /// The output block through shared memory: each warpgroup writes its 64
  /// rows into its own rows of the Q tile (its last S = Q K^T has completed,
  /// and the other warpgroup's rows are disjoint), then stores whole 16-byte
  /// chunks, row-contiguous. A warp's pair stores wrote 16-byte pieces of 8
  /// rows; these are a quarter as many stores, each a full 16 bytes.
  void storeOutput(const FinalizeTarget &target, Value q0,
                   ArrayRef<Value> pairs) override {
    auto [out, outType, b0, h0] = target;
    int64_t dv = outType.getDimSize(3);
    // A persistent kernel's consumers copy the next work tile's Q into the
    // Q tile right after this one: the output goes out in pairs.
    if (side == Side::Consumer)
      return MmaSyncEmitter::storeOutput(target, q0, pairs);
    // Branch 0's Q tile (every branch's last S = Q K^T has completed).
    Value staging = queryTiles.empty() ? Value() : queryTiles.front();
    auto tileType =
        staging ? cast<MemRefType>(staging.getType()) : MemRefType();
    // The Q tile holds [block-m, D] in whole atoms: it takes the output
    // when Dv = D and the element types agree.
    if (!tileType || tileType.getElementType() != outType.getElementType() ||
        tileType.getNumElements() != threads / 2 * dv || dv % atomColumns())
      return MmaSyncEmitter::storeOutput(target, q0, pairs);
    Type element = outType.getElementType();
    int64_t bytes = outType.getElementTypeBitWidth() / 8;
    // Every thread copied Q rows of both warpgroups: all of them landed (the
    // finalize waited for this thread's) before the tile is overwritten. A
    // loop that ran a step had synchronized already; one that ran none not.
    barrier();
    Value localRow = addI(mulI(warp, 16), group());
    const Value *pair = pairs.begin();
    for (int64_t nd = 0; nd < dv / 8; ++nd)
      for (int64_t half = 0; half < 2; ++half, ++pair)
        vector::StoreOp::create(
            b, loc, *pair, staging,
            tileIndices(staging, addI(localRow, idx(8 * half)),
                        addI(idx(8 * nd), mulI(quad(), 2)), dv),
            /*nontemporal=*/false, llvm::Align(2 * bytes));
    // The warpgroup's threads see each other's writes.
    Value group = warpgroup();
    namedBarrier(groupId(1), kGroupThreads);
    int64_t chunksPerRow = dv * bytes / kChunkBytes,
            perChunk = kChunkBytes / bytes;
    auto chunkType = VectorType::get({perChunk}, element);
    Value tid = addI(mulI(arith::RemUIOp::create(
                              b, loc, warp, idx(ArchInfo::kWarpsPerWarpgroup)),
                          kThreadsPerWarp),
                     lane);
    Value rows = dim(out, 2);
    for (int64_t i = 0; i < kGroupRows * chunksPerRow / kGroupThreads; ++i) {
      Value flat = addI(idx(kGroupThreads * i), tid);
      Value row = addI(mulI(group, kGroupRows),
                       arith::DivUIOp::create(b, loc, flat, idx(chunksPerRow)));
      Value col = mulI(arith::RemUIOp::create(b, loc, flat, idx(chunksPerRow)),
                       perChunk);
      Value chunk = vector::LoadOp::create(
          b, loc, chunkType, staging, tileIndices(staging, row, col, dv),
          /*nontemporal=*/false, llvm::Align(16));
      Value globalRow = addI(q0, row);
      auto guard = scf::IfOp::create(
          b, loc, cmpI(arith::CmpIPredicate::slt, globalRow, rows));
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      vector::StoreOp::create(b, loc, chunk, out, {b0, h0, globalRow, col},
                              /*nontemporal=*/false, llvm::Align(16));
    }
  }

  /// Two warpgroups (one block per SM, nothing to hide a latency behind):
  /// no wait for Q here. The first step's wait covers every group issued
  /// before its K, so Q's and the first K/V tile's latencies overlap (a
  /// block whose loop runs no step waits at finalize; docs/decisions/006).
  /// One warpgroup keeps the wait: several blocks share the SM, and T5
  /// spilled without it.
  void afterQueryCopies() override {
    if (threads == kGroupThreads)
      return MmaSyncEmitter::afterQueryCopies();
    // The mbarriers' initialization, shown to every thread (a persistent
    // kernel showed it before its fork). With a producer, the consumers let
    // their Q copies land only after the fork (emitConsumerLoop), so that
    // the producer's first K and V copies overlap them.
    if (barriers && side != Side::Consumer)
      barrier();
  }

  void publishCopies() override { copies::fenceToAsyncProxy(b, loc); }

  Value i64(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
  }
  /// An index as an i64 (a shared-window address) or an i32 (a TMA
  /// coordinate).
  Value toI64(Value index) {
    return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), index);
  }
  Value toI32(Value index) {
    return arith::IndexCastUIOp::create(b, loc, b.getI32Type(), index);
  }

  /// The wgmma layer (WgmmaOps.h) at this emitter's builder and location.
  Value descriptor(Value address, int64_t leading, int64_t stride) {
    return wgmma::matrixDescriptor(b, loc, address, leading, stride);
  }
  Value advance(Value desc, int64_t bytes) {
    return wgmma::advanceDescriptor(b, loc, desc, bytes);
  }
  Type accumulatorType(int64_t n) {
    return wgmma::accumulatorType(b.getContext(), n);
  }
  SmallVector<Value> unpack(Value acc, int64_t n) {
    return wgmma::unpackAccumulator(b, loc, acc, n);
  }
  void finishProducts() { wgmma::commitAndWait(b, loc); }

  /// Issues branch `r`'s S = Q K^T (`dqk` columns, `bn` keys) as one
  /// committed wgmma group; returns its accumulator struct.
  Value issueScore(unsigned r, int64_t dqk, int64_t bn) {
    // The warpgroup's rows of Q start a warpgroup's rows (of kRowBytes)
    // into each atom of its tile.
    int64_t atoms = llvm::divideCeil(dqk, atomColumns());
    int64_t queryRows =
        cast<MemRefType>(queryTiles[r].getType()).getDimSize(0) / atoms /
        queryBuffers;
    Value group = warpgroup();
    // A persistent kernel's work tile reads Q from buffer queryBuffer.
    Value rowsOffset = mulI(group, kGroupRows * kRowBytes);
    if (queryBuffer)
      rowsOffset =
          addI(rowsOffset, mulI(queryBuffer, queryRows * atoms * kRowBytes));
    rowsOffset =
        arith::IndexCastUIOp::create(b, loc, b.getI64Type(), rowsOffset);
    Value queryAddress = queryAddresses[r];
    Value keyAddress = keyAddresses[r];
    Type type = accumulatorType(bn / 2);
    Value acc = LLVM::PoisonOp::create(b, loc, type);
    // (Ping-pong: this warpgroup's turn began before its P V.) With several
    // branches, that P V completes before S is issued: P's registers and S's
    // accumulators are then never live at once (otherwise they spill:
    // docs/decisions/008; the tensor cores lose only the issue latency
    // between the two, as the P V would run first anyway).
    if (turnOpen && keyTiles.size() > 1)
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    // K-major operands: leading byte offset 16 (unused with the swizzle),
    // stride one 8-row block.
    Value qDesc =
        descriptor(arith::AddIOp::create(b, loc, queryAddress, rowsOffset),
                   kChunkBytes, kAtomBlockBytes);
    Value kDesc =
        descriptor(arith::AddIOp::create(b, loc, keyAddress,
                                         bufferBytes(bn * atoms * kRowBytes)),
                   kChunkBytes, kAtomBlockBytes);
    // A k16 step moves k16 elements' bytes within an atom.
    int64_t stepsPerAtom = atomColumns() / kProductK;
    int64_t stepBytes = kRowBytes / stepsPerAtom;
    for (int64_t k = 0; k < dqk / kProductK; ++k) {
      int64_t atom = k / stepsPerAtom, within = (k % stepsPerAtom) * stepBytes;
      Value qDescK = advance(qDesc, atom * queryRows * kRowBytes + within);
      Value kDescK = advance(kDesc, atom * bn * kRowBytes + within);
      acc = wgmma::sharedProduct(b, loc, qDescK, kDescK, acc, bn, elementType(),
                                 /*accumulate=*/k > 0);
    }
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    if (turnOpen) {
      endTurn();
      turnOpen = false;
    }
    return acc;
  }

  /// Ping-pong: whether this warpgroup holds the turn where the code being
  /// emitted runs (from a P V through the next S).
  bool turnOpen = false;

  /// Arrives on mbarrier `kind` of buffer `buffer`.
  void arriveOn(int64_t kind, Value buffer) {
    copies::arrive(b, loc, barrierAt(kind, buffer));
  }
  /// This thread is done with buffer `buffer`'s tiles (with a producer:
  /// its V; the staged tiles go with K, released after the softmax).
  void releaseValues(Value buffer) { arriveOn(producer ? 6 : 2, buffer); }

  /// Ping-pong: hands the turn to the other warpgroup (barrier 3 + 1 - g).
  void endTurn() {
    turnSync(arith::RemUIOp::create(b, loc, groupId(1), i32(consumerGroups)),
             /*arrive=*/true);
  }

  /// An S product issued ahead (lookahead): its branch and accumulator;
  /// and whether a P V was issued after it and is still in flight.
  unsigned aheadBranch = 0;
  Value ahead;
  bool valueInFlight = false;

  Fragments scoreProduct(ArrayRef<Value>, int64_t dqk, int64_t bn) override {
    bool wasAhead = ahead && aheadBranch == branch;
    Value acc = wasAhead ? ahead : issueScore(branch, dqk, bn);
    ahead = Value();
    // Issuing the next branch's S early keeps its accumulators live through
    // this branch's softmax: where every branch's accumulators already take
    // kMaxLookaheadAccumulators registers, that spills (docs/decisions/009).
    int64_t accumulators = 0;
    for (Value acc : currentStep.getAccState())
      accumulators += cast<RankedTensorType>(acc.getType()).getDimSize(3);
    if (owesValueProduct) {
      // P_{t-1} V_{t-1} runs while this warpgroup computes softmax_t: wait
      // for S_t only (groups complete in order).
      Carried carried = split(lanes.lookup(currentStep.getAccState()[0]));
      inflight = issueValueProduct(
          carried.p, rescaled(carried.o, carried.alpha),
          arith::SubIOp::create(b, loc, idx(1), parity), 2 * carried.o.size());
      NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 1);
    } else if (lookahead && nextScoreBranch &&
               accumulators <= kMaxLookaheadAccumulators) {
      // The next branch's S runs on the tensor cores while this branch's
      // softmax runs (and the P V before it, still in flight, completes).
      aheadBranch = *nextScoreBranch;
      ahead = issueScore(
          aheadBranch,
          cast<RankedTensorType>(currentStep.getKeys()[aheadBranch].getType())
              .getDimSize(3),
          bn);
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 1);
    } else {
      // S issued ahead, then the previous branch's P V: that one may run on.
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc,
                                         wasAhead && valueInFlight ? 1 : 0);
      valueInFlight = false;
      // With a producer, this thread is done with K_t after the step's
      // last S (staged tiles are read after S: those go with V). Ping-pong:
      // the step's first S completed the previous tile's last P V, so it
      // is done with V_{t-1} too.
      unsigned branches = currentStep.getNumBranches();
      if (producer && stagedTiles.empty() && branch + 1 == branches)
        arriveOn(2, parity);
      if (pingPong && branch == 0) {
        auto ifUsed = scf::IfOp::create(
            b, loc, cmpI(arith::CmpIPredicate::ugt, localTile, idx(0)));
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(&ifUsed.getThenRegion().front());
        releaseValues(arith::SubIOp::create(b, loc, idx(1), parity));
      }
    }
    SmallVector<Value> d = unpack(acc, bn / 2);
    Fragments s(1, SmallVector<SmallVector<Value>>(bn / 8));
    for (int64_t nb = 0; nb < bn / 8; ++nb)
      s[0][nb].assign(d.begin() + 4 * nb, d.begin() + 4 * nb + 4);
    return s;
  }

  /// One wgmma with A from registers (WgmmaOps.h): acc += a * B.
  Value registerWgmma(ArrayRef<Value> a, Value bDesc, Value acc, int64_t n) {
    return wgmma::registerProduct(b, loc, a, bDesc, acc, n, elementType());
  }

  /// Byte offset of buffer `buffer` (default: the current one) of a tile of
  /// `bytes` bytes.
  Value bufferBytes(int64_t bytes, Value buffer = Value()) {
    return arith::IndexCastUIOp::create(b, loc, b.getI64Type(),
                                        mulI(buffer ? buffer : parity, bytes));
  }

  /// Issues acc + P V over V's buffer `buffer` (uncommitted): `p` holds P's
  /// A fragments, 4 registers per 16 keys (i32, or f32 bit patterns), `acc`
  /// the dv / 2 accumulators. Returns the accumulator struct.
  Value issueValueProduct(ArrayRef<Value> p, ArrayRef<Value> acc, Value buffer,
                          int64_t dv) {
    int64_t bn = int64_t(p.size()) / 4 * 16;
    Value c = LLVM::PoisonOp::create(b, loc, accumulatorType(dv / 2));
    for (int64_t j = 0; j < dv / 2; ++j)
      c = LLVM::InsertValueOp::create(b, loc, c, acc[j], j);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    // Keys [16k, 16k + 16) are rows 16k.. of every atom (kRowBytes a row);
    // V is MN-major: atoms along D are block-n rows apart. A buffer holds
    // whole atoms; N = Dv reads the last one's first columns only. A branch
    // of value_columns starts at its block's atom (the plan keeps blocks
    // atom-aligned on wgmma).
    int64_t tileWidth = valueBlock.tileWidth ? valueBlock.tileWidth : dv;
    int64_t atomBytes = bn * kRowBytes;
    Value vDesc = descriptor(
        arith::AddIOp::create(
            b, loc, valueAddress,
            arith::AddIOp::create(
                b, loc,
                bufferBytes(atomBytes *
                                llvm::divideCeil(tileWidth, atomColumns()),
                            buffer),
                i64(valueBlock.column / atomColumns() * atomBytes))),
        /*leading=*/atomBytes, /*stride=*/kAtomBlockBytes);
    for (int64_t k = 0; k < bn / kProductK; ++k)
      c = registerWgmma(p.slice(4 * k, 4),
                        advance(vDesc, kProductK * kRowBytes * k), c, dv);
    return c;
  }

  //===--------------------------------------------------------------------===//
  // The key-side product
  //===--------------------------------------------------------------------===//

  /// This thread's first accumulator row among its warpgroup's 64 (the
  /// other is 8 below).
  Value rowInGroup() {
    return addI(mulI(arith::RemUIOp::create(b, loc, warp,
                                            idx(ArchInfo::kWarpsPerWarpgroup)),
                     16),
                group());
  }

  /// This warpgroup's weights `w` (rows: its 64 query rows; columns: the
  /// tile's keys) into its buffer of the key-side tile, in 16 bits, as a V
  /// tile holds keys' rows. Rows past the query length weigh 0: their Q
  /// rows are zero-filled, but their weights may be anything (a score of 0
  /// against a row statistic), and a NaN would reach every key.
  void stageKeySide(StepFrame &f, const Fragments &w) override {
    // Bulk adds: the last step's reductions have read this buffer.
    if (bulkKeySide)
      waitKeySideReads();
    Type element = elementType();
    Value bufferLines = mulI(warpgroup(), keySideLines);
    Value groupRow = rowInGroup();
    Value firstRow = addI(f.q0, mulI(warpgroup(), kGroupRows));
    auto pairType = VectorType::get({2}, b.getF32Type());
    for (int64_t nb = 0; nb < f.bn / 8; ++nb)
      for (int64_t half = 0; half < 2; ++half) {
        Value row = addI(groupRow, idx(8 * half));
        Value lo = w[0][nb][2 * half], hi = w[0][nb][2 * half + 1];
        if (!alignedLengths) {
          Value inside =
              cmpI(arith::CmpIPredicate::sle, addI(firstRow, row), f.lastRow);
          lo = select(inside, lo, f32(0));
          hi = select(inside, hi, f32(0));
        }
        Value pair = vector::FromElementsOp::create(b, loc, pairType,
                                                    ValueRange{lo, hi});
        pair = arith::TruncFOp::create(b, loc, VectorType::get({2}, element),
                                       pair);
        Value col = addI(idx(8 * nb), mulI(quad(), 2));
        vector::StoreOp::create(
            b, loc, pair, keySideTile,
            layout.indices(b, loc, kGroupRows, row, col, bufferLines),
            /*nontemporal=*/false,
            llvm::Align(element.getIntOrFloatBitWidth() / 4));
      }
    // wgmma reads the tile through the async proxy.
    copies::fenceToAsyncProxy(b, loc);
  }

  /// key_side[b, h, k0 + j, c] += sum over the block's rows i of
  /// W[i, j] Q_r[i, c]: per 64 keys and 64 columns, one m64n64 product of
  /// the staged weights (MN-major A: keys contiguous) and Q_r's rows
  /// (MN-major B, as V in P V), then adds (every query tile adds to every
  /// key's row): bulk tensor reductions (bulkKeySide) or atomic adds.
  /// Several consumer warpgroups meet (a barrier among them: the plan takes
  /// no ping-pong turns here) and split the chunks, each summing over every
  /// warpgroup's rows: half the adds of each adding its own rows'
  /// (docs/decisions/024).
  void keySideProduct(StepFrame &f, unsigned r) override {
    bool shared = consumerGroups > 1;
    if (shared)
      barrier();
    else
      namedBarrier(groupId(1), kGroupThreads);
    KeySideChunks k = keySideChunks(f, r);
    if (bulkKeySide) {
      bulkKeySideAdds(f, k);
      return;
    }
    for (int64_t c = 0; c < k.count; ++c) {
      std::optional<OpBuilder::InsertionGuard> inGroupGuard;
      if (shared) {
        auto mine =
            scf::IfOp::create(b, loc,
                              cmpI(arith::CmpIPredicate::eq, warpgroup(),
                                   idx(c % consumerGroups)));
        inGroupGuard.emplace(b);
        b.setInsertionPointToStart(&mine.getThenRegion().front());
      }
      int64_t mc = c / k.perAtom, nc = c % k.perAtom;
      Value acc = keySideChunkProduct(k, idx(mc), idx(nc));
      finishProducts();
      addKeySideChunk(f, unpack(acc, k.n / 2), mc * atomColumns(), nc * k.n);
    }
    // Every warpgroup's products have read the weights before any
    // overwrites its buffer with the next step's.
    if (shared)
      barrier();
  }

  /// Where a step's key-side chunks come from: `count` chunks of 64 keys by
  /// `n` columns, `perAtom` of them per 64 keys; the first weights buffer
  /// and Q row summed over (this warpgroup's, or with several, the block's
  /// first), `steps` k16 products over the rows.
  struct KeySideChunks {
    int64_t n, count, perAtom, steps, queryRows;
    Value weights, rows;
  };
  KeySideChunks keySideChunks(StepFrame &f, unsigned r) {
    bool shared = consumerGroups > 1;
    int64_t dqk =
        cast<RankedTensorType>(f.step.getQueries()[r].getType()).getDimSize(3);
    int64_t atoms = llvm::divideCeil(f.bn, atomColumns());
    int64_t queryAtoms = llvm::divideCeil(dqk, atomColumns());
    KeySideChunks k;
    k.queryRows = cast<MemRefType>(queryTiles[r].getType()).getDimSize(0) /
                  queryAtoms / queryBuffers;
    Value firstGroup = shared ? idx(0) : warpgroup();
    Value rowsOffset = mulI(firstGroup, kGroupRows * kRowBytes);
    if (queryBuffer)
      rowsOffset = addI(
          rowsOffset, mulI(queryBuffer, k.queryRows * queryAtoms * kRowBytes));
    k.weights = arith::AddIOp::create(
        b, loc, keySideAddress,
        toI64(mulI(firstGroup, keySideLines * kRowBytes)));
    k.rows =
        arith::AddIOp::create(b, loc, queryAddresses[r], toI64(rowsOffset));
    k.n = ArchInfo::keySideChunkColumns(dqk);
    k.steps = (shared ? consumerGroups : 1) * kGroupRows / kProductK;
    k.perAtom = dqk / k.n;
    k.count = atoms * k.perAtom;
    return k;
  }

  /// Issues chunk (`mc`, `nc`) of the key-side product (keys mc * 64 ..,
  /// columns nc * n ..): k16 steps over the rows, 64 a weights buffer,
  /// consecutive in Q's. Its accumulator struct, not waited for.
  Value keySideChunkProduct(const KeySideChunks &k, Value mc, Value nc) {
    int64_t bufferBytes = keySideLines * kRowBytes;
    int64_t stepsPerBuffer = kGroupRows / kProductK;
    Value aDesc = descriptor(
        arith::AddIOp::create(b, loc, k.weights,
                              toI64(mulI(mc, kGroupRows * kRowBytes))),
        kGroupRows * kRowBytes, kAtomBlockBytes);
    Value bDesc = descriptor(
        arith::AddIOp::create(b, loc, k.rows,
                              toI64(mulI(nc, k.queryRows * kRowBytes))),
        k.queryRows * kRowBytes, kAtomBlockBytes);
    Value acc = LLVM::PoisonOp::create(b, loc, accumulatorType(k.n / 2));
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    for (int64_t s = 0; s < k.steps; ++s) {
      int64_t aBytes = s / stepsPerBuffer * bufferBytes +
                       s % stepsPerBuffer * kProductK * kRowBytes;
      acc = wgmma::sharedProduct(b, loc, advance(aDesc, aBytes),
                                 advance(bDesc, s * kProductK * kRowBytes), acc,
                                 k.n, elementType(),
                                 /*accumulate=*/s > 0, /*transposed=*/true);
    }
    return acc;
  }

  /// The bulk form of the key-side adds: this warpgroup's chunks (every
  /// consumerGroups-th from its index; the plan splits them evenly) are
  /// issued back to back and waited for once; after a barrier (every
  /// product has read the weights) each is stored in f32 into this
  /// warpgroup's buffer, as 64-row by 32-column boxes in TMA's 128-byte
  /// swizzle (conflict-free 16-byte stores), and one thread adds the boxes
  /// to the output with bulk tensor reductions, which complete while the
  /// next step runs (stageKeySide waits for their reads).
  void bulkKeySideAdds(StepFrame &f, const KeySideChunks &k) {
    int64_t mine = k.count / consumerGroups;
    SmallVector<std::pair<Value, Value>> places;
    SmallVector<Value> accs;
    for (int64_t i = 0; i < mine; ++i) {
      Value c = addI(warpgroup(), idx(i * consumerGroups));
      places.push_back({arith::DivUIOp::create(b, loc, c, idx(k.perAtom)),
                        arith::RemUIOp::create(b, loc, c, idx(k.perAtom))});
      accs.push_back(
          keySideChunkProduct(k, places.back().first, places.back().second));
    }
    finishProducts();
    if (consumerGroups > 1)
      barrier();
    else
      namedBarrier(groupId(1), kGroupThreads);
    for (int64_t i = 0; i < mine; ++i) {
      if (i > 0)
        waitKeySideReads();
      storeKeySideChunk(unpack(accs[i], k.n / 2));
      copies::fenceToAsyncProxy(b, loc);
      namedBarrier(groupId(1), kGroupThreads);
      auto [mc, nc] = places[i];
      inGroupLeader([&] { reduceKeySideChunk(f, k.n, mc, nc); });
    }
  }

  /// With bulk adds, the key side's tensor map (64-row by 32-column f32
  /// boxes), a parameter from here on.
  LogicalResult setKeySide(Value out, Operation *root) override {
    if (failed(MmaSyncEmitter::setKeySide(out, root)))
      return failure();
    if (!bulkKeySide)
      return success();
    FailureOr<Value> map = tensorMap(keySideOut, kGroupRows, 32);
    if (failed(map))
      return failure();
    keySideMap = *map;
    return success();
  }
  /// The key side's tensor map (bulkKeySide).
  Value keySideMap;

  /// Runs `body` in the first thread of each consumer warpgroup (the one
  /// that issues and waits for the key side's bulk reductions).
  void inGroupLeader(function_ref<void()> body) {
    Value first = arith::AndIOp::create(
        b, loc, cmpI(arith::CmpIPredicate::eq, lane, idx(0)),
        cmpI(arith::CmpIPredicate::eq,
             arith::RemUIOp::create(b, loc, warp,
                                    idx(ArchInfo::kWarpsPerWarpgroup)),
             idx(0)));
    auto ifFirst = scf::IfOp::create(b, loc, first);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
    body();
  }

  /// Bulk adds: this warpgroup's buffer is free again once its leader's
  /// reductions have read it.
  void waitKeySideReads() {
    inGroupLeader([&] { copies::waitBulkGroups(b, loc, 0, /*reads=*/true); });
    namedBarrier(groupId(1), kGroupThreads);
  }

  /// Stores an m64nN f32 accumulator (`acc`, n / 2 per thread) into this
  /// warpgroup's buffer as n / 32 boxes of 64 rows by 32 columns, 16-byte
  /// chunk j of row r at j ^ (r % 8) (TMA's 128-byte swizzle): after the
  /// lane-pair swap a thread stores four columns per 8-column block.
  void storeKeySideChunk(ArrayRef<Value> acc) {
    PairedColumns p = pairColumns(acc);
    Value buffer = arith::AddIOp::create(
        b, loc, keySideAddress,
        toI64(mulI(warpgroup(), keySideLines * kRowBytes)));
    Value rowPhase = arith::RemUIOp::create(b, loc, p.row, idx(8));
    Value rowBytes = mulI(p.row, kRowBytes);
    auto vectorType = VectorType::get({4}, b.getF32Type());
    auto sharedPtr = LLVM::LLVMPointerType::get(b.getContext(), 3);
    for (auto [nb, values] : llvm::enumerate(p.quads)) {
      // Column 8 nb + p.col of a 32-column box: box nb / 4, chunk
      // 2 (nb % 4) + p.col / 4.
      int64_t box = nb / 4;
      Value chunk = addI(idx(2 * (nb % 4)),
                         arith::DivUIOp::create(b, loc, p.col, idx(4)));
      Value swizzled = arith::XOrIOp::create(b, loc, chunk, rowPhase);
      Value offset = addI(addI(idx(box * kGroupRows * kRowBytes), rowBytes),
                          mulI(swizzled, 16));
      Value at = LLVM::IntToPtrOp::create(
          b, loc, sharedPtr,
          arith::AddIOp::create(b, loc, buffer, toI64(offset)).getResult());
      Value vector = vector::FromElementsOp::create(b, loc, vectorType, values);
      LLVM::StoreOp::create(b, loc, vector, at, /*alignment=*/16);
    }
  }

  /// The leader's bulk reductions of this warpgroup's staged chunk (keys
  /// mc * 64 .., columns nc * n ..) into the key side, one per 32-column
  /// box, committed as one group. Keys past the output's rows are not
  /// written (the tensor map's bounds).
  void reduceKeySideChunk(StepFrame &f, int64_t n, Value mc, Value nc) {
    Value buffer = arith::AddIOp::create(
        b, loc, keySideAddress,
        toI64(mulI(warpgroup(), keySideLines * kRowBytes)));
    Value key = toI32(addI(f.k0, mulI(mc, kGroupRows)));
    for (int64_t box = 0; box < n / 32; ++box) {
      Value col = toI32(addI(mulI(nc, n), idx(32 * box)));
      copies::tensorReduceAdd(
          b, loc,
          arith::AddIOp::create(b, loc, buffer,
                                i64(box * kGroupRows * kRowBytes)),
          keySideMap,
          {col, key, toI32(f.values.offsets[1]), toI32(f.values.offsets[0])});
    }
    copies::commitBulkGroup(b, loc);
  }

  /// An m64nN accumulator after the lane-pair swap: a thread holds two
  /// columns of rows g and g + 8 per 8-column block; the lanes of a pair
  /// (quad lanes 2p and 2p + 1) swap halves, so that the even one holds
  /// four columns of row g and the odd one of row g + 8. `row`: the
  /// thread's row among the warpgroup's 64; `col`: its first column in
  /// each 8-column block (0 or 4); `quads`: its four values per block.
  struct PairedColumns {
    Value row, col;
    SmallVector<SmallVector<Value>> quads;
  };
  PairedColumns pairColumns(ArrayRef<Value> acc) {
    PairedColumns p;
    Value odd = cmpI(arith::CmpIPredicate::eq,
                     arith::RemUIOp::create(b, loc, lane, idx(2)), idx(1));
    p.row = addI(rowInGroup(), select(odd, idx(8), idx(0)));
    p.col = mulI(arith::DivUIOp::create(b, loc, quad(), idx(2)), 4);
    for (int64_t nb = 0; nb < int64_t(acc.size()) / 4; ++nb) {
      ArrayRef<Value> a = acc.slice(4 * nb, 4);
      SmallVector<Value> sent = {select(odd, a[0], a[2]),
                                 select(odd, a[1], a[3])};
      SmallVector<Value> got;
      for (Value x : sent)
        got.push_back(gpu::ShuffleOp::create(b, loc, x, 1, kThreadsPerWarp,
                                             gpu::ShuffleMode::XOR)
                          .getShuffleResult());
      p.quads.push_back({select(odd, got[0], a[0]), select(odd, got[1], a[1]),
                         select(odd, a[2], got[0]), select(odd, a[3], got[1])});
    }
    return p;
  }

  /// Atomically adds an m64nN accumulator (`acc`, n / 2 per thread) to the
  /// key-side output at keys k0 + `key0` .., columns `col0` ..: four
  /// columns per red.global.add.v4.f32 after the lane-pair swap
  /// (pairColumns): a quarter of the scalar adds, which the L2 serves per
  /// request.
  void addKeySideChunk(StepFrame &f, ArrayRef<Value> acc, int64_t key0,
                       int64_t col0) {
    // The swaps run in every lane, before the guard.
    PairedColumns p = pairColumns(acc);
    Value key = addI(addI(f.k0, idx(key0)), p.row);
    Value col = addI(idx(col0), p.col);
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, keySideOut);
    auto elementAt = [&](Value i, unsigned d) {
      return arith::MulIOp::create(b, loc, i, meta.getStrides()[d]);
    };
    Value offset =
        addI(addI(addI(meta.getOffset(), elementAt(f.values.offsets[0], 0)),
                  elementAt(f.values.offsets[1], 1)),
             addI(elementAt(key, 2), col));
    Value base = arith::IndexCastUIOp::create(
        b, loc, b.getI64Type(),
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, keySideOut));
    Value address = arith::AddIOp::create(
        b, loc, base,
        arith::IndexCastUIOp::create(b, loc, b.getI64Type(), mulI(offset, 4)));
    auto inside = scf::IfOp::create(
        b, loc, cmpI(arith::CmpIPredicate::slt, key, dim(keySideOut, 2)));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&inside.getThenRegion().front());
    for (auto [nb, values] : llvm::enumerate(p.quads)) {
      SmallVector<Value> operands = {
          arith::AddIOp::create(b, loc, address, i64(8 * nb * 4))};
      llvm::append_range(operands, values);
      LLVM::InlineAsmOp::create(
          b, loc, TypeRange(), operands,
          "red.global.add.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f",
          /*has_side_effects=*/true, /*is_align_stack=*/false,
          LLVM::tailcallkind::TailCallKind::None,
          LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
          /*operand_attrs=*/ArrayAttr());
    }
  }

  /// P's A fragments for one wgmma, 4 registers per 16 keys.
  SmallVector<Value> packedWeights(const Fragments &weights, int64_t bn) {
    Fragments pFrag = packWeights(weights, bn);
    SmallVector<Value> p;
    for (const SmallVector<Value> &k : pFrag[0])
      llvm::append_range(p, k);
    return p;
  }

  /// A group's weights, converted before its first P V: written while a
  /// P V is in flight (ping-pong leaves it so), the next P V's registers
  /// make ptxas serialize every wgmma of the kernel (C7513; the backward's
  /// dK and dV in one kernel ran 1.7-2x slower).
  SmallVector<SmallVector<Value>> packedAhead;
  void groupWeighed(ArrayRef<const Fragments *> weights, int64_t bn) override {
    if (pipelinedN)
      return;
    for (const Fragments *w : weights)
      packedAhead.push_back(packedWeights(*w, bn));
  }

  SmallVector<Value> valueProduct(const Fragments &weights, ArrayRef<Value> acc,
                                  ArrayRef<Value> alpha, int64_t dv,
                                  int64_t bn) override {
    if (!pipelinedN) {
      SmallVector<Value> p;
      if (!packedAhead.empty()) {
        p = packedAhead.front();
        packedAhead.erase(packedAhead.begin());
      } else {
        p = packedWeights(weights, bn);
      }
      // With a producer, the step's softmaxes have read its staged tiles
      // (and its S products K) by the last P V: release them before it, so
      // that the producer's copies of the tile after next into that buffer
      // (the pair bias comes from DRAM) start a P V earlier.
      if (producer && !stagedTiles.empty() && lastValueProduct)
        arriveOn(2, parity);
      // With a producer, V_t has its own full barrier.
      if (producer)
        waitBarrier(4, tileIndex);
      // Ping-pong: this warpgroup's turn starts with its P V, which is left
      // in flight until the next S is issued behind it.
      if (pingPong && !turnOpen) {
        turnSync(groupId(0), /*arrive=*/false);
        turnOpen = true;
      }
      Value c = issueValueProduct(p, rescaled(acc.take_front(dv / 2), alpha),
                                  Value(), dv);
      NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
      if (pingPong)
        return unpack(c, dv / 2);
      // With the next branch's S issued ahead, this P V completes behind
      // that branch's softmax; the step's last one waits for every group.
      if (!lastValueProduct && ahead) {
        valueInFlight = true;
        return unpack(c, dv / 2);
      }
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
      valueInFlight = false;
      // This thread is done with tile t's buffers (after the step's last
      // P V).
      if (barriers && lastValueProduct)
        releaseValues(parity);
      return unpack(c, dv / 2);
    }
    // Pipelined: the owed P V (tile t - 1) lands; P_t and softmax_t's
    // rescale are carried to the next step. P_t is converted to 16 bits
    // only now: ptxas gives it the registers of P_{t-1}, which the P V in
    // flight reads (writing them earlier serializes every wgmma, ptxas's
    // C7513).
    SmallVector<Value> out(acc.take_front(dv / 2));
    if (inflight) {
      NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
      out = unpack(inflight, dv / 2);
      inflight = Value();
    }
    Fragments pFrag = packWeights(weights, bn);
    for (const SmallVector<Value> &k : pFrag[0])
      for (Value reg : k)
        out.push_back(arith::BitcastOp::create(
            b, loc, b.getF32Type(), wgmma::fragmentAsI32(b, loc, reg)));
    for (Value f : alpha)
      out.push_back(f ? f : f32(1));
    return out;
  }
};

} // namespace

std::unique_ptr<KernelEmitter> flashlight::attn_to_gpu::createWgmmaEmitter(
    OpBuilder &b, Location loc, const MmaTiles &tiles, KernelPlanAttr plan,
    const BlockMask &mask) {
  return std::make_unique<WgmmaEmitter>(b, loc, tiles, plan, mask);
}
