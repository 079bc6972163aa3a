//===- AttnOps.td - attn dialect operations ---------------*- tablegen -*-===//

#ifndef FLASHLIGHT_ATTN_OPS
#define FLASHLIGHT_ATTN_OPS

include "Attn/AttnDialect.td"
include "Attn/AttnAttrs.td"
include "Attn/AttnInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ParallelCombiningOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits>;

def Attn_InputTensor : RankedTensorOf<[F16, BF16, F32]>;
def Attn_F32Tensor : RankedTensorOf<[F32]>;

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

def Attn_AttentionOp : Attn_Op<"attention", [
    AttrSizedOperandSegments, AttrSizedResultSegments, IsolatedFromAbove,
    RecursiveMemoryEffects,
    Attn_ScoreProgramOpInterface,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>
    ]> {
  let summary = "An attention program: branches of scores, a normalizer, PV";
  let description = [{
    Computes, for every batch `b`, query head `h`, query row `i` and output
    column `d` (with `g = Hq / Hkv` query heads per KV head):

    ```
    s_r[j]  = scale_r * sum_c Q_r[b,h,i,c] * K_r[b,h/g,j,c]   (r = branch)
    s'      = score(s_0[j], ..., s_{R-1}[j], b, h, i, j, captures...)
    keep[j] = mask(b, h, i, j, captures...)
    p_r[j]  = keep[j] ? normalize(s'_r)[j] : 0
    o_r     = sum_j p_r[j] * V[b,h/g,j,d]
    out     = epilogue(o_0, ..., o_{R-1}, b, h, i, d, captures...)
    ```

    * `q`, `k`: one query and one key tensor per logit branch, `[B,Hq,M,Dqk]`
      and `[B,Hkv,N,Dqk]`; `Hq` must be a multiple of `Hkv` (GQA/MQA).
      `Dqk` may differ between branches and from `Dv`.
    * `v`: `[B,Hkv,N,Dv]`, shared by all branches (loaded once per KV tile).
    * `scale`: one multiplier per branch, applied to `Q.K^T` before `score`.
    * `normalizer`: `softmax` normalizes over the unmasked `j` (a row with no
      unmasked key yields 0); `sigmoid` applies `1/(1+exp(-s))` elementwise;
      `none` uses the scores as they are.
    * `sinks` (softmax only): one `[Hq]` tensor per branch; each adds
      `exp(sink[h])` to its softmax denominator, as if a key with that logit
      and a zero value were present.
    * `captures`: ranked tensors (of any rank, rank 0 included) read by the
      regions with `tensor.extract`: bias tables, document ids, slopes, gates.
    * `score` (optional, identity when absent): block arguments
      `(s_0: f32, ..., s_{R-1}: f32, b: index, h: index, q_idx: index,
      kv_idx: index, captures...)`, yields R `f32` logits.
    * `mask` (optional, all-true when absent): block arguments
      `(b, h, q_idx, kv_idx: index, captures...)`, yields one `i1` that
      applies to every branch. A masked key contributes nothing.
    * `epilogue` (optional for one branch, required for several): block
      arguments `(o_0: f32, ..., o_{R-1}: f32, b, h, q_idx, d: index,
      captures...)`, yields the `f32` output element. It combines branches
      (differential attention) and applies gates.
    * `value_columns` (optional, one width per branch, summing to `Dv`):
      branch `r` takes its own block of V's columns (the blocks in branch
      order) and writes the same block of the output,
      `out[..., c_r + d] = o_r[d]` with `o_r = sum_j p_r[j] * V[..., c_r + d]`
      -- several attentions that share their logits' work but weigh
      different values (the backward's dK and dV: weights dS and P, values
      Q and dO side by side). No epilogue then: each branch writes its own
      columns.
    * `key_side` (optional, normalizer `none` or `sigmoid`): branch `r`'s
      weights, transposed, times its queries, one row per key:
      `key_side[b,h/g,j,c] = sum over the g heads of the group and i of
      p_r[b,h,i,j] * Q_r[b,h,i,c]` (`[B,Hkv,N,Dqk_r]`, f32). With the
      weights the gradient's dS (rows are keys, columns queries), this is
      the gradient of the queries, computed from the same weights as the
      keys' (FlashAttention's backward structure). Every row adds to every
      key's row, so a code generator accumulates it across blocks
      (atomically); the weights must be final per element, hence no
      softmax.
    * `term_dims` (optional): sums of per-element terms the score region
      yields after its R logits, one tensor per term. Term `e` keeps the
      dims its entry lists (a subset of `0` = b, `1` = h, `2` = q_idx,
      `3` = kv_idx, in order) and sums over the others, masked elements
      adding nothing:
      `term_e[kept dims of (b,h,i,j)] = sum over the rest of
      keep[b,h,i,j] ? y_{R+e}(b,h,i,j) : 0` (f32, extents those of B, Hq,
      M, N). The backward's gradients of captures the score reads (a pair
      bias `[B,H,M,N]`: every dim; ALiBi slopes: the head) come out of the
      attention that computes dS, without materializing it.
    * `mean_empty_rows` (softmax without sinks): a row whose keys are all
      masked yields the mean of V over all keys instead of 0. This is what a
      program computes when its mask fills with a finite constant
      (`where(keep, s, finfo.min)`): the softmax of equal logits.
      `attn-expand-empty-rows` implements it before code generation.
    * Results: `out` `[B,Hq,M,Dv]` and, optionally, one log-sum-exp tensor
      `[B,Hq,M]` (f32, natural log, over the unmasked keys and the sink) per
      branch, then the key side and the terms.

    Inputs are f16, bf16 or f32; all accumulation is f32.

    Example (causal attention with a softcap):

    ```mlir
    %o = attn.attention q(%q : tensor<1x8x128x64xbf16>)
                        k(%k : tensor<1x8x128x64xbf16>)
                        v(%v : tensor<1x8x128x64xbf16>)
           scale [0.125] normalizer softmax
           score {
           ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
             %c = arith.constant 30.0 : f32
             %x = arith.divf %s, %c : f32
             %t = math.tanh %x : f32
             %y = arith.mulf %t, %c : f32
             attn.yield %y : f32
           }
           mask {
           ^bb0(%b: index, %h: index, %i: index, %j: index):
             %keep = arith.cmpi sge, %i, %j : index
             attn.yield %keep : i1
           } -> tensor<1x8x128x64xbf16>
    ```
  }];

  let arguments = (ins
    Variadic<Attn_InputTensor>:$queries,
    Variadic<Attn_InputTensor>:$keys,
    Attn_InputTensor:$value,
    Variadic<RankedTensorOf<[AnyFloat]>>:$sinks,
    Variadic<AnyRankedTensor>:$captures,
    DenseF64ArrayAttr:$scale,
    Attn_NormalizerAttr:$normalizer,
    UnitAttr:$mean_empty_rows,
    OptionalAttr<DenseI64ArrayAttr>:$value_columns,
    OptionalAttr<I64Attr>:$key_side_branch,
    OptionalAttr<ArrayAttr>:$term_dims
  );
  let results = (outs
    RankedTensorOf<[AnyFloat]>:$output,
    Variadic<Attn_F32Tensor>:$lse,
    Optional<Attn_F32Tensor>:$key_side,
    Variadic<Attn_F32Tensor>:$terms
  );
  let regions = (region
    MaxSizedRegion<1>:$score,
    MaxSizedRegion<1>:$mask,
    MaxSizedRegion<1>:$epilogue
  );

  let assemblyFormat = [{
    `q` `(` $queries `:` type($queries) `)`
    `k` `(` $keys `:` type($keys) `)`
    `v` `(` $value `:` type($value) `)`
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    (`value_columns` $value_columns^)?
    (`key_side` $key_side_branch^)?
    (`term_dims` $term_dims^)?
    `scale` $scale
    `normalizer` `` $normalizer
    (`score` $score^)?
    (`mask` $mask^)?
    (`epilogue` $epilogue^)?
    attr-dict `->` custom<AttentionResults>(type($output), type($lse),
        type($key_side), type($terms), ref($key_side_branch), ref($term_dims))
  }];

  let extraClassDeclaration = [{
    /// Number of logit branches (one per query/key pair).
    unsigned getNumBranches() { return getQueries().size(); }
    /// Number of summed terms the score region yields after its logits.
    unsigned getNumTerms() { return getTermDims() ? getTermDims()->size() : 0; }
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Online-softmax form
//===----------------------------------------------------------------------===//

def Attn_OnlineStepOp : Attn_Op<"online_step", [
    AttrSizedOperandSegments, IsolatedFromAbove, RecursiveMemoryEffects,
    Attn_ScoreProgramOpInterface, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>
    ]> {
  let summary = "Fold one block of keys/values into the online-softmax state";
  let description = [{
    One step of the online (streaming) form of `attn.attention`, for a block
    of queries `[B,Hq,BM,Dqk]` against a block of keys/values `[B,Hkv,BN,*]`.
    `at(b0, h0, q0, k0)` gives the absolute indices of the blocks' first
    element, so the score and mask regions (same signatures as in
    `attn.attention`) see global positions.

    For every branch `r`, with `s = score(scale * Q_r.K_r^T)` and masked
    entries excluded:

    * `softmax`: state `(max_r, sum_r, acc_r)`;
      `m' = max(m, rowmax(s))`, `alpha = exp(m - m')`,
      `p = exp(s - m')`, `l' = alpha * l + rowsum(p)`,
      `acc' = alpha * acc + p.V`.
      A row whose keys are all masked so far keeps `m = -inf`, `l = 0`,
      `acc = 0` (alpha is defined as 1 when `m' = -inf`).
    * `sigmoid`: state `acc_r` only; `acc' = acc + sigmoid(s).V`.
    * `none`: state `acc_r` only; `acc' = acc + s.V`.

    `max`/`sum` are `[B,Hq,BM]` f32, `acc` is `[B,Hq,BM,Dv]` f32. The results
    are the new state in operand order (`max...`, `sum...`, `acc...`, then
    `key_side`).
    Accumulators narrower than `Dv` (two or more branches, their widths
    summing to `Dv`) are `attn.attention`'s `value_columns`: branch `r`
    multiplies its weights by its own block of V's columns.

    `key_side` (with `key_side_branch`, `attn.attention`'s `key_side`): the
    step adds branch `r`'s weights, transposed, times its query block to
    rows `k0 ..` of a `[1,1,N,Dqk_r]` f32 tensor (the block's contribution
    to every key of its KV head), and returns it after the state.

    `terms` (with `term_dims`, `attn.attention`'s terms): the step adds its
    block's terms (the score region's yields after the logits, masked
    elements adding nothing) to whole term tensors, and returns them after
    the key side.

    `whole_keys` says that the key block holds its full static block of keys
    at run time, all below the key length, though its type's extent is
    dynamic (attn-tile proved it where the length is a runtime value): no
    key of it needs a bounds test.
  }];

  let arguments = (ins
    Variadic<Attn_InputTensor>:$queries,
    Variadic<Attn_InputTensor>:$keys,
    Attn_InputTensor:$value,
    Variadic<Attn_F32Tensor>:$maxState,
    Variadic<Attn_F32Tensor>:$sumState,
    Variadic<Attn_F32Tensor>:$accState,
    Optional<Attn_F32Tensor>:$keySide,
    Variadic<Attn_F32Tensor>:$termState,
    Index:$batchOffset,
    Index:$headOffset,
    Index:$queryOffset,
    Index:$keyOffset,
    Variadic<AnyRankedTensor>:$captures,
    DenseF64ArrayAttr:$scale,
    Attn_NormalizerAttr:$normalizer,
    UnitAttr:$wholeKeys,
    OptionalAttr<I64Attr>:$key_side_branch,
    OptionalAttr<ArrayAttr>:$term_dims
  );
  let results = (outs Variadic<Attn_F32Tensor>:$newState);
  let regions = (region MaxSizedRegion<1>:$score, MaxSizedRegion<1>:$mask);

  let assemblyFormat = [{
    `q` `(` $queries `:` type($queries) `)`
    `k` `(` $keys `:` type($keys) `)`
    `v` `(` $value `:` type($value) `)`
    (`max` `(` $maxState^ `:` type($maxState) `)`)?
    (`sum` `(` $sumState^ `:` type($sumState) `)`)?
    `acc` `(` $accState `:` type($accState) `)`
    (`key_side` $key_side_branch^ `(` $keySide `:` type($keySide) `)`)?
    (`terms` $term_dims^ `(` $termState `:` type($termState) `)`)?
    `at` `(` $batchOffset `,` $headOffset `,` $queryOffset `,` $keyOffset `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    `scale` $scale
    `normalizer` `` $normalizer
    (`whole_keys` $wholeKeys^)?
    (`score` $score^)?
    (`mask` $mask^)?
    attr-dict
  }];

  let extraClassDeclaration = [{
    /// Number of logit branches (one per query/key pair).
    unsigned getNumBranches() { return getQueries().size(); }
    /// The new online state (max, sum, acc), without the key-side tensor
    /// and the terms.
    ::mlir::ValueRange getStateResults();
    /// The new term tensors (the last results).
    ::mlir::ValueRange getTermResults() {
      return getNewState().take_back(getTermState().size());
    }
    /// Number of summed terms the score region yields after its logits.
    unsigned getNumTerms() { return getTermState().size(); }
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Attn_OnlineFinalizeOp : Attn_Op<"online_finalize", [
    AttrSizedOperandSegments, IsolatedFromAbove, RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>
    ]> {
  let summary = "Normalize the online-softmax state and apply the epilogue";
  let description = [{
    Turns the state left by the last `attn.online_step` into the output block
    `[B,Hq,BM,Dv]`. For `softmax`, branch `r` contributes
    `o_r = acc_r / (l_r + exp(sink_r[h] - m_r))` (the sink term only when
    sinks are given), and `o_r = 0` where the denominator is 0 (every key
    masked). For `sigmoid`/`none`, `o_r = acc_r`. The epilogue region (same
    signature as in `attn.attention`, indices offset by `at(b0, h0, q0)`)
    combines the branches; without it the output is `o_0`, or, where the
    accumulators split the output's columns into blocks (`value_columns`,
    no epilogue), each `o_r` in its own block.

    With softmax, the optional `lse` results give, per branch,
    `m_r + log(l_r + exp(sink_r - m_r))`, `-inf` for fully masked rows.
  }];

  let arguments = (ins
    Variadic<Attn_F32Tensor>:$maxState,
    Variadic<Attn_F32Tensor>:$sumState,
    Variadic<Attn_F32Tensor>:$accState,
    Variadic<RankedTensorOf<[AnyFloat]>>:$sinks,
    Index:$batchOffset,
    Index:$headOffset,
    Index:$queryOffset,
    Variadic<AnyRankedTensor>:$captures,
    Attn_NormalizerAttr:$normalizer
  );
  let results = (outs
    RankedTensorOf<[AnyFloat]>:$output,
    Variadic<Attn_F32Tensor>:$lse
  );
  let regions = (region MaxSizedRegion<1>:$epilogue);

  let assemblyFormat = [{
    (`max` `(` $maxState^ `:` type($maxState) `)`)?
    (`sum` `(` $sumState^ `:` type($sumState) `)`)?
    `acc` `(` $accState `:` type($accState) `)`
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    `at` `(` $batchOffset `,` $headOffset `,` $queryOffset `)`
    (`captures` `(` $captures^ `:` type($captures) `)`)?
    `normalizer` `` $normalizer
    (`epilogue` $epilogue^)?
    attr-dict `->` type(results)
  }];

  let extraClassDeclaration = [{
    /// Number of logit branches (one accumulator each).
    unsigned getNumBranches() { return getAccState().size(); }
  }];

  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Attn_ParallelAccumulateOp : Attn_Op<"parallel_accumulate", [
    DeclareOpInterfaceMethods<ParallelCombiningOpInterface>]> {
  let summary = "Add an iteration's contribution to a result of scf.forall";
  let description = [{
    In the `scf.forall.in_parallel` terminator of an `scf.forall`: adds
    `source` (one iteration's contribution, f32) to `dest` (a shared output
    of the loop) at the leading `offsets`: the source's leading dims (one
    per offset) are 1, the others `dest`'s:
    `dest[o_0, .., o_k-1, ...] += source[0, .., 0, ...]`. Iterations that
    add to the same elements combine by addition, in no particular order:
    the `key_side` of a tiled `attn.attention` (`[1,1,N,D]` at batch and
    head), to which every query tile contributes, and its terms (whole
    tensors, no offsets).

    ```mlir
    scf.forall.in_parallel {
      attn.parallel_accumulate %part into %ks at(%b, %h)
          : tensor<1x1x128x64xf32> into tensor<2x4x128x64xf32>
    }
    ```
  }];
  let arguments = (ins Attn_F32Tensor:$source, Attn_F32Tensor:$dest,
                       Variadic<Index>:$offsets);
  let assemblyFormat = [{
    $source `into` $dest `at` `(` $offsets `)` attr-dict `:`
    type($source) `into` type($dest)
  }];
  let hasVerifier = 1;
}

def Attn_YieldOp : Attn_Op<"yield", [
    Pure, Terminator,
    ParentOneOf<["AttentionOp", "OnlineStepOp", "OnlineFinalizeOp"]>]> {
  let summary = "Yield the values of an attn region";
  let description = [{
    Terminates the score, mask and epilogue regions of the attn ops: the new
    logits (score), the keep bit (mask) or the output element (epilogue).
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // FLASHLIGHT_ATTN_OPS
