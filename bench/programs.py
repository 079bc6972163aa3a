#!/usr/bin/env python3
"""Attention programs beyond FlexAttention (issue 6), written in plain
PyTorch as users write them, with FlexAttention's best workaround and the
FLOP count of each.

    bench/programs.py export <dir> [--variants a,b] [--dims 64,128] [--lengths 2048,8192]
    bench/programs.py check                 # CPU self-check on tiny shapes

Layout [B, H, N, D], bf16 inputs. Benchmark shapes as in bench/bench.py:
B * N = 16k tokens, H * D = 2048; D in {64, 128}, N in {2048, 8192}. The
Evoformer case B = 2, H = 32, N = 8192, D = 64 (pair bias 2 * 32 * 8192^2
elements, past 2^31) is the default D = 64, N = 8192 shape.

Each `Variant` holds
- `fn`: the program (what flashlight.export exports, what eager PyTorch and
  torch.compile run, and, on fp64 slices of the inputs, the reference);
  dtype-generic: given fp64 inputs it computes in fp64;
- `inputs(B, H, N, D)`: the input specs: name, shape, dtype, how to draw it,
  and which dims are batch and head (the reference slices along them);
- `flex`: FlexAttention's best workaround, `flex(flex_attention,
  create_block_mask, *inputs)` -> output, or None with `flex_none` saying why;
- `flops(B, H, N, D)`.

`export` writes <dir>/<variant>.d<D>.n<N>.json (flashlight-graph, from
example inputs on the "meta" device: nothing is allocated, so the 8192^2
biases cost nothing); bench/prepare_programs.sh compiles them.
"""

import argparse
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

DEFAULT_DIMS = (64, 128)
DEFAULT_LENGTHS = (2048, 8192)
TOKENS, WIDTH = 16384, 2048  # B * N, H * D


def shape_for(N, D):
    """(B, H) of the benchmark shape with sequence length N and head dim D."""
    return TOKENS // N, WIDTH // D


def _causal(n, device):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


# --- The programs -------------------------------------------------------------


def differential(q1, k1, q2, k2, v, lam):
    """Differential attention (Ye et al., 2024), causal; lam a 0-d f32 tensor."""
    scale = q1.shape[-1] ** -0.5
    n = q1.shape[-2]
    causal = _causal(n, q1.device)
    s1 = (q1 @ k1.transpose(-2, -1)) * scale
    s2 = (q2 @ k2.transpose(-2, -1)) * scale
    p1 = torch.softmax(s1.masked_fill(~causal, float("-inf")), dim=-1)
    p2 = torch.softmax(s2.masked_fill(~causal, float("-inf")), dim=-1)
    return (p1 - lam * p2) @ v


def evoformer(q, k, v, pair_bias, mask_bias, gate):
    """AlphaFold-style gated attention: pair bias [B, H, N, N] and mask bias
    [B, 1, 1, N] on the logits, output gated by sigmoid(gate); no mask."""
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5 + pair_bias + mask_bias
    o = torch.softmax(s, dim=-1) @ v
    return o * torch.sigmoid(gate)


def sigmoid(q, k, v):
    """Sigmoid attention (Ramapuram et al., 2024): sigmoid(s - log N) @ v."""
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    return torch.sigmoid(s - math.log(s.shape[-1])) @ v


def sigmoid_causal(q, k, v):
    """Sigmoid attention, causal: biased logits masked with -inf (weight 0).
    (Masking before the - log N also computes this, but flashlight then sees
    no mask, only a general score region: no tiles skipped.)"""
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    n = s.shape[-1]
    s = (s - math.log(n)).masked_fill(~_causal(n, q.device), float("-inf"))
    return torch.sigmoid(s) @ v


def sink(q, k, v, sinks):
    """gpt-oss-style attention sinks, causal: a per-head logit sinks[h] (f32)
    joins the softmax as an extra column, which is dropped after it."""
    b, h, n, _ = q.shape
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    s = s.masked_fill(~_causal(n, q.device), float("-inf"))
    col = sinks.reshape(1, -1, 1, 1).expand(b, h, n, 1)
    s = torch.cat([s.to(sinks.dtype), col], dim=-1)  # the logits in the sinks' f32
    p = torch.softmax(s, dim=-1)[..., :-1]
    return p.to(v.dtype) @ v


