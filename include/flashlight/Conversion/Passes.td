//===- Passes.td - Flashlight conversion passes -----------*- tablegen -*-===//

#ifndef FLASHLIGHT_CONVERSION_PASSES
#define FLASHLIGHT_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def AttnToGPU : Pass<"attn-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Generate one GPU kernel per tiled attention (reference path)";
  let description = [{
    Turns each tiled attention (the `scf.forall` that `attn-tile` produces,
    returned by its function) into a `gpu.func` kernel in a `gpu.module`,
    and removes the host function. This is the reference code generator: no
    tensor cores, correct for every program the dialect expresses.

    Mapping. The forall's `(b, h, query tile)` become block ids `(z, y, x)`;
    a block has `attn.block_m` warps and warp `w` owns query row `q0 + w`.
    Lane `l` owns the head-dim columns `l, l + 32, ...`: it keeps those
    columns of Q in registers (loaded once per tile) and of each branch's
    accumulator; a logit is a warp-wide sum (butterfly shuffles), so every
    lane holds every logit and the running max / sum.

    The KV loop, its bounds and the full/partial-tile `scf.if` are kept as
    they are; each `attn.online_step` becomes a loop over the tile's keys
    that inlines the score and mask regions (captured tensors are read from
    global memory), and `attn.online_finalize` divides by the sum (with the
    sink), inlines the epilogue and stores the output and LSE rows.

    With `tensor-cores`, programs that fit use the tensor-core generator
    instead (FlashAttention-2 style: 16 query rows per warp, mma.sync
    m16n8k16 for Q K^T and P V, K/V tiles staged in shared memory, P kept in
    registers as the A operand of P V).

    Kernel parameters, in order: the function's arguments, then its results,
    each a memref of the same shape (dynamic dims allowed). The kernel gets
    `flashlight.kernel` attributes (block size, block_m, parameter roles)
    that `flashlight-compile` turns into the manifest.
  }];
  let options = [
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"false",
           "Use the mma.sync code generator where the program fits (one "
           "branch, f16/bf16, head dims multiples of 16 up to 128, "
           "block-m = block-n = 64); otherwise, and with a remark saying "
           "why, the reference one">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect",
                           "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FLASHLIGHT_CONVERSION_PASSES
