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
    instead (FlashAttention-2 style: 16 or 32 query rows per warp, mma.sync
    m16n8k16 for Q K^T and P V, K/V tiles staged in dynamic shared memory, P
    kept in registers as the A operand of P V). With `wgmma` (sm_90a), the
    same structure with both products on warpgroup MMA: one warpgroup per 64
    query rows, Q/K/V tiles in core-matrix order, P V with P in registers.

    Block mask. For a mask no bound describes (it reads captured data, or
    matches no known shape), a second kernel, `<name>_block_mask`, is
    generated from the same tiled loop nest: one block per (query tile, KV
    tile) in the loop's range evaluates the mask region on the tile and
    writes one byte (0 empty, 1 partial, 2 full) into a trailing `i8`
    parameter `[B', H', M tiles, N tiles]` (B', H' are 1 when the region
    does not read `b`, `h`). The attention kernel takes the same buffer as
    its last parameter: it skips empty tiles and evaluates the mask only on
    partial ones. Both kernels record it in `flashlight.block_mask`.

    Kernel parameters, in order: the function's arguments, then its results,
    each a memref of the same shape (dynamic dims allowed). The kernel gets
    `flashlight.kernel` attributes (block size, block_m, parameter roles)
    that `flashlight-compile` turns into the manifest.
  }];
  let options = [
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"false",
           "Use the mma.sync code generator where the program fits (one "
           "branch, f16/bf16, head dims multiples of 16 up to 128, block-m "
           "64, 128 or 256, block-n 32, 64 or 128); otherwise, and with a remark "
           "saying why, the reference one">,
    Option<"warpRows", "warp-rows", "int64_t", /*default=*/"0",
           "Query rows per warp of the tensor-core generator: 16 or 32 (one "
           "or two m16 tiles); 0 picks 32 for block-m >= 128, else 16">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "With tensor-cores, use Hopper's warpgroup MMA (sm_90a only) for "
           "block-m 64 or 128 and head dims 64 or 128 (else mma.sync, with a "
           "remark): one warpgroup per 64 query rows">,
    Option<"blockMask", "block-mask", "bool", /*default=*/"true",
           "With tensor-cores, for masks whose kept tiles no bound describes "
           "(data-dependent ones): emit a block-mask pre-kernel that "
           "classifies every (query tile, KV tile) once per call as empty, "
           "partial or full, and have the attention kernel read it (else each "
           "block votes on every tile of its range)">,
    Option<"overlapSoftmax", "overlap-softmax", "bool", /*default=*/"true",
           "With wgmma, software-pipeline the KV loop: each step issues "
           "S_t = Q K_t^T and then the P V of tile t - 1, and computes "
           "softmax_t while that P V runs (programs with a tile vote or "
           "block mask keep the plain loop)">,
    Option<"decoupleWarpgroups", "decouple-warpgroups", "bool",
           /*default=*/"true",
           "With wgmma, two warpgroups on the plain KV loop: mbarriers "
           "say when a K/V buffer is full and empty, instead of a "
           "block-wide barrier per step">,
    Option<"producerWarpgroup", "producer-warpgroup", "bool",
           /*default=*/"true",
           "With wgmma and two warpgroups on the mbarrier loop (block-m 128, "
           "no block mask): a third warpgroup copies every K/V tile "
           "(cp.async; K and V on mbarriers of their own), so that the "
           "consumers issue no copies; registers move from it to them "
           "(setmaxnreg)">,
    Option<"pingPong", "ping-pong", "bool", /*default=*/"true",
           "With producer-warpgroup: the two consumer warpgroups take turns "
           "issuing P_t V_t and S_{t+1} = Q K_{t+1}^T back to back (named "
           "barriers), so that one's softmax overlaps the other's products "
           "(+0-11 % on an H100, docs/benchmarks)">,
    Option<"branchLookahead", "branch-lookahead", "bool", /*default=*/"true",
           "With wgmma and several logit branches run one after the other: "
           "issue the next branch's S = Q K^T before this branch's softmax, "
           "and leave this branch's P V in flight behind it">,
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

def HostToGPU : Pass<"flashlight-host-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Compile what is not attention into simple GPU kernels "
                "(the reference path)";
  let description = [{
    For every function without `attn` operations (the user's function after
    `attn-outline`, or a program with no attention at all), each
    `linalg.generic` on tensors becomes a `gpu.func` in the `gpu.module`
    `@flashlight_host`: one thread per point of the parallel loops (256
    threads per block), the reduction loops sequential in the thread
    (`scf.for` carrying the accumulators), the body inlined with its inputs
    loaded through their indexing maps. Correct for any static generic;
    not fast.

    Before that, so that every computation is a generic: named linalg ops
    are generalized, `tensor.extract_slice` becomes a generic reading
    through an offset/stride map, and `tensor.concat` a generic selecting
    the part each index falls in.

    Each generic keeps its place in the function and gets
    `flashlight.kernel` (the kernel's name), `flashlight.grid` and
    `flashlight.block`; `flashlight-compile` writes the function as the
    manifest entry's steps. Kernel parameters, in order: the generic's
    inputs, its `outs` (the initial values), its results, then the tensors
    its body reads (`tensor.extract`), each a memref descriptor. Anything
    else -- dynamic shapes, an operation that is neither a generic, a
    reshape, a constant, an empty tensor nor a call -- is an error located
    at the operation.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // FLASHLIGHT_CONVERSION_PASSES
