//===- Passes.td - attn dialect passes --------------------*- tablegen -*-===//

#ifndef FLASHLIGHT_ATTN_PASSES
#define FLASHLIGHT_ATTN_PASSES

include "mlir/Pass/PassBase.td"

def AttnExplain : Pass<"attn-explain"> {
  let summary = "Report, as remarks, what each attn op computes and how";
  let description = [{
    Emits one remark per `attn.attention`, `attn.online_step` and
    `attn.online_finalize`, located at the op: the number of logit branches,
    the normalizer, GQA grouping, sinks and log-sum-exp outputs, and the
    result of the mask/score analysis (mask structure and its parameters, how
    each logit is modified, and how every captured tensor is indexed). It
    changes nothing; it is what `--flashlight-explain` prints.

    ```
    remark: attn.attention: 1 branch, softmax, heads 8/2, mask=causal(offset=0)
            score=[identity]
    ```
  }];
}

def AttnPlan : Pass<"attn-plan"> {
  let summary = "Decide once how each attention becomes a kernel: write its "
                "#attn.kernel_plan";
  let description = [{
    For every `attn.attention`, reads the program's facts (KernelFacts: head
    dims, element type, branches, lengths, the mask's structure, what the
    score region costs per element), the target chip (ArchInfo) and this
    pass's options, and writes the `attn.kernel_plan` attribute: the code
    generator, the tiles, warps and warpgroups, the KV loop's form, the
    block mask, the register budget. `attn-online-softmax` and `attn-tile`
    carry it to the tiled loop nest; `attn-to-gpu`, the manifest and
    `--flashlight-explain` read it and decide nothing again.

    Each rule is a named function of `Plan.cpp`; the measured reasons are
    in docs/decisions. Where the tensor-core generators cannot take a
    program (or a generator is not available), a remark says why and the
    plan falls back (wgmma to mma.sync, tensor cores to the reference
    generator). Options are overrides: `block-m`/`block-n`/`warp-rows` of 0
    leave the choice to the planner; the flags switch a feature off.
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_80\"",
           "Target chip (sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a)">,
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"true",
           "Use a tensor-core generator where the program fits (else the "
           "reference one)">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"true",
           "On sm_90a, use warpgroup MMA where the program fits (else "
           "mma.sync)">,
    Option<"blockM", "block-m", "int64_t", /*default=*/"0",
           "Query rows per block (0: the planner's choice)">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"0",
           "Keys per KV tile (0: the planner's choice)">,
    Option<"warpRows", "warp-rows", "int64_t", /*default=*/"0",
           "Query rows per warp of mma.sync, 16 or 32 (0: the planner's "
           "choice)">,
    Option<"blockMask", "block-mask", "bool", /*default=*/"true",
           "For masks no bound describes, a block-mask pre-kernel (else "
           "each block votes on its tiles)">,
    Option<"overlapSoftmax", "overlap-softmax", "bool", /*default=*/"true",
           "With wgmma, the software-pipelined KV loop where it applies">,
    Option<"decoupleWarpgroups", "decouple-warpgroups", "bool",
           /*default=*/"true",
           "With wgmma, mbarriers instead of a block-wide barrier per step">,
    Option<"producerWarpgroup", "producer-warpgroup", "bool",
           /*default=*/"true",
           "With wgmma's mbarrier loop, a warpgroup that copies K/V">,
    Option<"pingPong", "ping-pong", "bool", /*default=*/"true",
           "With the producer warpgroup, consumers take turns issuing their "
           "products">,
    Option<"branchLookahead", "branch-lookahead", "bool", /*default=*/"true",
           "With wgmma and several branches, issue the next branch's S "
           "before this branch's softmax">,
    Option<"staticStrides", "static-strides", "bool", /*default=*/"false",
           "Compile the contiguous strides in (callers must pass contiguous "
           "tensors) instead of reading them from the memref descriptors">,
    Option<"persistent", "persistent", "bool", /*default=*/"true",
           "A persistent grid (blocks loop over work tiles) where the plan "
           "picks one">,
    Option<"tma", "tma", "bool", /*default=*/"true",
           "The producer warpgroup copies with TMA (sm_90a) where its tiles "
           "allow">,
    Option<"bulkKeySide", "bulk-key-side", "bool", /*default=*/"true",
           "With wgmma, the key-side product's sums are added to its output "
           "by bulk tensor reductions (TMA) instead of atomic adds">,
    Option<"tileCounter", "tile-counter", "bool", /*default=*/"false",
           "A persistent grid whose blocks draw work tiles from a counter "
           "where a mask makes the query tiles' work differ (off: measured "
           "no faster than one work tile per block, docs/decisions/025)">,
  ];
}

