//===- Pipeline.h - Flashlight's lowering pipelines -------------*- C++ -*-===//
//
// The pass pipelines from attn IR to PTX, shared by flashlight-compile and
// (as registered pipelines) flashlight-opt's lit tests.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_TARGET_PIPELINE_H
#define FLASHLIGHT_TARGET_PIPELINE_H

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace flashlight {

/// Knobs of the lowering. Defaults are the reference path's heuristic.
struct PipelineOptions {
  /// Target chip, e.g. "sm_80" or "sm_90a".
  std::string chip = "sm_80";
  /// Query rows per thread block (one warp each) and keys per KV tile.
  int64_t blockM = 4;
  int64_t blockN = 32;
  /// Use the tensor-core (mma.sync) code generator where the program fits.
  bool tensorCores = false;
  /// Query rows per warp of the tensor-core generator (16 or 32; 0: its
  /// default for block-m).
  int64_t warpRows = 0;
  /// On sm_90a, use warpgroup MMA (wgmma) for the tensor-core generator.
  bool wgmma = true;
  /// For data-dependent masks, a block-mask pre-kernel (else a tile vote).
  bool blockMask = true;
  /// With wgmma, overlap each warpgroup's softmax with its previous P V.
  bool overlapSoftmax = true;
  /// With wgmma, mbarriers instead of a block-wide barrier per step.
  bool decoupleWarpgroups = true;
  /// With wgmma and several branches, issue the next branch's S early.
  bool branchLookahead = true;
  /// With wgmma, a producer warpgroup copies K/V (see attn-to-gpu).
  bool producerWarpgroup = true;
  /// With the producer warpgroup, consumers take turns issuing their
  /// products.
  bool pingPong = true;
  /// libdevice bitcode for math functions (tanh, log, ...); empty: none.
  std::string libdevice;
};

/// Dialects, interfaces and translations the pipelines need.
void registerPipelineDependencies(mlir::DialectRegistry &registry);

/// attn.attention -> online form -> tiles -> gpu.module with one kernel per
/// attention (the host functions are removed).
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