def t5_bucket(rel, num_buckets=32, max_distance=128):
    """T5's bidirectional relative-position bucket of rel = kv - q (as in
    HF transformers' T5Attention._relative_position_bucket; the same
    function as examples/t5_relative_bias.mlir). Elementwise on integer
    tensors (also on the 0-d tensors of a FlexAttention score_mod)."""
    num_buckets //= 2
    base = (rel > 0).to(torch.int64) * num_buckets
    dist = torch.abs(rel)
    max_exact = num_buckets // 2
    is_small = dist < max_exact
    large = max_exact + (
        torch.log(dist.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.int64)
    large = torch.minimum(large, torch.full_like(large, num_buckets - 1))
    return base + torch.where(is_small, dist, large)


def t5(q, k, v, table):
    """T5 relative attention bias: logits (no 1/sqrt(D) scale, as in T5) plus
    table[h, bucket(kv - q)], table [H, 32] f32; no mask."""
    s = q @ k.transpose(-2, -1)
    n = s.shape[-1]
    pos = torch.arange(n, device=q.device)
    bucket = t5_bucket(pos[None, :] - pos[:, None])
    s = s + table[:, bucket]
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


IPA_POINTS = 4


def ipa(q, k, v, q_pts, k_pts, gamma):
    """IPA-style logits (the point term of AlphaFold 2's invariant point
    attention): q k^T s - w[h] * sum_p |q_pts - k_pts|^2, w = softplus(gamma)
    * sqrt(2 / (9 P)) / 2, points [B, H, N, P, 3] (P = 4) in the accumulation
    dtype of gamma (f32; fp64 for the reference); no mask."""
    acc = gamma.dtype
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    diff = q_pts.to(acc)[:, :, :, None] - k_pts.to(acc)[:, :, None, :]
    dist = (diff * diff).sum(dim=(-2, -1))
    w = torch.log(1 + torch.exp(gamma)) * math.sqrt(2 / (9 * IPA_POINTS)) / 2
    s = s.to(acc) - w.view(1, -1, 1, 1) * dist
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


# --- FlexAttention's best workarounds -------------------------------------------


def _causal_mod(b, h, q, kv):
    return q >= kv


def _lse(flex_attention, *args, **kwargs):
    """flex_attention(...) -> (out, lse); return_aux where the torch has it."""
    try:
        from torch.nn.attention.flex_attention import AuxRequest
    except ImportError:
        return flex_attention(*args, return_lse=True, **kwargs)
    out, aux = flex_attention(*args, return_aux=AuxRequest(lse=True), **kwargs)
    return out, aux.lse


def differential_flex(flex_attention, block_mask, q1, k1, q2, k2, v, lam):
    """Two flex_attention calls (one causal block mask), combined after."""
    scale = q1.shape[-1] ** -0.5
    o1 = flex_attention(q1, k1, v, block_mask=block_mask, scale=scale)
    o2 = flex_attention(q2, k2, v, block_mask=block_mask, scale=scale)
    return o1 - lam * o2


def evoformer_flex(flex_attention, block_mask, q, k, v, pair_bias, mask_bias, gate):
    """A score_mod capturing both biases; the gate outside."""
    def score_mod(s, b, h, qi, kv):
        return s + pair_bias[b, h, qi, kv] + mask_bias[b, 0, 0, kv]

    o = flex_attention(q, k, v, score_mod=score_mod, scale=q.shape[-1] ** -0.5)
    return o * torch.sigmoid(gate)


def sink_flex(flex_attention, block_mask, q, k, v, sinks):
    """Causal flex_attention with its log-sum-exp, then the sink fix-up:
    o * exp(lse - logaddexp(lse, sink[h]))."""
    o, lse = _lse(flex_attention, q, k, v, block_mask=block_mask,
                  scale=q.shape[-1] ** -0.5)
    w = torch.exp(lse - torch.logaddexp(lse, sinks[None, :, None].to(lse.dtype)))
    return (o * w[..., None]).to(o.dtype)


def t5_flex(flex_attention, block_mask, q, k, v, table):
    """A score_mod computing the bucket and gathering from the table."""
    def score_mod(s, b, h, qi, kv):
        return s + table[h, t5_bucket(kv - qi)]

    return flex_attention(q, k, v, score_mod=score_mod, scale=1.0)


def ipa_flex(flex_attention, block_mask, q, k, v, q_pts, k_pts, gamma):
    """A score_mod capturing the points: the distance over the 3 P
    coordinates per score."""
    w = torch.log(1 + torch.exp(gamma)) * math.sqrt(2 / (9 * IPA_POINTS)) / 2
    qp, kp = q_pts.to(gamma.dtype), k_pts.to(gamma.dtype)

    def score_mod(s, b, h, qi, kv):
        dist = 0.0
        for p in range(IPA_POINTS):
            for x in range(3):
                diff = qp[b, h, qi, p, x] - kp[b, h, kv, p, x]
                dist = dist + diff * diff
        return s - w[h] * dist

    return flex_attention(q, k, v, score_mod=score_mod, scale=q.shape[-1] ** -0.5)


# --- Variants -------------------------------------------------------------------


@dataclass
class Input:
    name: str
    shape: tuple
    dtype: torch.dtype
    init: Callable  # (shape, dtype, generator, device) -> tensor
    bdim: Optional[int] = None  # the dim indexed by the batch (reference slices)
    hdim: Optional[int] = None  # the dim indexed by the head


def _randn(std=1.0, mean=0.0):
    def init(shape, dtype, gen, device):
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32
                        if math.prod(shape) < 2 ** 20 else dtype)
        if std != 1.0 or mean != 0.0:
            x = x * std + mean
        return x.to(dtype)
    return init


