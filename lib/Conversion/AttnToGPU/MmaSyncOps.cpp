//===- MmaSyncOps.cpp - mma.sync building blocks --------------------------===//

#include "MmaSyncOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace flashlight::attn_to_gpu;

Value mma_sync::asOperand(OpBuilder &b, Location loc, Value pair) {
  if (cast<VectorType>(pair.getType()).getElementType().isF16())
    return pair;
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, loc, word, 0);
}

Value mma_sync::pack(OpBuilder &b, Location loc, Value lo, Value hi,
                     Type element) {
  Value pair = vector::FromElementsOp::create(
      b, loc, VectorType::get({2}, b.getF32Type()), ValueRange{lo, hi});
  return asOperand(
      b, loc,
      arith::TruncFOp::create(b, loc, VectorType::get({2}, element), pair));
}

SmallVector<Value> mma_sync::ldmatrix(OpBuilder &b, Location loc, Value tile,
                                      Value row, Value col, int tiles,
                                      bool transpose, Type element) {
  auto type = VectorType::get({tiles, 2}, element);
  Value m = nvgpu::LdMatrixOp::create(b, loc, type, tile, ValueRange{row, col},
                                      transpose, tiles);
  SmallVector<Value> regs;
  for (int i = 0; i < tiles; ++i)
    regs.push_back(asOperand(b, loc, vector::ExtractOp::create(b, loc, m, i)));
  return regs;
}

SmallVector<Value> mma_sync::product(OpBuilder &b, Location loc,
                                     ArrayRef<Value> a, ArrayRef<Value> bFrag,
                                     ArrayRef<Value> c, Type element) {
  NVVM::MMATypes type =
      element.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  Type f32 = b.getF32Type();
  auto result =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  Value d = NVVM::MmaOp::create(
      b, loc, result, a, bFrag, c, ArrayRef<int64_t>{16, 8, 16}, std::nullopt,
      std::nullopt, std::array<NVVM::MMATypes, 2>{type, type},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  SmallVector<Value> out;
  for (int64_t i = 0; i < 4; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, d, i));
  return out;
}
