//===- ConstantLoops.h - Unrolling StableHLO loops of known trip count ----===//
//
// JAX writes `lax.fori_loop`, `lax.scan` and `hk.layer_stack` as
// `stablehlo.while`; AlphaFold's sub-batching and layer stacks are such
// loops. Their trip counts and the indices they slice with are integer
// arithmetic on constants, so the importer unrolls them and makes those
// indices constants before converting to linalg.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_LIB_IMPORT_STABLEHLO_CONSTANTLOOPS_H
#define FLASHLIGHT_LIB_IMPORT_STABLEHLO_CONSTANTLOOPS_H

#include "mlir/IR/BuiltinOps.h"

namespace flashlight::shlo {

/// Unrolls every `stablehlo.while` of `module` whose condition evaluates to
/// a constant on every trip (at most `maxTrips` trips per loop), then
/// replaces the start indices of `dynamic_slice` and `dynamic_update_slice`
/// by constants where they evaluate to one. A loop whose condition does not
/// is a located error.
mlir::LogicalResult unrollConstantLoops(mlir::ModuleOp module,
                                        int64_t maxTrips = 1024);

} // namespace flashlight::shlo

#endif // FLASHLIGHT_LIB_IMPORT_STABLEHLO_CONSTANTLOOPS_H
