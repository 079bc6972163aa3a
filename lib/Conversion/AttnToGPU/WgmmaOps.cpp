//===- WgmmaOps.cpp - Warpgroup MMA building blocks -----------------------===//

#include "WgmmaOps.h"

#include "flashlight/Dialect/Attn/Analysis/ArchInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <string>

using namespace mlir;
using namespace flashlight::attn_to_gpu;
using flashlight::attn::ArchInfo;

namespace {
Value i64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v);
}

NVVM::WGMMATypes wgmmaType(Type element) {
  return element.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
}
} // namespace

Value wgmma::matrixDescriptor(OpBuilder &b, Location loc, Value address,
                              int64_t leading, int64_t stride) {
  Value start =
      LLVM::InlineAsmOp::create(
          b, loc, b.getI64Type(), ValueRange(address), "mov.b64 $0, $1;",
          "=l,l", /*has_side_effects=*/true,
          /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
          /*asm_dialect=*/LLVM::AsmDialectAttr(),
          /*operand_attrs=*/ArrayAttr())
          .getRes();
  start = arith::ShRUIOp::create(
      b, loc, arith::AndIOp::create(b, loc, start, i64(b, loc, 0x3FFFF)),
      i64(b, loc, 4));
  return arith::OrIOp::create(
      b, loc, start,
      i64(b, loc,
          (leading >> 4) << 16 | (stride >> 4) << 32 | int64_t(1) << 62));
}

Value wgmma::advanceDescriptor(OpBuilder &b, Location loc, Value desc,
                               int64_t bytes) {
  assert(bytes % 16 == 0 && "descriptor offsets are in 16-byte units");
  return bytes ? arith::AddIOp::create(b, loc, desc, i64(b, loc, bytes >> 4))
               : desc;
}

Type wgmma::accumulatorType(MLIRContext *context, int64_t n) {
  return LLVM::LLVMStructType::getLiteral(
      context, SmallVector<Type>(n, Float32Type::get(context)));
}

SmallVector<Value> wgmma::unpackAccumulator(OpBuilder &b, Location loc,
                                            Value acc, int64_t n) {
  SmallVector<Value> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, acc, i));
  return out;
}

void wgmma::commitAndWait(OpBuilder &b, Location loc) {
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  NVVM::WgmmaWaitGroupSyncOp::create(b, loc, 0);
}

Value wgmma::fragmentAsI32(OpBuilder &b, Location loc, Value reg) {
  if (reg.getType().isF32())
    return arith::BitcastOp::create(b, loc, b.getI32Type(), reg);
  if (reg.getType() == b.getI32Type())
    return reg;
  Value word = vector::BitCastOp::create(
      b, loc, VectorType::get({1}, b.getI32Type()), reg);
  return vector::ExtractOp::create(b, loc, word, 0);
}

Value wgmma::registerProduct(OpBuilder &b, Location loc, ArrayRef<Value> a,
                             Value bDesc, Value acc, int64_t n, Type element) {
  std::string type = element.isBF16() ? "bf16" : "f16";
  std::string text = "wgmma.mma_async.sync.aligned.m64n" + std::to_string(n) +
                     "k16.f32." + type + "." + type + " {";
  std::string constraints;
  for (int64_t i = 0; i < n / 2; ++i) {
    text += (i ? ", $" : "$") + std::to_string(i);
    constraints += (i ? ",=f" : "=f");
  }
  int64_t first = n / 2;
  text += "}, {$" + std::to_string(first) + ", $" + std::to_string(first + 1) +
          ", $" + std::to_string(first + 2) + ", $" +
          std::to_string(first + 3) + "}, $" + std::to_string(first + 4) +
          ", 1, 1, 1, 1;"; // scale-d, scale-a, scale-b, transpose-b
  constraints += ",r,r,r,r,l";
  SmallVector<Value> operands;
  for (Value reg : a)
    operands.push_back(fragmentAsI32(b, loc, reg));
  operands.push_back(bDesc);
  for (int64_t i = 0; i < n / 2; ++i) {
    operands.push_back(LLVM::ExtractValueOp::create(b, loc, acc, i));
    constraints += "," + std::to_string(i);
  }
  return LLVM::InlineAsmOp::create(
             b, loc, accumulatorType(b.getContext(), n / 2), operands, text,
             constraints,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             /*operand_attrs=*/ArrayAttr())
      .getRes();
}

Value wgmma::sharedProduct(OpBuilder &b, Location loc, Value aDesc, Value bDesc,
                           Value acc, int64_t n, Type element, bool accumulate,
                           bool transposed) {
  // m64: a warpgroup's rows; k16 for 16-bit operands.
  constexpr int64_t k = 16;
  return NVVM::WgmmaMmaAsyncOp::create(
      b, loc, acc.getType(), acc, aDesc, bDesc,
      NVVM::MMAShapeAttr::get(b.getContext(), ArchInfo::kWarpgroupRows, n, k),
      wgmmaType(element), wgmmaType(element), NVVM::WGMMATypes::f32,
      accumulate ? NVVM::WGMMAScaleOut::one : NVVM::WGMMAScaleOut::zero,
      NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one,
      transposed ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      transposed ? NVVM::MMALayout::row : NVVM::MMALayout::col,
      /*satfinite=*/nullptr);
}
