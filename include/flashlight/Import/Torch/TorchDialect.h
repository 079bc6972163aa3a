//===- TorchDialect.h - torch-mlir import dialect ---------------*- C++ -*-===//
//
// The `torch` import dialect: type parsing and parse hooks for the text
// torch-mlir prints. Its operations are unregistered.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_IMPORT_TORCH_TORCHDIALECT_H
#define FLASHLIGHT_IMPORT_TORCH_TORCHDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"

#include "flashlight/Import/Torch/TorchDialect.h.inc"

#endif // FLASHLIGHT_IMPORT_TORCH_TORCHDIALECT_H