def _constant(value):
    return lambda shape, dtype, gen, device: torch.full(shape, value, dtype=dtype, device=device)


def _mask_bias(shape, dtype, gen, device):
    """AlphaFold's 1e9 * (mask - 1), about 10 % of the keys masked."""
    keep = torch.rand(shape, generator=gen, device=device) >= 0.1
    return ((keep.to(torch.float32) - 1.0) * 1e9).to(dtype)


def _bhnd(name, B, H, N, D, init=None, dtype=torch.bfloat16):
    return Input(name, (B, H, N, D), dtype, init or _randn(), 0, 1)


@dataclass
class Variant:
    name: str
    fn: Callable
    inputs: Callable  # (B, H, N, D) -> [Input]
    causal: bool
    flops_factor: float = 1.0  # x 4 B H N^2 D x kept fraction
    flex: Optional[Callable] = None
    flex_none: str = ""
    supported: bool = True
    description: str = ""
    extra: dict = field(default_factory=dict)

    def kept_fraction(self, N):
        return (N + 1) / (2 * N) if self.causal else 1.0

    def flops(self, B, H, N, D):
        return self.flops_factor * 4.0 * B * H * N * N * D * self.kept_fraction(N)

    def make_inputs(self, B, H, N, D, seed, device, dtype=torch.bfloat16):
        gen = torch.Generator(device=device).manual_seed(seed)
        specs = self.inputs(B, H, N, D)
        out = []
        for s in specs:
            t = s.dtype if s.dtype != torch.bfloat16 else dtype
            out.append(s.init(s.shape, t, gen, device))
        return out

    def example_inputs(self, B, H, N, D, device="meta"):
        """Uninitialized tensors of the right shapes and dtypes (export only
        reads their metadata)."""
        return [torch.empty(s.shape, dtype=s.dtype, device=device)
                for s in self.inputs(B, H, N, D)]

    def big_bias(self, B, H, N, D):
        """Whether an input holds 2^31 elements or more (FlexAttention's
        captured-tensor indexing is expected to overflow int32 there)."""
        return largest_input(self, B, H, N, D) >= 2 ** 31


def largest_input(variant, B, H, N, D):
    return max((math.prod(s.shape) for s in variant.inputs(B, H, N, D)), default=0)


VARIANTS = {}


def _variant(**kw):
    VARIANTS[kw["name"]] = Variant(**kw)


_variant(
    name="differential", fn=differential, causal=True, flops_factor=2.0,
    inputs=lambda B, H, N, D: [
        _bhnd("q1", B, H, N, D), _bhnd("k1", B, H, N, D),
        _bhnd("q2", B, H, N, D), _bhnd("k2", B, H, N, D),
        _bhnd("v", B, H, N, D),
        Input("lam", (), torch.float32, _constant(0.5))],
    flex=differential_flex,
    description="(softmax(q1 k1^T s) - lam softmax(q2 k2^T s)) @ v, causal, lam a 0-d f32 input")
