//===- Pipeline.h - Flashlight's lowering pipelines -------------*- C++ -*-===//
//
// The pass pipelines from attn IR to PTX, shared by flashlight-compile and
// (as registered pipelines) flashlight-opt's lit tests.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_TARGET_PIPELINE_H
#define FLASHLIGHT_TARGET_PIPELINE_H

#include "flashlight/Dialect/Attn/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace flashlight {

/// What the lowering takes: the chip, the kernel planner's overrides
/// (declared once, as attn-plan's options) and libdevice.
struct PipelineOptions {
  /// Target chip, e.g. "sm_80" or "sm_90a" (attn-plan's `arch` follows it).
  std::string chip = "sm_80";
  /// Overrides of the kernel plan (attn-plan's options).
  attn::AttnPlanOptions plan;
  /// libdevice bitcode for math functions (tanh, log, ...); empty: none.
  std::string libdevice;
};

/// Dialects, interfaces and translations the pipelines need.
void registerPipelineDependencies(mlir::DialectRegistry &registry);

/// attn.attention -> kernel plan -> online form -> tiles -> gpu.module with
/// one kernel per attention (the host functions are removed).
void buildAttnToGPUPipeline(mlir::OpPassManager &pm,
                            const PipelineOptions &options);

/// gpu.module -> NVVM -> gpu.binary holding PTX for `options.chip`.
void buildGPUToPTXPipeline(mlir::OpPassManager &pm,
                           const PipelineOptions &options);

/// Registers `flashlight-attn-to-gpu` and `flashlight-gpu-to-ptx` pipelines.
void registerPipelines();

/// The libdevice bitcode of the CUDA toolkit, if found ($CUDA_HOME, then
/// /usr/local/cuda); empty otherwise.
std::string findLibdevice();

} // namespace flashlight

#endif // FLASHLIGHT_TARGET_PIPELINE_H
