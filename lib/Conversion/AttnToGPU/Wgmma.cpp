//===- Wgmma.cpp - Hopper warpgroup-MMA code generator --------------------===//
//
// sm_90a: the mma.sync generator's structure (tile staging, the KV loop's
// copy groups, the per-element softmax, the finalize) with both products on
// wgmma. A warpgroup (4 consecutive warps) owns 64 query rows; warp w of it
// holds rows [16w, 16w + 16), and its m64nN accumulator is the mma.sync m16n8
// C fragment repeated over N / 8, so the per-element code carries over.
//
// - Tiles (Q, K, V) are stored as 8x8 core matrices of 128 contiguous bytes,
//   core-row major ([rows / 8][D / 8][8][8]), which wgmma reads without
//   swizzling; each thread's 16-byte cp.async fills one core-matrix row, and
//   a warp's copies fill 4 core matrices, free of bank conflicts.
// - S = Q K^T: wgmma m64n(block-n)k16 with Q and K from shared memory
//   (both K-major: the leading byte offset steps between core matrices along
//   D, the stride byte offset between 8-row groups).
// - O = alpha * O + P V: wgmma m64n(Dv)k16 with P from registers (the same
//   A fragments as mma.sync) and V from shared memory, transposed (V's rows
//   are keys, the contraction dimension): MLIR 22's NVVM op has no
//   register-A form, so this one is inline PTX.
// - cp.async writes through the generic proxy and wgmma reads through the
//   async proxy: each thread fences (fence.proxy.async) after its copies
//   land, before the barrier.
//
//===----------------------------------------------------------------------===//

#include "MmaSync.h"

using namespace flashlight::attn_to_gpu;

namespace {

class WgmmaEmitter : public MmaSyncEmitter {
public:
  WgmmaEmitter(OpBuilder &b, Location loc, const MmaTiles &tiles,
               int64_t threads)
      : MmaSyncEmitter(b, loc, tiles, threads, /*mTiles=*/1) {
    // Tile addresses in the shared window, once at the kernel's start.
    for (auto [tile, address] :
         {std::pair(keyTile, &keyAddress), std::pair(valueTile, &valueAddress),
          std::pair(queryTile, &queryAddress)}) {
      Value pointer =
          memref::ExtractAlignedPointerAsIndexOp::create(b, loc, tile);
      *address = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), pointer);
    }
  }