_variant(
    name="evoformer", fn=evoformer, causal=False,
    inputs=lambda B, H, N, D: [
        _bhnd("q", B, H, N, D), _bhnd("k", B, H, N, D), _bhnd("v", B, H, N, D),
        Input("pair_bias", (B, H, N, N), torch.bfloat16, _randn(), 0, 1),
        Input("mask_bias", (B, 1, 1, N), torch.bfloat16, _mask_bias, 0, None),
        _bhnd("gate", B, H, N, D)],
    flex=evoformer_flex,
    description="softmax(q k^T s + pair_bias[B,H,N,N] + mask_bias[B,1,1,N]) @ v * sigmoid(gate)")
_variant(
    name="sigmoid", fn=sigmoid, causal=False,
    inputs=lambda B, H, N, D: [_bhnd(n, B, H, N, D) for n in "qkv"],
    flex_none="no FlexAttention form (no softmax normalizer)",
    description="sigmoid(q k^T s - log N) @ v")
_variant(
    name="sigmoid_causal", fn=sigmoid_causal, causal=True,
    inputs=lambda B, H, N, D: [_bhnd(n, B, H, N, D) for n in "qkv"],
    flex_none="no FlexAttention form (no softmax normalizer)",
    description="sigmoid(q k^T s - log N) @ v, causal")
_variant(
    name="sink", fn=sink, causal=True,
    inputs=lambda B, H, N, D: [
        _bhnd("q", B, H, N, D), _bhnd("k", B, H, N, D), _bhnd("v", B, H, N, D),
        # Sinks near log N: they take a visible share of each row's mass.
        Input("sinks", (H,), torch.float32, _randn(1.0, math.log(N)), None, 0)],
    flex=sink_flex,
    description="softmax(cat(q k^T s, sinks[h])) without the sink column @ v, causal")
_variant(
    name="t5", fn=t5, causal=False,
    inputs=lambda B, H, N, D: [
        # T5 folds 1/sqrt(D) into its query projection: q drawn with that std.
        _bhnd("q", B, H, N, D, _randn(D ** -0.5)), _bhnd("k", B, H, N, D),
        _bhnd("v", B, H, N, D),
        Input("table", (H, 32), torch.float32, _randn(), None, 0)],
    flex=t5_flex,
    description="softmax(q k^T + table[h, bucket(kv - q)]) @ v, T5 buckets (32, max 128)")
_variant(
    name="ipa", fn=ipa, causal=False,
    inputs=lambda B, H, N, D: [
        _bhnd("q", B, H, N, D), _bhnd("k", B, H, N, D), _bhnd("v", B, H, N, D),
        Input("q_pts", (B, H, N, IPA_POINTS, 3), torch.bfloat16, _randn(), 0, 1),
        Input("k_pts", (B, H, N, IPA_POINTS, 3), torch.bfloat16, _randn(), 0, 1),
        Input("gamma", (H,), torch.float32, _randn(), None, 0)],
    flex=ipa_flex,
    description="softmax(q k^T s - w[h] sum_p |q_pts - k_pts|^2) @ v, 4 points "
                "[B,H,N,4,3], w = softplus(gamma[h]) sqrt(2/36) / 2 (FLOPs: "
                "those of q k^T and P V)")

DEFAULT_VARIANTS = [n for n, v in VARIANTS.items() if v.supported]


def kernel_name(variant, D, N):
    return f"{variant}.d{D}.n{N}"


# --- Reference: the program on fp64 slices ----------------------------------------


def _slice(x, spec, b, h0, h1):
    if spec.bdim is not None:
        x = x.narrow(spec.bdim, b, 1)
    if spec.hdim is not None:
        x = x.narrow(spec.hdim, h0, h1 - h0)
    return x


