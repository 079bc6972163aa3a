//===- BlockMask.cpp - The block-mask pre-kernel --------------------------===//
//
// A mask that reads data (document ids, ...) has no bound that says which
// tiles it keeps. Rather than have every attention block evaluate it on each
// tile of its range -- in every head -- a pre-kernel classifies each
// (query tile, KV tile) once per call: 0 nothing kept, 1 partial, 2 every
// element kept. It walks the same tiled loop nest as the attention kernel,
// so its tiles and KV-loop bounds are the attention's: block (z, y, x) is
// (b, h, query tile * N tiles + KV tile), and the KV loop becomes "is this
// block's KV tile in the loop's range". A block's threads evaluate the mask
// region on the tile's in-range elements, combine "any kept" / "all kept"
// in the barrier's reduction, and thread 0 writes the byte.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace flashlight::attn_to_gpu;

SmallVector<Value> BlockMask::indices(OpBuilder &b, Location loc, Value b0,
                                      Value h0, Value q0, Value k0) const {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  auto tile = [&](Value offset, int64_t size) -> Value {
    return arith::DivUIOp::create(b, loc, offset,
                                  arith::ConstantIndexOp::create(b, loc, size));
  };
  return {batch ? b0 : zero, heads ? h0 : zero, tile(q0, blockM),
          tile(k0, blockN)};
}

BlockMask flashlight::attn_to_gpu::blockMaskOf(OnlineStepOp step,
                                               int64_t blockM, int64_t blockN) {
  BlockMask mask;
  Block &region = step.getMask().front();
  mask.batch = !region.getArgument(0).use_empty();
  mask.heads = !region.getArgument(1).use_empty();
  mask.blockM = blockM;
  mask.blockN = blockN;
  return mask;
}

namespace {

class BlockMaskEmitter : public KernelEmitter {
public:
  BlockMaskEmitter(OpBuilder &b, Location loc, const BlockMask &mask,
                   Value kvTile, int64_t threads)
      : KernelEmitter(b, loc), mask(mask), kvTile(kvTile), threads(threads) {}

protected:
  BlockMask mask;
  Value kvTile;
  int64_t threads;

  /// No state: the online state and the finalize have no part here.
  int64_t laneCount(Type) override { return 0; }
  LogicalResult onSlice(Value, const View &) override { return success(); }
  LogicalResult emitFinalize(OnlineFinalizeOp) override { return success(); }

  /// Thread 0 stores `tile` as the byte of the tile at (b0, h0, q0, k0).
  void storeTile(Value tile, Value b0, Value h0, Value q0, Value k0) {
    Value tid =
        addI(arith::MulIOp::create(b, loc, warp, idx(kThreadsPerWarp)), lane);
    auto first =
        scf::IfOp::create(b, loc, cmpI(arith::CmpIPredicate::eq, tid, idx(0)));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&first.getThenRegion().front());
    memref::StoreOp::create(b, loc, tile, mask.memref,
                            mask.indices(b, loc, b0, h0, q0, k0));
  }
  Value byte(BlockMask::Tile t) {
    return arith::ConstantIntOp::create(b, loc, b.getI8Type(), t);
  }

  /// The KV loop: this block's tile, if the loop reaches it (the loop's
  /// lower bound is a multiple of its step, a tile). A tile out of its
  /// range is empty: every byte of the buffer is written, so a reader may
  /// look at any tile.
  LogicalResult convertFor(scf::ForOp loop) override {
    Value lb = map.lookup(loop.getLowerBound());
    Value ub = map.lookup(loop.getUpperBound());
    Value k0 =
        arith::MulIOp::create(b, loc, kvTile, map.lookup(loop.getStep()));
    Value inRange =
        arith::AndIOp::create(b, loc, cmpI(arith::CmpIPredicate::sge, k0, lb),
                              cmpI(arith::CmpIPredicate::slt, k0, ub));
    OnlineStepOp step;
    loop.walk([&](OnlineStepOp s) { step = s; });
    auto ifIn = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    if (step) {
      b.setInsertionPointToStart(&ifIn.getElseRegion().front());
      storeTile(byte(BlockMask::Empty), map.lookup(step.getBatchOffset()),
                map.lookup(step.getHeadOffset()),
                map.lookup(step.getQueryOffset()), k0);
    }
    b.setInsertionPointToStart(&ifIn.getThenRegion().front());
    map.map(loop.getInductionVar(), k0);
    distribute(loop.getRegionIterArgs(), {});
    loopLowerBounds.push_back(lb);
    LogicalResult body = convertOps(*loop.getBody());
    loopLowerBounds.pop_back();
    distribute(loop.getResults(), {});
    return body;
  }

