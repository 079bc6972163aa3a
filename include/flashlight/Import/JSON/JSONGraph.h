//===- JSONGraph.h - Import flashlight-graph JSON (torch.export) -*- C++
//-*-===//
//
// Reads the JSON graph `flashlight.export` writes from a `torch.export`ed
// ATen graph (docs/json-graph.md) into linalg/tensor/arith/math on tensors,
// the same common input IR the StableHLO importer produces.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_IMPORT_JSON_JSONGRAPH_H
#define FLASHLIGHT_IMPORT_JSON_JSONGRAPH_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace flashlight {

/// Version of the flashlight-graph format this importer reads.
constexpr int kJSONGraphVersion = 1;

/// Imports the graph in `text` (read from `path`, which locates diagnostics
/// and the constants' files) as a module with one function: the graph's
/// inputs, then its constants (marked `flashlight.constant` with their
/// file), as arguments. Returns null after emitting a diagnostic located at
/// the offending node for anything malformed or unsupported.
mlir::OwningOpRef<mlir::ModuleOp> importJSONGraph(llvm::StringRef text,
                                                  llvm::StringRef path,
                                                  mlir::MLIRContext *ctx);

} // namespace flashlight

#endif // FLASHLIGHT_IMPORT_JSON_JSONGRAPH_H
