#!/usr/bin/env python3
"""Attention programs written in JAX the way users write them, and their
StableHLO export: the input of Flashlight's JAX importer.

`PROGRAMS` maps a name to a `Program`: the JAX function `fn(*args)`, the
example inputs `inputs` (a list of (shape, dtype) with dtype one of "bf16",
"f16", "f32", "i32", "bool") and a one-line `description`. Every function is
dtype-generic: `scripts/jax_check.py` also evaluates it on f32 copies of the
inputs as the reference, and draws its random inputs by parameter name
(`slopes` in (0, 1)) and dtype (i32 document ids, bool masks).

Layouts: BHND is [batch, heads, seq, dim]; BNHD is [batch, seq, heads, dim],
the layout of `jax.nn.dot_product_attention`. Unless a description says
otherwise: batch 2, 4 query heads, sequence 128, head dim 64, bf16.

    python3 scripts/jax_fixtures.py OUTDIR [--generic]

writes OUTDIR/<name>.stablehlo.mlir (`jax.jit(fn).lower(*args).as_text()`,
lowered for CUDA), with --generic also OUTDIR/<name>.generic.mlir (the
generic op form), and OUTDIR/index.json
({name: {"inputs": [{"name", "shape", "dtype"}, ...], "description"}}).
Runs on a CPU-only JAX install.
"""

import argparse
import inspect
import json
import math
import os
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp

from fixture_common import BHND, BNHD, B, D, H, N, qkv, registry

DTYPES = {
    "bf16": jnp.bfloat16,
    "f16": jnp.float16,
    "f32": jnp.float32,
    "i32": jnp.int32,
    "bool": jnp.bool_,
}


@dataclass(frozen=True)
class Program:
    fn: Callable
    inputs: list  # [(shape tuple, dtype string)]
    description: str

    def example_args(self):
        """Abstract arguments of the declared shapes and dtypes, for lower()."""
        return [jax.ShapeDtypeStruct(shape, DTYPES[dtype]) for shape, dtype in self.inputs]

    @property
    def arg_names(self):
        """The function's parameter names, in argument order."""
        return list(inspect.signature(self.fn).parameters)

    def lower(self):
        """`jax.jit(fn).lower(*example_args)` as on a CUDA host, whatever this
        host is: the CPU backend rejects the f16 x f16 -> f32 dot algorithm
        that jax.nn.dot_product_attention asks for (dpa_f16_d128); every
        other program lowers to the same text on both."""
        return jax.jit(self.fn).trace(*self.example_args()).lower(lowering_platforms=("cuda",))


PROGRAMS = {}
program = registry(PROGRAMS, Program)


def qk_bhnd(q, k):
    return jnp.einsum("bhqd,bhkd->bhqk", q, k)


def pv_bhnd(p, v):
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)


# --- Plain attention, both layouts -------------------------------------------


@program(qkv(), "BHND, scale on the scores")
def vanilla_bhnd(q, k, v):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    return pv_bhnd(jax.nn.softmax(s, axis=-1), v)


@program(qkv(BNHD), "BNHD, scale on q")
def vanilla_bnhd(q, k, v):
    q = q * q.shape[-1] ** -0.5
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v)


# --- Masks -------------------------------------------------------------------


