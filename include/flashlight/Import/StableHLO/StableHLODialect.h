//===- StableHLODialect.h - StableHLO import dialect ------------*- C++ -*-===//
//
// The `stablehlo` import dialect: parse hooks and attribute parsing for the
// StableHLO text JAX prints. Its operations are unregistered.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_IMPORT_STABLEHLO_STABLEHLODIALECT_H
#define FLASHLIGHT_IMPORT_STABLEHLO_STABLEHLODIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"

#include "flashlight/Import/StableHLO/StableHLODialect.h.inc"

#endif // FLASHLIGHT_IMPORT_STABLEHLO_STABLEHLODIALECT_H
