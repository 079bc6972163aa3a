//===- AttnAttrs.td - attn dialect attributes -------------*- tablegen -*-===//

#ifndef FLASHLIGHT_ATTN_ATTRS
#define FLASHLIGHT_ATTN_ATTRS

include "Attn/AttnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Attn_NormalizerSoftmax : I32EnumAttrCase<"softmax", 0>;
def Attn_NormalizerSigmoid : I32EnumAttrCase<"sigmoid", 1>;
def Attn_NormalizerNone : I32EnumAttrCase<"none", 2>;

def Attn_Normalizer : I32EnumAttr<"Normalizer",
    "how scores become probabilities",
    [Attn_NormalizerSoftmax, Attn_NormalizerSigmoid, Attn_NormalizerNone]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::flashlight::attn";
}

def Attn_NormalizerAttr : EnumAttr<Attn_Dialect, Attn_Normalizer,
                                   "normalizer"> {
  let summary = "Normalizer of the scores: softmax (over kv), sigmoid or none";
  let assemblyFormat = "$value";
}


//===----------------------------------------------------------------------===//
// Kernel plan
//===----------------------------------------------------------------------===//

def Attn_GeneratorReference : I32EnumAttrCase<"reference", 0>;
def Attn_GeneratorMmaSync : I32EnumAttrCase<"mma_sync", 1>;
def Attn_GeneratorWgmma : I32EnumAttrCase<"wgmma", 2>;

def Attn_Generator : I32EnumAttr<"Generator",
    "the code generator a kernel is emitted by",
    [Attn_GeneratorReference, Attn_GeneratorMmaSync, Attn_GeneratorWgmma]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::flashlight::attn";
}

def Attn_LoopBarrier : I32EnumAttrCase<"barrier", 0>;
def Attn_LoopPipelined : I32EnumAttrCase<"pipelined", 1>;
def Attn_LoopMbarrier : I32EnumAttrCase<"mbarrier", 2>;

def Attn_LoopForm : I32EnumAttr<"LoopForm",
    "how the KV loop's steps are synchronized and overlapped",
    [Attn_LoopBarrier, Attn_LoopPipelined, Attn_LoopMbarrier]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::flashlight::attn";
}

def Attn_SparsityNone : I32EnumAttrCase<"none", 0>;
def Attn_SparsityTileVote : I32EnumAttrCase<"tile_vote", 1>;
def Attn_SparsityBlockMask : I32EnumAttrCase<"block_mask", 2>;

def Attn_Sparsity : I32EnumAttr<"Sparsity",
    "how a kernel skips KV tiles that a mask no bound describes empties",
    [Attn_SparsityNone, Attn_SparsityTileVote, Attn_SparsityBlockMask]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::flashlight::attn";
}