@program(qkv((B, H, 200, D)), "BHND, N=200, jnp.tril mask")
def causal(q, k, v):
    s = qk_bhnd(q, k) * (1.0 / math.sqrt(q.shape[-1]))
    n = s.shape[-1]
    mask = jnp.tril(jnp.ones((n, n), dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    return pv_bhnd(jax.nn.softmax(s, axis=-1), v)


@program(qkv((B, H, 64, D), kv_shape=BHND),
         "BHND, 64 queries over 128 keys, causal aligned to the bottom right")
def causal_bottom_right(q, k, v):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    m, n = s.shape[-2], s.shape[-1]
    qi = jnp.arange(m)[:, None]
    kj = jnp.arange(n)[None, :]
    s = jnp.where(kj <= qi + (n - m), s, -jnp.inf)
    return pv_bhnd(jax.nn.softmax(s, axis=-1), v)


@program(qkv(), "BHND, causal band of 32 keys: 0 <= q - kv < 32")
def sliding_window(q, k, v):
    s = qk_bhnd(q * q.shape[-1] ** -0.5, k)
    n = s.shape[-1]
    dist = jnp.arange(n)[:, None] - jnp.arange(n)[None, :]
    s = jnp.where((dist >= 0) & (dist < 32), s, -jnp.inf)
    return pv_bhnd(jax.nn.softmax(s, axis=-1), v)


@program(qkv(BNHD), "BNHD, a bidirectional prefix of 32 keys, causal after it")
def prefix_lm(q, k, v):
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    pos = jnp.arange(s.shape[-1])
    keep = (pos[None, :] < 32) | (pos[None, :] <= pos[:, None])
    s = jnp.where(keep, s, -jnp.inf)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)


@program(qkv((B, 200, H, D)) + [((B, 200), "i32")],
         "BNHD, N=200, document ids [B, N] int32: same document and causal")
def document_mask(q, k, v, doc_ids):
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    same_doc = doc_ids[:, :, None] == doc_ids[:, None, :]  # [B, q, kv]
    keep = same_doc & jnp.tril(jnp.ones((n, n), dtype=bool))
    s = jnp.where(keep[:, None, :, :], s, -jnp.inf)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)


# --- Score modifications -----------------------------------------------------


@program(qkv() + [((H,), "f32")], "BHND, ALiBi: -slope[h] * (q - kv), slopes an input; causal")
def alibi(q, k, v, slopes):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    rel = jnp.arange(n)[:, None] - jnp.arange(n)[None, :]
    s = s - slopes[:, None, None] * rel
    s = jnp.where(rel >= 0, s, -jnp.inf)
    # The f32 side input promotes the scores to f32: back to v's type for P V.
    return pv_bhnd(jax.nn.softmax(s, axis=-1).astype(v.dtype), v)


@program(qkv(dtype="f16"), "BHND, f16, Gemma-style soft-cap tanh(s / 30) * 30; causal")
def softcap(q, k, v):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    s = jnp.tanh(s / 30.0) * 30.0
    n = s.shape[-1]
    s = jnp.where(jnp.tril(jnp.ones((n, n), dtype=bool)), s, -jnp.inf)
    return pv_bhnd(jax.nn.softmax(s, axis=-1), v)


@program(qkv() + [((B, H, N, N), "f32")], "BHND, additive bias input [B, H, N, N] f32")
def bias(q, k, v, b):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1]) + b
    return pv_bhnd(jax.nn.softmax(s, axis=-1).astype(v.dtype), v)


@program(qkv() + [((H, 32), "f32")],
         "BHND, T5-style relative bias: table [H, 32] f32 indexed by clip(kv - q, -16, 15) + 16")
def t5_bias(q, k, v, table):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    rel = jnp.arange(n)[None, :] - jnp.arange(n)[:, None]
    bucket = jnp.clip(rel, -16, 15) + 16
    s = s + table[:, bucket][None]
    return pv_bhnd(jax.nn.softmax(s, axis=-1).astype(v.dtype), v)


# --- Grouped-query attention -------------------------------------------------


@program(qkv(kv_shape=(B, 2, N, D)), "BHND, 4 query heads over 2 KV heads, jnp.repeat")
def gqa_repeat(q, k, v):
    group = q.shape[1] // k.shape[1]
    k = jnp.repeat(k, group, axis=1)
    v = jnp.repeat(v, group, axis=1)
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    return pv_bhnd(jax.nn.softmax(s, axis=-1), v)


@program(qkv(kv_shape=(B, 2, N, D)),
         "BHND, 4 query heads over 2 KV heads, q reshaped to [B, Hkv, G, N, D]")
