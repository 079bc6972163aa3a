//===- CopyPipeline.cpp - Asynchronous copies and their barriers ----------===//

#include "CopyPipeline.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;
using namespace flashlight::attn_to_gpu;

Value copies::asyncCopy(OpBuilder &b, Location loc, Value dst,
                        ValueRange dstIndices, Value src, ValueRange srcIndices,
                        int64_t elements, Value copied) {
  return nvgpu::DeviceAsyncCopyOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), dst, dstIndices,
      src, srcIndices, b.getIndexAttr(elements), copied,
      /*bypassL1=*/b.getUnitAttr());
}

Value copies::commitGroup(OpBuilder &b, Location loc, ValueRange tokens) {
  return nvgpu::DeviceAsyncCreateGroupOp::create(
      b, loc, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
}

void copies::waitGroups(OpBuilder &b, Location loc, Value group,
                        int32_t pending) {
  nvgpu::DeviceAsyncWaitOp::create(b, loc, group, b.getI32IntegerAttr(pending));
}

void copies::fenceToAsyncProxy(OpBuilder &b, Location loc) {
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKind::async_shared,
      NVVM::SharedSpaceAttr::get(b.getContext(),
                                 NVVM::SharedSpace::shared_cta));
}

void copies::initBarrier(OpBuilder &b, Location loc, Value barrier,
                         Value count) {
  NVVM::MBarrierInitOp::create(b, loc, barrier, count, Value());
}

void copies::arrive(OpBuilder &b, Location loc, Value barrier) {
  NVVM::MBarrierArriveOp::create(b, loc, Type(), barrier, Value());
}

void copies::arriveWhenCopiesLand(OpBuilder &b, Location loc, Value barrier) {
  NVVM::CpAsyncMBarrierArriveOp::create(b, loc, barrier, /*noinc=*/true);
}

void copies::waitPhase(OpBuilder &b, Location loc, Value barrier,
                       Value parity) {
  NVVM::MBarrierTryWaitParityOp::create(
      b, loc, barrier, parity,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0));
}

void copies::tensorCopy(OpBuilder &b, Location loc, Value dst, Value tensorMap,
                        ValueRange coordinates, Value barrier) {
  // The destination operand is a shared::cluster address (address space
  // 7): a block's own shared::cta address is one.
  MLIRContext *context = b.getContext();
  Value shared = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(context, 3), dst);
  Value cluster = LLVM::AddrSpaceCastOp::create(
      b, loc, LLVM::LLVMPointerType::get(context, 7), shared);
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      b, loc, cluster, tensorMap, coordinates, barrier, ValueRange(), Value(),
      Value(), NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false,
      NVVM::CTAGroupKindAttr(), Value());
}

void copies::tensorReduceAdd(OpBuilder &b, Location loc, Value src,
                             Value tensorMap, ValueRange coordinates) {
  Value shared = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext(), 3), src);
  NVVM::CpAsyncBulkTensorReduceOp::create(
      b, loc, tensorMap, shared, NVVM::TMAReduxKind::ADD,
      NVVM::TMAStoreMode::TILE, coordinates, /*l2CacheHint=*/Value());
}

void copies::commitBulkGroup(OpBuilder &b, Location loc) {
  NVVM::CpAsyncBulkCommitGroupOp::create(b, loc);
}

void copies::waitBulkGroups(OpBuilder &b, Location loc, int32_t pending,
                            bool reads) {
  NVVM::CpAsyncBulkWaitGroupOp::create(b, loc, b.getI32IntegerAttr(pending),
                                       reads ? b.getUnitAttr() : UnitAttr());
}

void copies::arriveExpectingBytes(OpBuilder &b, Location loc, Value barrier,
                                  int64_t bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(
      b, loc, Type(), barrier,
      arith::ConstantIntOp::create(b, loc, b.getI32Type(), bytes),
      NVVM::MemScopeKind::CTA, /*relaxed=*/false, Value());
}
