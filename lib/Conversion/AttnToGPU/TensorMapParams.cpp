//===- TensorMapParams.cpp - TMA tensor maps as grid-constant params ------===//
//
// A CUtensorMap is 128 bytes, 64-byte aligned, and TMA reads it from the
// parameter, constant or global space. Passing it by value as a kernel
// parameter costs the launcher no allocation or copy; NVPTX declares a
// `byval` kernel parameter `.param .align 64 .b8 [128]`, and with
// `nvvm.grid_constant` its address may be taken without a local copy.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Conversion/Passes.h"

namespace flashlight {
#define GEN_PASS_DEF_TENSORMAPPARAMS
#include "flashlight/Conversion/Passes.h.inc"
} // namespace flashlight

using namespace mlir;

namespace {

/// Bytes and alignment of a CUtensorMap.
constexpr int64_t kTensorMapBytes = 128, kTensorMapAlignment = 64;

struct TensorMapParamsPass
    : flashlight::impl::TensorMapParamsBase<TensorMapParamsPass> {
  void runOnOperation() override {
    getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto maps = func->getAttrOfType<ArrayAttr>("flashlight.tensor_maps");
      if (!maps || maps.empty())
        return WalkResult::advance();
      unsigned count = maps.size(), params = func.getNumArguments();
      if (count > params) {
        func.emitError("flashlight-tensor-map-params: ")
            << count << " tensor maps but " << params << " parameters";
        signalPassFailure();
        return WalkResult::interrupt();
      }
      Builder b(func.getContext());
      auto blob = LLVM::LLVMArrayType::get(b.getI8Type(), kTensorMapBytes);
      for (unsigned i = params - count; i < params; ++i) {
        if (!isa<LLVM::LLVMPointerType>(func.getArgumentTypes()[i])) {
          func.emitError("flashlight-tensor-map-params: parameter ")
              << i << " is a tensor map but not a pointer";
          signalPassFailure();
          return WalkResult::interrupt();
        }
        func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                        TypeAttr::get(blob));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(kTensorMapAlignment));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
      }
      return WalkResult::advance();
    });
  }
};

} // namespace