def gqa_reshape(q, k, v):
    b, h, n, d = q.shape
    hkv = k.shape[1]
    q = q.reshape(b, hkv, h // hkv, n, d)
    s = jnp.einsum("bkgqd,bknd->bkgqn", q, k) / math.sqrt(d)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bkgqn,bknd->bkgqd", p, v)
    return o.reshape(b, h, n, d)


# --- Softmax written out -----------------------------------------------------


@program(qkv(dtype="f32"), "BHND, f32, softmax written out with max, exp, sum")
def manual_softmax(q, k, v):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    m = jnp.max(s, axis=-1, keepdims=True)
    e = jnp.exp(s - m)
    p = e / e.sum(axis=-1, keepdims=True)
    return pv_bhnd(p, v)


@program(qkv(), "BHND, exp(s - max) @ v, divided by the row sum afterwards")
def normalize_after_pv(q, k, v):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    return pv_bhnd(e, v) / e.sum(axis=-1)[..., None]


# --- Other normalizers and epilogues -----------------------------------------


@program(qkv(), "BHND, sigmoid attention: sigmoid(s - log N) @ v")
def sigmoid(q, k, v):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    b = -math.log(s.shape[-1])
    return pv_bhnd(jax.nn.sigmoid(s + b), v)


@program(qkv() + [((H,), "f32")],
         "BHND, a per-head sink logit [H] f32 joins the softmax, its column dropped; causal")
def attention_sink(q, k, v, sinks):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    s = jnp.where(jnp.tril(jnp.ones((n, n), dtype=bool)), s, -jnp.inf)
    sink_col = jnp.broadcast_to(sinks[None, :, None, None], s.shape[:-1] + (1,))
    p = jax.nn.softmax(jnp.concatenate([s, sink_col], axis=-1), axis=-1)
    p = p[..., :-1].astype(v.dtype)
    return pv_bhnd(p, v)


@program(qkv((B, H, N, 128)) + [((B, H, N, 128), "bf16")],
         "BHND, D=128, output gated by sigmoid(gate), gate an input [B, H, N, D]")
def gated(q, k, v, gate):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    o = pv_bhnd(jax.nn.softmax(s, axis=-1), v)
    return o * jax.nn.sigmoid(gate)


@program(qkv() + [((1, H, N, N), "f32"), ((B, 1, 1, N), "f32"), (BHND, "bf16")],
         "BHND, Evoformer row attention: pair bias [1, H, N, N] + mask bias "
         "[B, 1, 1, N] on the logits, output gated by sigmoid(gate)")
def evoformer(q, k, v, pair, mask_bias, gate):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1]) + pair + mask_bias
    o = pv_bhnd(jax.nn.softmax(s, axis=-1).astype(v.dtype), v)
    return o * jax.nn.sigmoid(gate)


@program([(BHND, "bf16")] * 5,
         "BHND, differential attention (softmax(s1) - 0.5 softmax(s2)) @ v; "
         "inputs q1, k1, q2, k2, v")
def differential(q1, k1, q2, k2, v):
    lam = 0.5
    scale = 1.0 / math.sqrt(q1.shape[-1])
    p1 = jax.nn.softmax(qk_bhnd(q1, k1) * scale, axis=-1)
    p2 = jax.nn.softmax(qk_bhnd(q2, k2) * scale, axis=-1)
    return pv_bhnd(p1 - lam * p2, v)


IPA_POINTS = 4


@program(qkv() + [((B, H, N, IPA_POINTS, 3), "bf16")] * 2 + [((H,), "f32")],
         "BHND, IPA-style logits: q.k / sqrt(D) - softplus(gamma[h]) * w / 2 * "
         "sum over 4 points of |q_pts - k_pts|^2 (points [B, H, N, 4, 3], in f32)")
def ipa(q, k, v, q_pts, k_pts, gamma):
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1])
    diff = (q_pts.astype(jnp.float32)[:, :, :, None]
            - k_pts.astype(jnp.float32)[:, :, None, :])
    dist = jnp.sum(diff * diff, axis=(-2, -1))
    # AlphaFold's point weight sqrt(2 / (9 P)) and a softplus head weight.
    w = jnp.log(1.0 + jnp.exp(gamma)) * math.sqrt(2.0 / (9 * IPA_POINTS)) / 2
    s = s - w[None, :, None, None] * dist
    return pv_bhnd(jax.nn.softmax(s, axis=-1).astype(v.dtype), v)


ROPE_D = 32