  LogicalResult emitStep(OnlineStepOp step) override {
    Value b0 = map.lookup(step.getBatchOffset());
    Value h0 = map.lookup(step.getHeadOffset());
    Value q0 = map.lookup(step.getQueryOffset());
    Value k0 = map.lookup(step.getKeyOffset());
    Value rows = dim(views.lookup(step.getQueries()[0]).memref, 2);
    Value keys = dim(views.lookup(step.getValue()).memref, 2);
    Value lastRow = arith::SubIOp::create(b, loc, rows, idx(1));
    Value lastKey = arith::SubIOp::create(b, loc, keys, idx(1));
    Type i1 = b.getI1Type();
    Value no = arith::ConstantIntOp::create(b, loc, i1, 0);
    Value yes = arith::ConstantIntOp::create(b, loc, i1, 1);

    // Consecutive threads read consecutive keys. Where the threads cover
    // whole rows of the tile, each keeps one column and walks rows, so that
    // the mask's column-only work (the key's document id) is loop-invariant
    // and hoisted; otherwise element e is (e / block-n, e % block-n).
    // Elements past the tensors' ends count for neither.
    Value tid =
        addI(arith::MulIOp::create(b, loc, warp, idx(kThreadsPerWarp)), lane);
    bool columns = threads % mask.blockN == 0;
    Value column = arith::RemUIOp::create(b, loc, tid, idx(mask.blockN));
    Value firstRow = arith::DivUIOp::create(b, loc, tid, idx(mask.blockN));
    Value k = addI(k0, column);
    auto loop = columns ? scf::ForOp::create(b, loc, firstRow, idx(mask.blockM),
                                             idx(threads / mask.blockN),
                                             ValueRange{no, yes})
                        : scf::ForOp::create(b, loc, tid,
                                             idx(mask.blockM * mask.blockN),
                                             idx(threads), ValueRange{no, yes});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value e = loop.getInductionVar();
      Value q = addI(
          q0,
          columns ? e : arith::DivUIOp::create(b, loc, e, idx(mask.blockN)));
      if (!columns)
        k = addI(k0, arith::RemUIOp::create(b, loc, e, idx(mask.blockN)));
      Value in = arith::AndIOp::create(
          b, loc, cmpI(arith::CmpIPredicate::slt, q, rows),
          cmpI(arith::CmpIPredicate::slt, k, keys));
      Value keep = inlineRegion(step.getMask(), {},
                                {b0, h0, minI(q, lastRow), minI(k, lastKey)},
                                step.getCaptures())[0];
      Value any = arith::OrIOp::create(b, loc, loop.getRegionIterArgs()[0],
                                       arith::AndIOp::create(b, loc, in, keep));
      Value all = arith::AndIOp::create(
          b, loc, loop.getRegionIterArgs()[1],
          arith::OrIOp::create(b, loc, arith::XOrIOp::create(b, loc, in, yes),
                               keep));
      scf::YieldOp::create(b, loc, ValueRange{any, all});
    }

    auto reduce = [&](Value flag, NVVM::BarrierReduction kind) {
      Value r = NVVM::BarrierOp::create(
                    b, loc, b.getI32Type(), Value(), Value(),
                    NVVM::BarrierReductionAttr::get(b.getContext(), kind),
                    arith::ExtUIOp::create(b, loc, b.getI32Type(), flag))
                    .getRes();
      return cmpI(arith::CmpIPredicate::ne, r,
                  arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0));
    };
    Value any = reduce(loop.getResult(0), NVVM::BarrierReduction::OR);
    Value all = reduce(loop.getResult(1), NVVM::BarrierReduction::AND);
    Value tile = select(
        any, select(all, byte(BlockMask::Full), byte(BlockMask::Partial)),
        byte(BlockMask::Empty));
    storeTile(tile, b0, h0, q0, k0);
    return success();
  }
};

} // namespace

std::unique_ptr<KernelEmitter>
flashlight::attn_to_gpu::createBlockMaskEmitter(OpBuilder &b, Location loc,
                                                const BlockMask &mask,
                                                Value kvTile, int64_t threads) {
  return std::make_unique<BlockMaskEmitter>(b, loc, mask, kvTile, threads);
}