def reference(variant, inputs, B, H, N, D, dtype=torch.float64, budget=2 ** 27):
    """The program itself, in `dtype`, one batch and a few heads at a time
    (at most `budget` score elements per slice): every variant treats each
    (b, h) on its own, and the slices keep memory to a few GB even where the
    whole [B, H, N, N] would need tens."""
    specs = variant.inputs(B, H, N, D)
    heads = max(1, min(H, budget // (N * N)))
    out = None
    for b in range(B):
        for h0 in range(0, H, heads):
            h1 = min(H, h0 + heads)
            args = [_slice(x, s, b, h0, h1).to(dtype) if x.is_floating_point()
                    else _slice(x, s, b, h0, h1) for x, s in zip(inputs, specs)]
            o = variant.fn(*args)
            if out is None:
                out = torch.empty((B, H) + tuple(o.shape[2:]), dtype=dtype, device=o.device)
            out[b:b + 1, h0:h1] = o
            del args, o
    return out


def rel_err(out, ref):
    out = out.to(ref.dtype)
    return ((out - ref).norm() / ref.norm()).item()


# --- Independent formulas (tiny shapes, fp64; for `check`) --------------------------


def _row_softmax(s):
    """exp(s - row max) / its row sum, written out (no torch.softmax)."""
    e = torch.exp(s - s.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def _direct(variant, inputs):
    """Each variant written again with explicit loops over (b, h) and plain
    exp / sums (no softmax, no cat), for the self-check."""
    name = variant.name
    if name == "differential":
        q1, k1, q2, k2, v, lam = inputs
        B, H, N, D = q1.shape
        out = torch.zeros_like(v)
        for b in range(B):
            for h in range(H):
                def p(q, k):
                    s = q[b, h] @ k[b, h].T / math.sqrt(D)
                    s = s + torch.where(torch.ones(N, N, dtype=torch.bool).tril(),
                                        0.0, float("-inf")).to(s)
                    return _row_softmax(s)
                out[b, h] = (p(q1, k1) - lam.item() * p(q2, k2)) @ v[b, h]
        return out
    if name == "evoformer":
        q, k, v, pair, mb, gate = inputs
        B, H, N, D = q.shape
        out = torch.zeros_like(v)
        for b in range(B):
            for h in range(H):
                s = q[b, h] @ k[b, h].T / math.sqrt(D) + pair[b, h] + mb[b, 0, 0][None, :]
                e = torch.exp(s - s.max(-1, keepdim=True).values)
                out[b, h] = (e @ v[b, h]) / e.sum(-1, keepdim=True) / (1 + torch.exp(-gate[b, h]))
        return out
    if name in ("sigmoid", "sigmoid_causal"):
        q, k, v = inputs
        B, H, N, D = q.shape
        out = torch.zeros_like(v)
        keep = torch.ones(N, N, dtype=torch.bool).tril() if name == "sigmoid_causal" \
            else torch.ones(N, N, dtype=torch.bool)
        for b in range(B):
            for h in range(H):
                s = q[b, h] @ k[b, h].T / math.sqrt(D) - math.log(N)
                w = 1 / (1 + torch.exp(-s))
                out[b, h] = (w * keep) @ v[b, h]
        return out
    if name == "sink":
        q, k, v, sinks = inputs
        B, H, N, D = q.shape
        out = torch.zeros_like(v)
        keep = torch.ones(N, N, dtype=torch.bool).tril()
        for b in range(B):
            for h in range(H):
                s = q[b, h] @ k[b, h].T / math.sqrt(D)
                m = torch.maximum(s.masked_fill(~keep, float("-inf")).max(-1).values,
                                  sinks[h].to(s))
                e = torch.exp(s - m[:, None]) * keep
                den = e.sum(-1) + torch.exp(sinks[h].to(s) - m)
                out[b, h] = (e @ v[b, h]) / den[:, None]
        return out
    if name == "t5":
        q, k, v, table = inputs
        B, H, N, D = q.shape
        out = torch.zeros_like(v)

        def bucket(r):  # scalar, pure Python
            base = 16 if r > 0 else 0
            d = abs(r)
            if d < 8:
                return base + d
            return base + min(15, 8 + int(math.log(d / 8) / math.log(128 / 8) * 8))
        idx = torch.tensor([[bucket(j - i) for j in range(N)] for i in range(N)])
        for b in range(B):
            for h in range(H):
                s = q[b, h] @ k[b, h].T + table[h][idx].to(q.dtype)
                out[b, h] = _row_softmax(s) @ v[b, h]
        return out
    if name == "ipa":
        q, k, v, qp, kp, gamma = inputs
        B, H, N, D = q.shape
        out = torch.zeros_like(v)
        for b in range(B):
            for h in range(H):
                w = math.log(1 + math.exp(gamma[h].item())) * math.sqrt(2 / 36) / 2
                dist = sum(((qp[b, h, :, p, None, :] - kp[b, h, None, :, p, :]) ** 2).sum(-1)
                           for p in range(IPA_POINTS))
                s = q[b, h] @ k[b, h].T / math.sqrt(D) - w * dist.to(q.dtype)
                out[b, h] = _row_softmax(s) @ v[b, h]
        return out
    raise ValueError(name)


def _eager_flex():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    return flex_attention, create_block_mask


def flex_call(variant, flex_attention, create_block_mask, inputs, N):
    """A zero-argument callable running variant's FlexAttention workaround on
    `inputs` (the causal block mask built here, once), or None."""
    if variant.flex is None:
        return None
    device = inputs[0].device
    block_mask = create_block_mask(_causal_mod, None, None, N, N, device=str(device)) \
        if variant.causal else None
    return lambda: variant.flex(flex_attention, block_mask, *inputs)


def check(B=2, H=3, N=40, D=16, seed=0):
    """CPU, fp64: program == independent formula == chunked reference, and
    FlexAttention's workaround (eager flex_attention) where it runs here."""
    ok = True
    for name, variant in VARIANTS.items():
        if not variant.supported:
            print(f"{name:<16} skipped (not supported)")
            continue
        inputs = variant.make_inputs(B, H, N, D, seed, "cpu", dtype=torch.float64)
        inputs = [x.double() if x.is_floating_point() else x for x in inputs]
        prog = variant.fn(*inputs)
        direct = _direct(variant, inputs)
        ref = reference(variant, inputs, B, H, N, D, budget=N * N)  # one head per slice
        e_direct, e_ref = rel_err(prog, direct), rel_err(ref, direct)
        line = f"{name:<16} program vs direct {e_direct:.1e}  sliced reference vs direct {e_ref:.1e}"
        good = e_direct < 1e-12 and e_ref < 1e-12
        if variant.flex is not None:
            try:
                fa, cbm = _eager_flex()
                f = flex_call(variant, fa, cbm, inputs, N)()
                e_flex = rel_err(f, direct)
                line += f"  flex (eager, fp64) vs direct {e_flex:.1e}"
                good = good and e_flex < 1e-6
            except Exception as e:  # flex not runnable on this CPU build
                line += f"  flex: {type(e).__name__}: {str(e)[:100]}"
        # bf16 inputs: the program in bf16 against the fp64 reference of the
        # same (rounded) inputs.
        lo = variant.make_inputs(B, H, N, D, seed, "cpu")
        e_bf16 = rel_err(variant.fn(*lo), reference(variant, lo, B, H, N, D))
        line += f"  bf16 program vs fp64 {e_bf16:.1e}"
        good = good and e_bf16 < 3e-2
        print(line + ("" if good else "  FAIL"))
        ok = ok and good
    return ok


# --- Export ---------------------------------------------------------------------


def export(outdir, variants, dims, lengths):
    import flashlight

    os.makedirs(outdir, exist_ok=True)
    failed = []
    for name in variants:
        variant = VARIANTS[name]
        if not variant.supported:
            print(f"{name}: skipped (not supported yet)")
            continue
        for D in dims:
            for N in lengths:
                B, H = shape_for(N, D)
                kname = kernel_name(name, D, N)
                path = os.path.join(outdir, f"{kname}.json")
                try:
                    graph = flashlight.export(variant.fn, *variant.example_inputs(B, H, N, D),
                                              path=path)
                except Exception as e:
                    print(f"{kname}: export failed: {type(e).__name__}: {e}", file=sys.stderr)
                    failed.append(kname)
                    continue
                if graph["constants"]:
                    print(f"{kname}: warning: captured constants "
                          f"{[c['name'] for c in graph['constants']]}", file=sys.stderr)
                print(f"{kname}: B={B} H={H} N={N} D={D} "
                      f"inputs {' '.join(i['name'] for i in graph['inputs'])}")
    return failed


def _ints(s):
    return [int(x) for x in s.split(",") if x]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("outdir")
    e.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    e.add_argument("--dims", default=",".join(map(str, DEFAULT_DIMS)))
    e.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)))
    sub.add_parser("check")
    args = parser.parse_args()
    if args.cmd == "export":
        failed = export(args.outdir, [v for v in args.variants.split(",") if v],
                        _ints(args.dims), _ints(args.lengths))
        sys.exit(1 if failed else 0)
    sys.exit(0 if check() else 1)


if __name__ == "__main__":
    main()
