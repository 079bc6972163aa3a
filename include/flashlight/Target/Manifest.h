//===- Manifest.h - Describe compiled kernels as JSON ------------*- C++
//-*-===//
//
// The manifest is the contract between the compiler and the runtimes: the
// kernel symbol, its parameters (role, dtype, shape, strides), the launch
// geometry, the per-arch artifacts, and the attention program itself in a
// small serialized form that the runtime's fp64 reference interpreter runs.
//
//===----------------------------------------------------------------------===//

#ifndef FLASHLIGHT_TARGET_MANIFEST_H
#define FLASHLIGHT_TARGET_MANIFEST_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LLVM.h"

#include <nlohmann/json.hpp>

namespace flashlight {

/// Version of the manifest format; bump on incompatible changes.
constexpr int kManifestVersion = 1;
/// The version of a manifest whose program calls several attention kernels
/// (`attentions`, indexed by its entry's attention steps): a loader that
/// reads only version 1 refuses it rather than run the first kernel for
/// every step.
constexpr int kManifestVersionAttentions = 2;

/// The parameters of the kernel generated from `func` (its arguments, then
/// its results), with their roles in the attention (`q0`, `k0`, `v`,
/// `sink0`, `capture0`, `out`, `lse0`; `argN` / `resultN` otherwise).
nlohmann::json describeParams(mlir::func::FuncOp func);

/// The attention in `func` serialized for the reference interpreter, or a
/// failure (with a diagnostic) if it uses an op the interpreter lacks.
mlir::FailureOr<nlohmann::json> exportProgram(mlir::func::FuncOp func);

/// How the user's program `host`, which computes its results by one `call`
/// of the kernel function plus layout copies (attn-outline's output), maps
/// onto the kernel: the host's inputs and outputs, for each kernel argument
/// the host input it reads (`input`) and which kernel dim indexes each of
/// that input's dims (`index`: `{"dim": k}` or `{"const": c}`), and for each
/// host result the kernel result it copies and, per kernel dim, the host
/// dim (or constant) that indexes it. Fails, with a diagnostic, when the
/// host computes anything else. A kernel input that is a tensor constant of
/// the program is handed to `writeConstant`, which stores it and returns
/// the file name the entry records (`{"constant": file}`).
mlir::FailureOr<nlohmann::json> describeEntry(
    mlir::func::FuncOp host, mlir::func::CallOp call,
    llvm::function_ref<mlir::FailureOr<std::string>(mlir::ElementsAttr)>
        writeConstant);

/// The reference path's description of `host` (after
/// flashlight-host-to-gpu): its inputs and outputs as for `describeEntry`,
/// and `steps`, run in order over numbered `values` (the inputs first):
/// `{"op": "kernel", "kernel", "grid", "block", "args", "results"}` (a
/// kernel of the `flashlight_host` module; `args` in parameter order,
/// `results` the values it creates; a contraction, `out += a * b`, also
/// has its `einsum`, e.g. "abd,cd->abc", for a runtime to use a GEMM), `{"op":
/// "attention", "attention", "args", "results"}` (a call of attention kernel
/// `attention`: the position of the callee in `attentions`, the kernel
/// functions in manifest order), `{"op": "reshape", "source", "result"}`,
/// `{"op": "constant", "file", "result"}`, `{"op": "empty", "result"}`;
/// `results` names the values returned.
mlir::FailureOr<nlohmann::json> describeHostSteps(
    mlir::func::FuncOp host, llvm::ArrayRef<std::string> attentions,
    llvm::function_ref<mlir::FailureOr<std::string>(mlir::ElementsAttr)>
        writeConstant);

/// The elements of `attr` as the runtimes read tensors: row-major,
/// little-endian, one byte per i1.
mlir::FailureOr<std::vector<char>> constantBytes(mlir::ElementsAttr attr);

} // namespace flashlight

#endif // FLASHLIGHT_TARGET_MANIFEST_H
