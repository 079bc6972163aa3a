//===- Pipeline.cpp - Flashlight's lowering pipelines ---------------------===//

#include "flashlight/Target/Pipeline.h"

#include "flashlight/Conversion/Passes.h"
#include "flashlight/Dialect/Attn/IR/AttnDialect.h"
#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>

using namespace mlir;

void flashlight::registerPipelineDependencies(DialectRegistry &registry) {
  // convert-gpu-to-nvvm lowers every dialect in a kernel through these.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void flashlight::buildAttnToGPUPipeline(OpPassManager &pm,
                                        const PipelineOptions &options) {
  pm.addPass(createCanonicalizerPass());
  attn::AttnPlanOptions plan = options.plan;
  plan.arch = options.chip;
  pm.addPass(attn::createAttnPlan(plan));
  pm.addPass(attn::createAttnOnlineSoftmax());
  pm.addPass(attn::createAttnTile());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createAttnToGPU());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void flashlight::buildGPUToPTXPipeline(OpPassManager &pm,
                                       const PipelineOptions &options) {
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createTensorMapParams());
  // What libdevice does not cover (math.absi on the reference path's
  // kernels) becomes LLVM intrinsics NVPTX selects.
  kernels.addPass(createConvertMathToLLVMPass());
  // NVVM ops that lower to inline PTX (wgmma.mma_async).
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  // PTX ISA 8.0: what sm_90a needs, and assembled by CUDA 12+ ptxas; 8.1
  // on sm_90a for red.global.add.v4.f32 (the key-side product's adds; CUDA
  // 12.1+ ptxas).
  target.features = options.chip == "sm_90a" ? "+ptx81" : "+ptx80";
  target.optLevel = 3;
  if (!options.libdevice.empty())
    target.linkLibs.push_back(options.libdevice);
  pm.addPass(createGpuNVVMAttachTarget(target));

  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

std::string flashlight::findLibdevice() {
  SmallVector<std::string> roots;
  if (const char *home = std::getenv("CUDA_HOME"))
    roots.push_back(home);
  roots.push_back("/usr/local/cuda");
  for (const std::string &root : roots) {
    SmallString<256> path(root);
    llvm::sys::path::append(path, "nvvm", "libdevice", "libdevice.10.bc");
    if (llvm::sys::fs::exists(path))
      return std::string(path);
  }
  return "";
}

namespace {
/// Options of the registered pipelines (flashlight-opt): the chip. The
/// kernel plan's overrides are attn-plan's options; run the passes one by
/// one to set them.
struct PipelineCLOptions : PassPipelineOptions<PipelineCLOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("Target chip"),
                           llvm::cl::init("sm_80")};

  flashlight::PipelineOptions get() const {
    flashlight::PipelineOptions o;
    o.chip = chip;
    o.libdevice = flashlight::findLibdevice();
    return o;
  }
};
} // namespace

void flashlight::registerPipelines() {
  PassPipelineRegistration<PipelineCLOptions>(
      "flashlight-attn-to-gpu",
      "attn.attention to one GPU kernel per attention (reference path)",
      [](OpPassManager &pm, const PipelineCLOptions &o) {
        buildAttnToGPUPipeline(pm, o.get());
      });
  PassPipelineRegistration<PipelineCLOptions>(
      "flashlight-gpu-to-ptx", "GPU kernels to NVVM and PTX",
      [](OpPassManager &pm, const PipelineCLOptions &o) {
        buildGPUToPTXPipeline(pm, o.get());
      });
}
