//===- Passes.h - Flashlight conversion passes ------------------*- C++ -*-===//

#ifndef FLASHLIGHT_CONVERSION_PASSES_H
#define FLASHLIGHT_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace flashlight {

#define GEN_PASS_DECL
#include "flashlight/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flashlight/Conversion/Passes.h.inc"

} // namespace flashlight

#endif // FLASHLIGHT_CONVERSION_PASSES_H
