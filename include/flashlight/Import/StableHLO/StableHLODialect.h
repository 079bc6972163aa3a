//===- StableHLODialect.h - StableHLO import dialect ------------*- C++ -*-===//
//
// The `stablehlo` and `chlo` import dialects: parse hooks and attribute parsing
// for the StableHLO text JAX prints. Its operations are unregistered.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_IMPORT_STABLEHLO_STABLEHLODIALECT_H
#define FLASHLIGHT_IMPORT_STABLEHLO_STABLEHLODIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpImplementation.h"

#include "flashlight/Import/StableHLO/CHLODialect.h.inc"
#include "flashlight/Import/StableHLO/StableHLODialect.h.inc"

#endif // FLASHLIGHT_IMPORT_STABLEHLO_STABLEHLODIALECT_H