@program(qkv() + [((B, H, N, ROPE_D), "bf16"), ((B, 1, N, ROPE_D), "bf16")],
         "BHND, MLA-style decoupled RoPE: q.k / sqrt(D) + 0.3 * q_pe.k_pe, "
         "k_pe [B, 1, N, 32] shared by the heads; causal")
def mla_rope(q, k, v, q_pe, k_pe):
    rope = jnp.einsum("bhqr,bxkr->bhqk", q_pe, k_pe)
    s = qk_bhnd(q, k) / math.sqrt(q.shape[-1]) + 0.3 * rope
    n = q.shape[2]
    causal = jnp.tril(jnp.ones((n, n), dtype=bool))
    s = jnp.where(causal, s, -jnp.inf)
    return pv_bhnd(jax.nn.softmax(s, axis=-1).astype(v.dtype), v)


# --- jax.nn.dot_product_attention (BNHD) -------------------------------------


@program(qkv(BNHD), "BNHD, jax.nn.dot_product_attention")
def dpa_plain(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, implementation="xla")


@program(qkv(BNHD), "BNHD, jax.nn.dot_product_attention, is_causal=True")
def dpa_causal(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")


@program(qkv(BNHD) + [((B, H, N, N), "f32")],
         "BNHD, jax.nn.dot_product_attention with a bias [B, H, T, S] f32")
def dpa_bias(q, k, v, b):
    return jax.nn.dot_product_attention(q, k, v, bias=b, implementation="xla")


@program(qkv(BNHD) + [((B, 1, N, N), "bool")],
         "BNHD, jax.nn.dot_product_attention with a boolean mask [B, 1, T, S]")
def dpa_mask(q, k, v, mask):
    return jax.nn.dot_product_attention(q, k, v, mask=mask, implementation="xla")


@program(qkv(BNHD, kv_shape=(B, N, 1, D)),
         "BNHD, jax.nn.dot_product_attention, 4 query heads over 1 KV head")
def dpa_gqa(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, implementation="xla")


@program(qkv((B, 200, H, 128), dtype="f16"),
         "BNHD, f16, D=128, N=200, jax.nn.dot_product_attention")
def dpa_f16_d128(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, implementation="xla")


# --- Beyond attention: the reference path ------------------------------------


@program(qkv(BNHD) + [((H * D, 64), "bf16")],
         "BNHD, jax.nn.dot_product_attention, then an output projection "
         "[H*D, 64]: the projection takes the reference path")
def dpa_projection(q, k, v, w):
    o = jax.nn.dot_product_attention(q, k, v, implementation="xla")
    return o.reshape(B, N, H * D) @ w


@program([((B, N, 64), "f32"), ((64,), "f32"), ((64,), "f32")],
         "not attention: layer norm over the last dim (the reference path)")
def layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * jax.lax.rsqrt(var + 1e-5) * g + b


# --- Export ------------------------------------------------------------------


def header():
    return f"// Generated by scripts/jax_fixtures.py (jax {jax.__version__}) -- do not edit.\n"


def export(outdir, generic):
    os.makedirs(outdir, exist_ok=True)
    index = {}
    for name, prog in PROGRAMS.items():
        lowered = prog.lower()
        with open(os.path.join(outdir, f"{name}.stablehlo.mlir"), "w") as f:
            f.write(header() + lowered.as_text())
        if generic:
            module = lowered.compiler_ir("stablehlo")
            with open(os.path.join(outdir, f"{name}.generic.mlir"), "w") as f:
                f.write(header() + module.operation.get_asm(print_generic_op_form=True))
        index[name] = {
            "inputs": [{"name": arg, "shape": list(shape), "dtype": dtype}
                       for arg, (shape, dtype) in zip(prog.arg_names, prog.inputs)],
            "description": prog.description,
        }
    with open(os.path.join(outdir, "index.json"), "w") as f:
        entries = [f"  {json.dumps(name)}: {json.dumps(entry)}" for name, entry in index.items()]
        f.write("{\n" + ",\n".join(entries) + "\n}\n")
    return index


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--generic", action="store_true",
                        help="also write <name>.generic.mlir in the generic op form")
    args = parser.parse_args()
    index = export(args.outdir, args.generic)
    print(f"wrote {len(index)} programs to {args.outdir}")


if __name__ == "__main__":
    main()
