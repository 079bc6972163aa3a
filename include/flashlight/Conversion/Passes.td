//===- Passes.td - Flashlight conversion passes -----------*- tablegen -*-===//

#ifndef FLASHLIGHT_CONVERSION_PASSES
#define FLASHLIGHT_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def AttnToGPU : Pass<"attn-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Generate one GPU kernel per tiled attention, as its kernel "
                "plan says";
  let description = [{
    Turns each tiled attention (the `scf.forall` that `attn-tile` produces,
    returned by its function, carrying its `#attn.kernel_plan`) into a
    `gpu.func` kernel in a `gpu.module`, and removes the host function. The
    plan (`attn-plan`) names the code generator and everything it varies;
    this pass decides nothing again. Its stages: check the plan against the
    loop nest, the parameters, the kernel and its launch attributes, the
    shared-memory layout, the code generator's emitter, the body, the
    block-mask pre-kernel.

    Reference generator (no tensor cores, correct for every program the
    dialect expresses). The forall's `(b, h, query tile)` become block ids
    `(z, y, x)`; a block has `block_m` warps and warp `w` owns query row
    `q0 + w`.
    Lane `l` owns the head-dim columns `l, l + 32, ...`: it keeps those
    columns of Q in registers (loaded once per tile) and of each branch's
    accumulator; a logit is a warp-wide sum (butterfly shuffles), so every
    lane holds every logit and the running max / sum.

    The KV loop, its bounds and the full/partial-tile `scf.if` are kept as
    they are; each `attn.online_step` becomes a loop over the tile's keys
    that inlines the score and mask regions (captured tensors are read from
    global memory), and `attn.online_finalize` divides by the sum (with the
    sink), inlines the epilogue and stores the output and LSE rows.

    With a `mma_sync` plan, the tensor-core generator instead
    (FlashAttention-2 style: 16 or 32 query rows per warp, mma.sync
    m16n8k16 for Q K^T and P V, K/V tiles staged in dynamic shared memory, P
    kept in registers as the A operand of P V). With `wgmma` (sm_90a), the
    same structure with both products on warpgroup MMA: one warpgroup per 64
    query rows, Q/K/V tiles in core-matrix order, P V with P in registers.

    Block mask. Where the plan says `block_mask` (a mask no bound
    describes: it reads captured data, or matches no known shape), a second
    kernel, `<name>_block_mask`, is
    generated from the same tiled loop nest: one block per (query tile, KV
    tile) in the loop's range evaluates the mask region on the tile and
    writes one byte (0 empty, 1 partial, 2 full) into a trailing `i8`
    parameter `[B', H', M tiles, N tiles]` (B', H' are 1 when the region
    does not read `b`, `h`). The attention kernel takes the same buffer as
    its last parameter: it skips empty tiles and evaluates the mask only on
    partial ones. Both kernels record it in `flashlight.block_mask`.

    Kernel parameters, in order: the function's arguments, then its results,
    each a memref of the same shape (dynamic dims allowed). The kernel keeps
    its `attn.kernel_plan` and gets its block size and dynamic shared memory,
    which `flashlight-compile` turns into the manifest.
  }];
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

def TensorMapParams : Pass<"flashlight-tensor-map-params",
                           "::mlir::gpu::GPUModuleOp"> {
  let summary = "Pass a kernel's TMA tensor maps by value, as grid constants";
  let description = [{
    Runs after `convert-gpu-to-nvvm`. A kernel whose `gpu.func` took TMA
    tensor maps (`attn-to-gpu` with a `tma` plan) lists them in
    `flashlight.tensor_maps`, and they are its last parameters, each an
    `!llvm.ptr`. The GPU-to-LLVM lowering drops argument attributes, so
    this pass marks those parameters of the `llvm.func` kernel `llvm.byval`
    of 128 bytes, 64-byte aligned and `nvvm.grid_constant`: the launcher
    passes the 128-byte map itself, PTX declares it
    `.param .align 64 .b8 [128]`, and the copies address it in the
    parameter space (`cvta.param`), with no copy to local memory.
  }];
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

def HostFuse : Pass<"flashlight-host-fuse", "::mlir::ModuleOp"> {
  let summary = "Fuse the reference path's elementwise chains, so that each "
                "becomes one kernel";
  let description = [{
    On the functions without `attn` operations (what
    `flashlight-host-to-gpu` turns into one kernel per generic), fuses an
    elementwise `linalg.generic` (parallel loops only) into the elementwise
    generic that consumes it when the consumer is its only user: a chain
    such as RoPE's `x * cos + rotate(x) * sin` or a norm's scaling becomes
    one generic, and so one kernel, instead of a kernel and a tensor per
    step. Reductions (matmuls, norms' sums) are neither fused into nor
    absorbed: they keep their own kernels.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def HostSplitReductions
    : Pass<"flashlight-host-split-reductions", "::mlir::ModuleOp"> {
  let summary = "Split the reference path's reductions with few results and "
                "long loops into a parallel partial reduction and a final one";
  let description = [{
    `flashlight-host-to-gpu` runs a reduction generic with one thread (or
    one warp) per result. Where a reduction has few results and long loops
    -- the gradient of a learned table or of per-head slopes, summed over
    batch, query and key (`[H, T]` results from `B * M * N` terms each) --
    that leaves the GPU almost idle: the T5 table's gradient took 2.7 s at
    B * N = 16k. On the functions without `attn` operations, a generic with
    one result whose accumulator combines associatively (add, mul, max,
    min: an order-free reduction) and with fewer than `min-points`
    results and at least `min-iterations` terms per result becomes two:
    the first keeps the body and turns its outer reduction loops parallel
    (at most `max-partial` partial results; the innermost reduction loop
    stays), the second combines the partials into the original initial
    value. Repeated until no generic qualifies.
  }];
  let options = [
    Option<"minPoints", "min-points", "int64_t", /*default=*/"65536",
           "Split reductions with fewer results than this">,
    Option<"minIterations", "min-iterations", "int64_t", /*default=*/"4096",
           "... and at least this many terms per result">,
    Option<"maxPartial", "max-partial", "int64_t", /*default=*/"67108864",
           "At most this many partial results (f32) from one split">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // FLASHLIGHT_CONVERSION_PASSES
