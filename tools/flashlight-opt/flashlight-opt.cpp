//===- flashlight-opt.cpp - Flashlight's mlir-opt -------------------------===//
//
// Parses the dialects an attention program passes through, from imported
// tensor code to NVVM, and runs Flashlight's passes on them.
//
//===----------------------------------------------------------------------===//

#include "flashlight/Conversion/Passes.h"
#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"
#include "flashlight/Import/Passes.h"
#include "flashlight/Import/StableHLO/StableHLODialect.h"
#include "flashlight/Import/Torch/TorchDialect.h"
#include "flashlight/Target/Pipeline.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<
      flashlight::attn::AttnDialect, flashlight::shlo::StableHLODialect,
      flashlight::shlo::CHLODialect, flashlight::torchimport::TorchDialect,
      mlir::affine::AffineDialect, mlir::arith::ArithDialect,
      mlir::bufferization::BufferizationDialect, mlir::cf::ControlFlowDialect,
      mlir::func::FuncDialect, mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect,
      mlir::linalg::LinalgDialect, mlir::math::MathDialect,
      mlir::memref::MemRefDialect, mlir::nvgpu::NVGPUDialect,
      mlir::NVVM::NVVMDialect, mlir::scf::SCFDialect,
      mlir::tensor::TensorDialect, mlir::vector::VectorDialect>();

  // Generic cleanups (canonicalize, cse, ...) and every Flashlight pass.
  mlir::registerTransformsPasses();
  flashlight::attn::registerAttnPasses();
  flashlight::registerFlashlightConversionPasses();
  flashlight::registerFlashlightImportPasses();
  // The lowering pipelines, and what they need to reach PTX.
  flashlight::registerPipelineDependencies(registry);
  flashlight::registerPipelines();

  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Flashlight optimizer driver\n", registry));
}