def AttnOnlineSoftmax : Pass<"attn-online-softmax"> {
  let summary = "Rewrite attn.attention into its online-softmax form";
  let description = [{
    Replaces every `attn.attention` by the state it streams over the keys:
    initial states (running max `-inf`, running sum `0`, accumulator `0` per
    branch; accumulator only for `sigmoid` / `none`), one `attn.online_step`
    over all of K/V at offset 0, and `attn.online_finalize`, which divides by
    the running sum (adding the sink), yields 0 for fully masked rows, applies
    the epilogue and produces the log-sum-exp results. The score, mask and
    epilogue regions move unchanged, and the kernel plan to the finalize;
    `attn-tile` then splits the step into a loop over KV tiles.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def AttnTile : Pass<"attn-tile"> {
  let summary = "Tile the online form: parallel query tiles, a loop over KV "
                "tiles";
  let description = [{
    Rewrites each `attn.online_step` over whole tensors (offset 0, initial
    state) and its `attn.online_finalize` into:

    * an `scf.forall` over `(b, h, query tile)` -- the parallel grid, mapped
      to GPU blocks (z, y, x) and carrying the kernel plan
      (`attn.kernel_plan`);
    * inside it, an `scf.for` over KV tiles of `block-n` keys. Its bounds come
      from the mask analysis: for a query tile `[q0, q1]` and kept diagonals
      `lo <= q - kv <= hi`, only keys in `[q0 - hi, q1 - lo]` can be kept
      (prefix masks add `[0, P)`), so tiles outside are never visited;
    * per KV tile an `scf.if`: a tile that the analysis proves entirely kept
      for every row of the query tile runs an `attn.online_step` without the
      mask region; a partial tile runs it with the mask. Data-dependent and
      custom masks are always evaluated;
    * the finalize per query tile, inserted into the output.

    GQA is resolved here: query head `h` reads KV head `h / (Hq / Hkv)`.
    Tile sizes come from the finalize's kernel plan (`attn-plan`); without
    one, from the pass options, with a reference-generator plan.
  }];
  let options = [
    Option<"blockM", "block-m", "int64_t", /*default=*/"0",
           "Query rows per tile, for an attention without a kernel plan">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"0",
           "Keys per KV tile, for an attention without a kernel plan">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def AttnRaise : Pass<"attn-raise", "::mlir::func::FuncOp"> {
  let summary = "Find attention in linalg/tensor programs and rewrite it "
                "into attn.attention";
  let description = [{
    Works on the common input IR of the importers (linalg, tensor, arith and
    math on tensors). For each value the function returns, it builds the
    *element expression* of one output element: a scalar expression of
    symbolic indices in which layout operations (transposes, broadcasts,
    reshapes, slices, concatenations) are only index arithmetic, elementwise
    `linalg.generic`s contribute their bodies, and reductions bind a fresh
    index variable. Attention is then recognized algebraically, whatever
    spelling produced it:

    * `out = epilogue(sum_j P_r[j] * V[.., j, ..])` for one or more branches
      `r` sharing V (differential attention combines two);
    * `P = E / sum_j' E'` with `E = exp(S - m)` for any `m` that does not
      depend on `j` (so with or without the max subtraction), also written
      as `(sum_j E * V) / sum_j E`; or `P = 1 / (1 + exp(-S))` (sigmoid);
    * `S` contains one contraction `sum_c Q[.., c] * K[.., j, c]` (scale
      factors inside it go to `scale`); the rest of `S` is the score region,
      except that `select(keep, x, -inf)` (or a very negative constant) and
      `x + select(keep, 0, -inf)` at its top become the mask region;
    * squared distances beside it, `sum_p (A - B)^2` with A along the
      queries and B along the keys (IPA's point term; a sum over one or
      several dims), are folded in as `sum A^2 + sum B^2 - 2 sum A B`: the
      cross term widens Q and K by the points (Q's columns scaled by the
      logit's coefficient), the squares become captures built before the
      attention (the queries' one dropped under a softmax without sink);
    * index roles follow from the leaves: `j` and `c` are the reduction
      variables, `i` indexes Q but not K, `d` indexes V and the output; the
      batch-like variables shared by Q and K are `b` and `h` (in Q's dim
      order); K indexed by `h floordiv G` is GQA with `Hkv = Hq / G`;
    * dense integer constants equal to an iota become index expressions
      (JAX constant-folds `arange`).

    Arithmetic the regions inherit in f16/bf16 (a bf16 einsum's scores,
    scaled and soft-capped in bf16) is computed in f32 unless
    `keep-rounding` is set: the fused kernel keeps logits in f32 anyway, and
    the f32 result is closer to the program's exact value.

    Q, K, V and the output get layout copies (`linalg.generic`) between the
    user's layout and `[B, H, M|N, D]`; other tensors read by the score,
    mask or epilogue become captures. A value that is not attention is left
    as it is; with `explain`, a remark says which step failed and why.
  }];
  let options = [
    Option<"explain", "explain", "bool", /*default=*/"false",
           "Emit a remark per returned value: raised, or why not">,
    Option<"keepRounding", "keep-rounding", "bool", /*default=*/"false",
           "Keep the program's f16/bf16 roundings of intermediate logits "
           "(default: compute the regions in f32, as the fused kernel does)">,
  ];
  let dependentDialects = ["::flashlight::attn::AttnDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def AttnExpandEmptyRows : Pass<"attn-expand-empty-rows"> {
  let summary = "Give fully masked rows the mean of V where the program's "
                "finite mask fill does";
  let description = [{
    `attn-raise` marks an attention `mean_empty_rows` when its mask fills
    with a finite constant (`where(keep, s, finfo.min)`, HF's additive
    `where(mask, 0, finfo.min)`): there, a row whose keys are all masked is
    the softmax of equal logits, the mean of V, where the kernels give 0.
    This pass drops the attribute when the mask keeps a key in every row
    (no mask, causal from the top left, a band around the diagonal, a
    prefix); otherwise it makes the attention also return its LSE and
    selects `mean_j V[b, h/g, j, d]` (a reduction over the keys, before
    the kernel) where the LSE is `-inf`:

    ```mlir
    %o:2 = attn.attention ... -> tensor<2x4x128x64xbf16>, tensor<2x4x128xf32>
    %mean = linalg.generic ... // sum_j V / N, [B, Hkv, Dv] f32
    %out = linalg.generic ins(%o#0, %o#1, %mean ...) // lse == -inf ? mean : o
    ```

    Code generation refuses an attention still marked `mean_empty_rows`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def AttnGradient : Pass<"attn-gradient", "::mlir::ModuleOp"> {
  let summary = "Replace a program by the gradient program of its attention";
  let description = [{
    For the module's one `attn.attention` (softmax, sigmoid or none; any
    number of logit branches whose scores each read their own logit;
    sinks; an epilogue; any score and mask region whose score and epilogue
    ops have derivatives; GQA), builds `@gradient(queries..., keys..., v,
    sinks..., captures..., dO) -> (dqueries..., dkeys..., dV, dsinks...)`
    and erases the rest of the module. Each branch gets its own gradient
    attentions (its forward again alone; dO through the epilogue's
    derivative with respect to its output); the shared V's add up. The gradients are attentions the code generators
    already take (normalizer `none`): dQ attends from Q to K with two logit
    branches, S and dP = dO V^T, its score region computing
    dS = score'(s) * P * (dP - Delta); dK and dV attend from the keys to the
    queries (seen as `[B, Hkv, g M, D]`), with Q and dO as values. The
    forward's score region is differentiated by the chain rule over its
    arith and math ops; its mask and indices are mapped. Softmax recomputes
    the forward for its output and log-sum-exp, and
    `Delta = rowsum(dO * O)` is a reduction before the kernels. An
    epilogue's derivative (with respect to the attention's own output,
    recomputed) scales dO element by element first; a sink's gradient is
    `-sum exp(sink - L) Delta`, a reduction.

    With `saved-statistics`, the function takes after dO what the forward
    already computed instead of computing it again: per branch, its own
    output (before the epilogue; needed for softmax and epilogues) and,
    for softmax, its log-sum-exp (f32 `[B, Hq, M]`). A caller that merges
    partial attentions (ring attention) passes the merged output and
    log-sum-exp, and gets the partial attention's share of the gradient
    of the whole.

    Refused, at the attention, with the reason: a branch's score that reads
    another branch's logit, runtime shapes, rows that take the mean of V,
    and a score or epilogue op without a derivative rule. Captured tensors
    are inputs only, except those the epilogue alone reads at its own
    indices (gates, lambda) and, with `score-captures`, those the score
    region reads once (a pair bias `[B, H, N, N]`, a per-head slope, a
    relative-position table at the bucket it computes): their gradient is
    the sum of dS * d score / d element over the elements that read each
    entry. With `capture-terms`, the dQ attention yields it as terms: per
    element for a read at q_idx and kv_idx (a pair bias, `[B, Hq, M, N]`
    f32), as row sums for a read without kv_idx (slopes, `[B, Hq, M]`);
    otherwise (a table's computed bucket) S and dP are materialized
    (`[B, Hq, M, N]` f32 each) on the reference path.

    With GQA, dK and dV attend from the keys to the query rows of their
    group, side by side along the rows; where the mask reads positions and
    the lengths reach `per-head-key-value-from`, per query head instead (K
    and V repeated, the gradients summed over each group), so that a
    causal bound stays a bound.

    ```mlir
    func.func @gradient(%q: ..., %k: ..., %v: ..., %dout: ...) -> (...) {
      %o, %lse = attn.attention q(%q ...) k(%k ...) v(%v ...) ...
      %delta = linalg.generic ... // rowsum(dO * O)
      %dq = attn.attention q(%q, %dout ...) k(%k, %v ...) v(%k ...)
              captures(%lse, %delta ...) normalizer none score {...}
              epilogue {...}
      ...
    ```
  }];
  let options = [
    Option<"savedStatistics", "saved-statistics", "bool", /*default=*/"false",
           "Take each branch's output and log-sum-exp as arguments after "
           "dO instead of recomputing the forward">,
    Option<"scoreCaptures", "score-captures", "bool", /*default=*/"false",
           "Also differentiate the captures the score region reads once: "
           "those it reads at q_idx and kv_idx (pair biases) as terms of "
           "the dQ attention, the others by materializing S and dP "
           "([B, Hq, M, N] f32)">,
    Option<"captureTerms", "capture-terms", "bool", /*default=*/"true",
           "With score-captures: pair biases' and slopes' gradients as terms "
           "of the dQ attention; false: from S and dP materialized, as "
           "tables'">,
    Option<"fuseKeyValue", "fuse-key-value", "bool", /*default=*/"true",
           "dK and dV in one attention (value_columns) where the head dims "
           "allow; false: two attentions, each computing S and P">,
    Option<"fuseKeyValueFrom", "fuse-key-value-from", "int64_t",
           /*default=*/"2048",
           "With fuse-key-value: only where the query and key lengths are "
           "both at least this (below, the loop is too short for the fused "
           "kernel's wider accumulators and its [Q | dO] copy)">,
    Option<"perHeadKeyValueFrom", "per-head-key-value-from", "int64_t",
           /*default=*/"4096",
           "With GQA and a mask that reads positions: dK and dV per query "
           "head (K and V repeated, the gradients summed over each group) "
           "where the query and key lengths are both at least this; below, "
           "along grouped rows under a block mask">,
    Option<"fuseQuery", "fuse-query", "bool", /*default=*/"false",
           "Where dK and dV are one attention: dQ from its key-side product "
           "(FlashAttention's backward: S and dP once for all three, dQ "
           "accumulated across blocks) instead of an attention of its own">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def AttnReturnLse : Pass<"attn-return-lse", "::mlir::ModuleOp"> {
  let summary = "Return the log-sum-exp of a program's attention too";
  let description = [{
    For a training forward: adds the log-sum-exp of the module's one
    `attn.attention` (softmax, one branch, no epilogue) to its results and
    appends it to the results of the function holding it, marked
    `attn.lse_result` (the manifest entry's `lse_result`). The backward
    then runs the gradient program with saved statistics
    (`attn-gradient{saved-statistics}`) on the program's output and this
    log-sum-exp instead of computing the forward again.

    Refused, at the attention, with the reason: another normalizer, several
    branches or an epilogue (the backward would need each branch's own
    output), rows that take the mean of V.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def AttnOutline : Pass<"attn-outline", "::mlir::ModuleOp"> {
  let summary = "Move each attn.attention of a larger program into a kernel "
                "function of its own";
  let description = [{
    Code generation turns a function that is exactly one attention (its
    arguments are the attention's operands, its results the attention's
    results) into one GPU kernel. A raised program is more than that: layout
    copies between the user's tensors and `[B, H, M, D]` surround the
    attention. For every `attn.attention` in a function that holds anything
    else, this pass creates `@<function>_attention<k>` holding the attention
    alone (marked `attn.kernel`), and replaces the attention by a
    `func.call` to it. The calling function keeps the rest (the runtime
    performs its layout copies; see `flashlight-compile`'s manifest `entry`).
    Attentions that compute the same thing (the same attributes, types and
    regions: the copies of an unrolled sub-batch loop) call one kernel.

    ```mlir
    %q = linalg.generic ... ins(%arg0 : tensor<2x128x4x64xbf16>) ...
    %o = func.call @main_attention0(%q, %k, %v) : (...) -> tensor<2x4x128x64xbf16>
    ```

    With `all`, functions that are one attention already are outlined too,
    so every imported program has the same shape: the user's function
    calling its kernel.
  }];
  let options = [
    Option<"all", "all", "bool", /*default=*/"false",
           "Outline every attention, also from kernel-shaped functions">,
  ];
}

def AttnSpecialize : Pass<"attn-specialize", "::mlir::func::FuncOp"> {
  let summary = "Re-shape an attention program's function to new sizes";
  let description = [{
    Rewrites the signature of a function holding one `attn.attention` whose
    tensors are function arguments and results, so the same program runs at
    other sizes or element types: batch `B`, query / key-value heads, query /
    key lengths, head dim (Dqk and Dv alike) and the Q/K/V/output element
    type. Captured tensors follow the mask/score analysis: a dimension indexed
    by `b`, `h`, `q`, `kv` or `d` takes the new size of that role; one indexed
    by a constant, an affine form or a computed value keeps its size. A
    dimension read by both `q` and `kv` (document ids) needs equal lengths.
    Options left at -1 (or empty) keep their size. Used by the GPU check to
    run every example over a matrix of shapes.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", "-1", "Batch size B">,
    Option<"qHeads", "q-heads", "int64_t", "-1", "Query heads Hq">,
    Option<"kvHeads", "kv-heads", "int64_t", "-1", "Key/value heads Hkv">,
    Option<"qLen", "q-len", "int64_t", "-1", "Query length M">,
    Option<"kvLen", "kv-len", "int64_t", "-1", "Key/value length N">,
    Option<"headDim", "head-dim", "int64_t", "-1", "Head dim (Dqk and Dv)">,
    Option<"elementType", "dtype", "std::string", "\"\"",
           "Q/K/V/output element type: f16, bf16 or f32">,
  ];
}

#endif // FLASHLIGHT_ATTN_PASSES