protected:
  Value keyAddress, valueAddress, queryAddress;

  int64_t tileRows(Value tile, int64_t d) override {
    return cast<MemRefType>(tile.getType()).getNumElements() / d;
  }

  /// Copy c fills row c % 8 of core matrix c / 8 (core-row major), so that
  /// consecutive threads write consecutive 16 bytes of shared memory.
  std::pair<Value, Value> chunkOrigin(Value c, int64_t d) override {
    Value core = arith::DivUIOp::create(b, loc, c, idx(8));
    Value row = addI(mulI(arith::DivUIOp::create(b, loc, core, idx(d / 8)), 8),
                     arith::RemUIOp::create(b, loc, c, idx(8)));
    return {row, mulI(arith::RemUIOp::create(b, loc, core, idx(d / 8)), 8)};
  }

  /// Tiles are [rows / 8 * D / 8, 64]: (core matrix, element in it).
  SmallVector<Value> tileIndices(Value row, Value col, int64_t d) override {
    Value core = addI(mulI(arith::DivUIOp::create(b, loc, row, idx(8)), d / 8),
                      arith::DivUIOp::create(b, loc, col, idx(8)));
    Value within = addI(mulI(arith::RemUIOp::create(b, loc, row, idx(8)), 8),
                        arith::RemUIOp::create(b, loc, col, idx(8)));
    return {core, within};
  }

  void publishCopies() override {
    NVVM::FenceProxyOp::create(
        b, loc, NVVM::ProxyKind::async_shared,
        NVVM::SharedSpaceAttr::get(b.getContext(),
                                   NVVM::SharedSpace::shared_cta));
  }

  Value i64(int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
  }

  /// The matrix descriptor of the operand starting `offset` bytes into the
  /// tile at `address`: start address, leading byte offset (between core
  /// matrices along the contraction) and stride byte offset (between core
  /// matrices along M or N), each in 16-byte units; no swizzle.
  Value descriptor(Value address, Value offset, int64_t leading,
                   int64_t stride) {
    Value start = arith::AddIOp::create(b, loc, address, offset);
    start = arith::ShRUIOp::create(
        b, loc, arith::AndIOp::create(b, loc, start, i64(0x3FFFF)), i64(4));
    return arith::OrIOp::create(
        b, loc, start, i64((leading >> 4) << 16 | (stride >> 4) << 32));
  }

  /// An accumulator struct of `n` f32 for the wgmma ops.
  Type accumulatorType(int64_t n) {
    return LLVM::LLVMStructType::getLiteral(
        b.getContext(), SmallVector<Type>(n, b.getF32Type()));
  }

  SmallVector<Value> unpack(Value acc, int64_t n) {
    SmallVector<Value> out;
    for (int64_t i = 0; i < n; ++i)
      out.push_back(LLVM::ExtractValueOp::create(b, loc, acc, i));
    return out;
  }

  /// Commits the warpgroup's wgmma ops and waits for them.
  void finishProducts() {
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
  }

  Fragments scoreProduct(ArrayRef<Value>, int64_t dqk, int64_t bn) override {
    // The warpgroup's 64 rows of Q start 64 * dqk elements into its tile.
    int64_t bytes = elementType().getIntOrFloatBitWidth() / 8;
    Value group = arith::DivUIOp::create(b, loc, warp, idx(4));
    Value rowsOffset = arith::IndexCastUIOp::create(
        b, loc, b.getI64Type(), mulI(group, 64 * dqk * bytes));
    int64_t n = bn / 2;
    Type type = accumulatorType(n);
    auto wgmmaType =
        elementType().isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
    Value acc = LLVM::PoisonOp::create(b, loc, type);
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    // Each k16 step moves 2 core matrices (256 bytes) along D.
    for (int64_t k = 0; k < dqk / 16; ++k) {
      Value qDesc = descriptor(
          queryAddress, arith::AddIOp::create(b, loc, rowsOffset, i64(256 * k)),
          128, dqk / 8 * 128);
      Value kDesc = descriptor(keyAddress, i64(256 * k), 128, dqk / 8 * 128);
      acc = NVVM::WgmmaMmaAsyncOp::create(
          b, loc, type, acc, qDesc, kDesc,
          NVVM::MMAShapeAttr::get(b.getContext(), 64, bn, 16), wgmmaType,
          wgmmaType, NVVM::WGMMATypes::f32,
          k == 0 ? NVVM::WGMMAScaleOut::zero : NVVM::WGMMAScaleOut::one,
          NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
          NVVM::MMALayout::row, NVVM::MMALayout::col,
          /*satfinite=*/nullptr);
    }
    finishProducts();
    SmallVector<Value> d = unpack(acc, n);
    Fragments s(1, SmallVector<SmallVector<Value>>(bn / 8));
    for (int64_t nb = 0; nb < bn / 8; ++nb)
      s[0][nb].assign(d.begin() + 4 * nb, d.begin() + 4 * nb + 4);
    return s;
  }

  /// One wgmma with A from registers: acc += a * B, B from the descriptor.
  /// `transposeB`: B's rows are the contraction dimension (MN-major).
  Value registerWgmma(ArrayRef<Value> a, Value bDesc, Value acc, int64_t n) {
    std::string type = elementType().isBF16() ? "bf16" : "f16";
    std::string text = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
                       "k16.f32." + type + "." + type + " {";
    std::string constraints;
    for (int64_t i = 0; i < n / 2; ++i) {
      text += (i ? ", $" : "$") + std::to_string(i);
      constraints += (i ? ",=f" : "=f");
    }
    int64_t first = n / 2;
    text += "}, {$" + std::to_string(first) + ", $" +
            std::to_string(first + 1) + ", $" + std::to_string(first + 2) +
            ", $" + std::to_string(first + 3) + "}, $" +
            std::to_string(first + 4) +
            ", 1, 1, 1, 1;"; // scale-d, scale-a, scale-b, transpose-b
    constraints += ",r,r,r,r,l";
    SmallVector<Value> operands;
    for (Value reg : a) {
      if (reg.getType() != b.getI32Type()) { // f16: vector<2xf16>
        reg = vector::BitCastOp::create(
            b, loc, VectorType::get({1}, b.getI32Type()), reg);
        reg = vector::ExtractOp::create(b, loc, reg, 0);
      }
      operands.push_back(reg);
    }
    operands.push_back(bDesc);
    for (int64_t i = 0; i < n / 2; ++i) {
      operands.push_back(LLVM::ExtractValueOp::create(b, loc, acc, i));
      constraints += "," + std::to_string(i);
    }
    return LLVM::InlineAsmOp::create(
               b, loc, accumulatorType(n / 2), operands, text, constraints,
               /*has_side_effects=*/true, /*is_align_stack=*/false,
               LLVM::tailcallkind::TailCallKind::None,
               LLVM::AsmDialectAttr::get(b.getContext(),
                                         LLVM::AsmDialect::AD_ATT),
               /*operand_attrs=*/ArrayAttr())
        .getRes();
  }

  SmallVector<Value>
  valueProduct(ArrayRef<SmallVector<SmallVector<Value>>> pFrag,
               ArrayRef<Value> acc, ArrayRef<Value> alpha, int64_t dv,
               int64_t bn) override {
    waitCopies(valueGroup, 1);
    Type type = accumulatorType(dv / 2);
    Value c = LLVM::PoisonOp::create(b, loc, type);
    for (int64_t j = 0; j < dv / 2; ++j) {
      Value f = alpha[(j % 4) / 2];
      c = LLVM::InsertValueOp::create(b, loc, c, f ? mul(acc[j], f) : acc[j],
                                      j);
    }
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
    // Keys [16k, 16k + 16) are 2 core-matrix rows of V: 2 * dv * 16 bytes.
    int64_t bytes = elementType().getIntOrFloatBitWidth() / 8;
    for (int64_t k = 0; k < bn / 16; ++k) {
      Value vDesc = descriptor(valueAddress, i64(16 * dv * bytes * k),
                               /*leading=*/dv / 8 * 128, /*stride=*/128);
      c = registerWgmma(pFrag[0][k], vDesc, c, dv);
    }
    finishProducts();
    return unpack(c, dv / 2);
  }
};

} // namespace

std::unique_ptr<KernelEmitter> flashlight::attn_to_gpu::createWgmmaEmitter(
    OpBuilder &b, Location loc, const MmaTiles &tiles, int64_t threads) {
  return std::make_unique<WgmmaEmitter>(b, loc, tiles, threads);
}