/// A flag of the kernel plan, printed `true` / `false`.
def Attn_PlanFlag : AttrOrTypeParameter<"bool", "a flag"> {
  let parser = [{ [&]() -> ::mlir::FailureOr<bool> {
    if (::mlir::succeeded($_parser.parseOptionalKeyword("true")))
      return true;
    if (::mlir::succeeded($_parser.parseOptionalKeyword("false")))
      return false;
    return $_parser.emitError($_parser.getCurrentLocation(),
                              "expected 'true' or 'false'");
  }() }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}

/// A flag of the kernel plan that is false unless written.
def Attn_OptionalPlanFlag : AttrOrTypeParameter<"bool", "a flag"> {
  let parser = Attn_PlanFlag.parser;
  let printer = Attn_PlanFlag.printer;
  let defaultValue = "false";
}

def Attn_KernelPlanAttr : AttrDef<Attn_Dialect, "KernelPlan"> {
  let mnemonic = "kernel_plan";
  let summary = "How one attention becomes a kernel, decided once";
  let description = [{
    Written by `attn-plan` on each `attn.attention` from the program's facts
    (KernelFacts), the target chip and the pass's overrides; carried by
    `attn-online-softmax` and `attn-tile` to the tiled loop nest, read by
    `attn-to-gpu`, the manifest and `--flashlight-explain`. Nothing
    downstream decides any of these again.

    * `generator`: `reference` (a warp per query row), `mma_sync` or `wgmma`.
    * `block_m` x `block_n`: query rows per block, keys per KV tile.
    * `warp_rows`: query rows per warp (reference 1; mma.sync 16 or 32;
      wgmma 16, four warps per 64-row warpgroup).
    * `consumer_groups`: wgmma's computing warpgroups (block_m / 64).
    * `producer`: a further warpgroup that only copies K/V tiles.
    * `loop`: `barrier` (a block-wide barrier per step), `pipelined`
      (S_t issued before the P V of tile t - 1) or `mbarrier` (buffer
      full/empty mbarriers, warpgroups decoupled).
    * `ping_pong`: consumers take turns issuing their products.
    * `lookahead`: with several logit branches, the next branch's S is
      issued before this branch's softmax.
    * `sparsity`: for a mask no bound describes, `tile_vote` (each block
      evaluates the mask on a whole tile first and skips it if nothing is
      kept) or `block_mask` (a pre-kernel classifies every (query tile, KV
      tile) pair once per call); `none` where bounds describe the mask.
    * `query_in_smem`: Q is read from shared memory each step.
    * `staged_reads`: how many of the score region's tile-shaped reads
      wgmma copies with each K tile (the rest are gathered).
    * `shared_memory`: the dynamic shared memory the kernel requests, in
      bytes: its staging tiles, mbarriers, relative-position tables and
      staged reads as laid out (attn-to-gpu checks its layout against it).
    * `min_blocks`: the blocks per SM ptxas budgets registers for (0: no
      bound).
    * `producer_registers`, `consumer_registers`: setmaxnreg's split with a
      producer (0 without).
    * `runtime_strides`: the kernel's tensors take their strides from the
      memref descriptors (the innermost one 1), so any layout whose last
      dim is contiguous reaches the kernel without a copy; without it the
      strides are the contiguous ones, compiled in.
    * `aligned_lengths`: the kernel takes runtime lengths that its caller
      guarantees are multiples of the tiles (`block_m` for queries,
      `block_n` for keys): every tile is whole, so no copy or key is
      bounds-tested. Set where the attention carries
      `attn.aligned_lengths`; printed only when true.
    * `persistent`: a grid of about one block per SM, each looping over
      work tiles (batch, head, query tile), the producer warpgroup copying
      the next work tile's K/V while the consumers finish the last one;
      printed only when true.
    * `query_ahead`: in a persistent kernel, the producer also copies each
      work tile's Q, into one of two buffers, so that the next work tile's
      Q lands while the consumers finish the last one; printed only when
      true.
    * `tma`: the producer warpgroup copies its tiles with the Tensor Memory
      Accelerator (`cp.async.bulk.tensor`, one thread issuing a tile's
      copies, which complete on the tile's full mbarrier), through a tensor
      map per copied tensor that the launcher encodes and passes after the
      other parameters; printed only when true.
    * `bulk_key_side`: the key-side product's sums reach the `key_side`
      output as bulk tensor reductions (`cp.reduce.async.bulk.tensor` add,
      one thread per consumer warpgroup issuing them from a swizzled f32
      staging tile, through a tensor map of the output) instead of
      per-thread atomic adds; printed only when true.
    * `tile_counter`: in a persistent kernel, blocks draw their work tiles
      from a counter in global memory (a kernel parameter after the other
      buffers: two 32-bit words, zero at launch and left zero by the
      block that finishes last) in the order a one-tile grid's blocks
      start in, longest first where a mask makes query tiles' work differ;
      the producer tells the consumers each tile through a slot beside Q's
      buffer; printed only when true.
  }];
  let parameters = (ins
    EnumParameter<Attn_Generator>:$generator,
    "int64_t":$block_m,
    "int64_t":$block_n,
    "int64_t":$warp_rows,
    "int64_t":$consumer_groups,
    Attn_PlanFlag:$producer,
    EnumParameter<Attn_LoopForm>:$loop,
    Attn_PlanFlag:$ping_pong,
    Attn_PlanFlag:$lookahead,
    EnumParameter<Attn_Sparsity>:$sparsity,
    Attn_PlanFlag:$query_in_smem,
    "int64_t":$staged_reads,
    "int64_t":$shared_memory,
    "int64_t":$min_blocks,
    "int64_t":$producer_registers,
    "int64_t":$consumer_registers,
    Attn_PlanFlag:$runtime_strides,
    Attn_OptionalPlanFlag:$aligned_lengths,
    Attn_OptionalPlanFlag:$persistent,
    Attn_OptionalPlanFlag:$query_ahead,
    Attn_OptionalPlanFlag:$tma,
    Attn_OptionalPlanFlag:$bulk_key_side,
    Attn_OptionalPlanFlag:$tile_counter
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// Threads per block: a warp per `warp_rows` query rows, four warps per
    /// wgmma warpgroup, plus the producer warpgroup.
    int64_t getThreads() const;
    /// Whether a block-mask pre-kernel classifies the tiles.
    bool hasBlockMask() const {
      return getSparsity() == Sparsity::block_mask;
    }
    /// Whether a tensor-core generator emits the kernel.
    bool usesTensorCores() const {
      return getGenerator() != Generator::reference;
    }
    /// The plan of the reference generator on `blockM` x `blockN` tiles.
    static KernelPlanAttr getReference(::mlir::MLIRContext *context,
                                       int64_t blockM, int64_t blockN,
                                       bool runtimeStrides);
  }];
}

#endif // FLASHLIGHT_ATTN_ATTRS
