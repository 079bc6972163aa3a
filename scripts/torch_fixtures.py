#!/usr/bin/env python3
"""Attention programs written in PyTorch the way users write them, and their
`flashlight.export` JSON graphs: the input of Flashlight's JSON graph importer.

`PROGRAMS` maps a name to a `Program`: the PyTorch function `fn(*args)`, the
example inputs `inputs` (a list of (shape, dtype) with dtype one of "bf16",
"f16", "f32", "i32", "bool") and a one-line `description`.

Layouts: BHND is [batch, heads, seq, dim], the layout of
`F.scaled_dot_product_attention`; BNHD is [batch, seq, heads, dim]. Unless a
description says otherwise: batch 2, 4 query heads, sequence 128, head dim
64, bf16.

    python3 scripts/torch_fixtures.py OUTDIR [--device cpu|cuda] [NAME ...]

writes OUTDIR/<name>.json (flashlight-graph v1, docs/json-graph.md), the
constants a program captures as OUTDIR/<name>.<constant>.bin, and
OUTDIR/index.json ({name: {"inputs": [{"name", "dtype", "shape"}, ...],
"constants": [...], "targets": [...], "description"}}; with NAMEs given,
the other programs' entries already there are kept), and prints the
distinct ATen targets of each program. Export traces with fake tensors, so
the CPU is enough (the default); a program whose CPU export fails is
exported on CUDA when CUDA is there.
"""

import argparse
import json
import math
import os
import sys
import traceback
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import flashlight  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_common import BHND, BNHD, B, D, H, N, qkv, registry  # noqa: E402

DTYPES = {
    "bf16": torch.bfloat16,
    "f16": torch.float16,
    "f32": torch.float32,
    "i32": torch.int32,
    "bool": torch.bool,
}


@dataclass(frozen=True)
class Program:
    fn: Callable
    inputs: list  # [(shape tuple, dtype string)]
    description: str

    def example_args(self, device):
        """Zero tensors of the declared shapes and dtypes (export only looks
        at their metadata)."""
        return [torch.zeros(shape, dtype=DTYPES[dtype], device=device)
                for shape, dtype in self.inputs]


PROGRAMS = {}
program = registry(PROGRAMS, Program)


# A tensor captured from the enclosing scope (a relative-position bias made
# once, e.g. at model construction): export lifts it into a constant.
CAPTURED_BIAS = torch.randn(H, N, N, generator=torch.Generator().manual_seed(0))


# --- F.scaled_dot_product_attention ------------------------------------------


@program(qkv(), "BHND, F.scaled_dot_product_attention")
def sdpa_plain(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


@program(qkv((B, H, 200, D)), "BHND, N=200, F.scaled_dot_product_attention, is_causal=True")
def sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@program(qkv() + [((B, 1, N, N), "bool")],
         "BHND, F.scaled_dot_product_attention with a boolean attn_mask [B, 1, N, N] (True keeps)")
def sdpa_mask_bool(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@program(qkv() + [((B, H, N, N), "f32")],
         "BHND, F.scaled_dot_product_attention with an additive float attn_mask [B, H, N, N] f32")
def sdpa_mask_float(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@program(qkv(), "BHND, F.scaled_dot_product_attention, scale=0.3")
def sdpa_scale(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, scale=0.3)


@program(qkv(kv_shape=(B, 2, N, D)),
         "BHND, F.scaled_dot_product_attention, enable_gqa=True: 4 query heads over 2 KV heads")
def sdpa_gqa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


# --- Written out with matmul and softmax -------------------------------------


@program(qkv(), "BHND, (q @ k^T) * D**-0.5, torch.softmax, @ v")
def matmul_softmax(q, k, v):
    s = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    p = torch.softmax(s, dim=-1)
    return p @ v


@program(qkv(), "BHND, softmax written out: max(dim, keepdim).values, exp, sum, div")
def manual_softmax(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = s.max(dim=-1, keepdim=True).values
    e = torch.exp(s - m)
    p = e / e.sum(dim=-1, keepdim=True)
    return p @ v


@program(qkv((B, H, 200, D)), "BHND, N=200, causal: masked_fill(~tril(ones(N, N, bool)), -inf)")
def masked_fill_causal(q, k, v):
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    n = s.shape[-1]
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool, device=q.device))
    s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@program(qkv(), "BHND, causal: torch.where(i[:, None] >= j[None, :], s, -inf) from arange")
def where_mask(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    i = torch.arange(s.shape[-2], device=q.device)
    j = torch.arange(s.shape[-1], device=q.device)
    s = torch.where(i[:, None] >= j[None, :], s, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@program(qkv(BNHD), "BNHD, transposed to BHND for F.scaled_dot_product_attention and back")
def bnhd_layout(q, k, v):
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v)
    return o.transpose(1, 2)


@program(qkv(kv_shape=(B, 2, N, D)),
         "BHND, 4 query heads over 2 KV heads: k[:, :, None].expand(...).reshape(B, H, N, D)")
def gqa_expand(q, k, v):
    b, h, n, d = q.shape
    hkv = k.shape[1]
    k = k[:, :, None].expand(b, hkv, h // hkv, n, d).reshape(b, h, n, d)
    v = v[:, :, None].expand(b, hkv, h // hkv, n, d).reshape(b, h, n, d)
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    return torch.softmax(s, dim=-1) @ v


# --- Score modifications -----------------------------------------------------


@program(qkv(), "BHND, Gemma-style soft-cap tanh(s / 30) * 30; causal via masked_fill")
def softcap(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    s = torch.tanh(s / 30.0) * 30.0
    n = s.shape[-1]
    causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~causal, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@program(qkv() + [((H,), "f32")],
         "BHND, ALiBi: -slopes[h] * |i - j|, slopes an input [H] f32; causal")
def alibi(q, k, v, slopes):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    i = torch.arange(n, device=q.device)[:, None]
    j = torch.arange(n, device=q.device)[None, :]
    bias = -slopes[:, None, None] * (i - j).abs()
    s = (s + bias).masked_fill(j > i, float("-inf"))
    # The f32 bias promotes the scores to f32: back to v's type for P V.
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


@program(qkv(), "BHND, sigmoid attention: sigmoid(s - log N) @ v")
def sigmoid_attn(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    b = -math.log(s.shape[-1])
    return torch.sigmoid(s + b) @ v


@program(qkv() + [(BHND, "bf16")],
         "BHND, F.scaled_dot_product_attention gated by sigmoid(gate), gate an input [B, H, N, D]")
def gated(q, k, v, gate):
    return F.scaled_dot_product_attention(q, k, v) * torch.sigmoid(gate)


@program([(BHND, "bf16")] * 5,
         "BHND, differential attention (softmax(s1) - 0.5 softmax(s2)) @ v; "
         "inputs q1, k1, q2, k2, v")
def differential(q1, k1, q2, k2, v):
    scale = q1.shape[-1] ** -0.5
    p1 = torch.softmax(q1 @ k1.transpose(-2, -1) * scale, dim=-1)
    p2 = torch.softmax(q2 @ k2.transpose(-2, -1) * scale, dim=-1)
    return (p1 - 0.5 * p2) @ v


@program(qkv(), "BHND, a bias [H, N, N] f32 captured from the enclosing scope (a constant)")
def captured_bias(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + CAPTURED_BIAS
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


def t5_bucket(rel, num_buckets=32, max_distance=128):
    """T5's bidirectional relative-position bucket of rel = kv - q (HF
    transformers' T5Attention._relative_position_bucket), on int64 tensors."""
    num_buckets //= 2
    base = (rel > 0).to(torch.int64) * num_buckets
    dist = torch.abs(rel)
    max_exact = num_buckets // 2
    large = max_exact + (
        torch.log(dist.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.int64)
    large = torch.minimum(large, torch.full_like(large, num_buckets - 1))
    return base + torch.where(dist < max_exact, dist, large)


@program(qkv() + [((H, 32), "f32")],
         "BHND, T5 relative bias: table[:, bucket(kv - q)] (advanced indexing), "
         "table [H, 32] f32, T5's log-spaced buckets; no scale, no mask")
def t5_bias(q, k, v, table):
    s = q @ k.transpose(-2, -1)
    n = s.shape[-1]
    pos = torch.arange(n, device=q.device)
    s = s + table[:, t5_bucket(pos[None, :] - pos[:, None])]
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


@program(qkv() + [((H,), "f32")],
         "BHND, gpt-oss-style sinks: softmax over cat(s, sinks[h] column) in f32, "
         "the sink column dropped ([..., :-1]); causal")
def attention_sink(q, k, v, sinks):
    b, h, n, _ = q.shape
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~causal, float("-inf"))
    col = sinks.reshape(1, -1, 1, 1).expand(b, h, n, 1)
    p = torch.softmax(torch.cat([s.to(sinks.dtype), col], dim=-1), dim=-1)[..., :-1]
    return p.to(v.dtype) @ v


IPA_POINTS = 4


@program(qkv() + [((B, H, N, IPA_POINTS, 3), "bf16")] * 2 + [((H,), "f32")],
         "BHND, IPA-style logits: q.k / sqrt(D) - softplus(gamma[h]) * w / 2 * "
         "sum over 4 points of |q_pts - k_pts|^2 (points [B, H, N, 4, 3], in f32)")
def ipa(q, k, v, q_pts, k_pts, gamma):
    s = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    diff = q_pts.float()[:, :, :, None] - k_pts.float()[:, :, None, :]
    dist = (diff * diff).sum(dim=(-2, -1))
    w = torch.log(1 + torch.exp(gamma)) * (2.0 / (9 * IPA_POINTS)) ** 0.5 / 2
    s = s.float() - w.view(1, -1, 1, 1) * dist
    return torch.softmax(s, dim=-1).to(v.dtype) @ v


# --- Beyond attention: the reference path ------------------------------------


@program(qkv() + [((H * D, 64), "bf16")],
         "BHND, F.scaled_dot_product_attention, then an output projection "
         "[H*D, 64]: the projection takes the reference path")
def sdpa_projection(q, k, v, w):
    o = F.scaled_dot_product_attention(q, k, v)
    return o.transpose(1, 2).reshape(B, N, H * D) @ w


@program([((B, N, 64), "f32"), ((64,), "f32"), ((64,), "f32")],
         "not attention: layer norm written out over the last dim (the "
         "reference path)")
def layer_norm(x, g, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) * torch.rsqrt(var + 1e-5) * g + b


# --- Export ------------------------------------------------------------------


def export_one(name, prog, outdir, device):
    """Exports one program on `device`; returns (graph, device used)."""
    path = os.path.join(outdir, f"{name}.json")
    try:
        return flashlight.export(prog.fn, *prog.example_args(device), path=path,
                                 decompose=False), device
    except Exception:
        if device != "cpu" or not torch.cuda.is_available():
            raise
        print(f"{name}: CPU export failed, retrying on CUDA:\n{traceback.format_exc()}",
              file=sys.stderr)
        global CAPTURED_BIAS
        bias = CAPTURED_BIAS
        CAPTURED_BIAS = bias.cuda()
        try:
            return flashlight.export(prog.fn, *prog.example_args("cuda"), path=path,
                                     decompose=False), "cuda"
        finally:
            CAPTURED_BIAS = bias


def export(outdir, device="cpu", names=None):
    os.makedirs(outdir, exist_ok=True)
    index, failed = {}, []
    for name, prog in PROGRAMS.items():
        if names and name not in names:
            continue
        try:
            graph, used = export_one(name, prog, outdir, device)
        except Exception:
            print(f"{name}: export failed:\n{traceback.format_exc()}", file=sys.stderr)
            failed.append(name)
            continue
        targets = sorted({n["target"] for n in graph["nodes"]})
        index[name] = {
            "inputs": graph["inputs"],
            "constants": [c["name"] for c in graph["constants"]],
            "targets": targets,
            "description": prog.description + ("" if used == "cpu" else f" (exported on {used})"),
        }
        print(f"{name}: {' '.join(targets)}")
    index_path = os.path.join(outdir, "index.json")
    listed = index
    if names and os.path.exists(index_path):
        # Only some programs re-exported: keep the others' entries.
        with open(index_path) as f:
            listed = json.load(f)
        listed.update(index)
        listed = {name: listed[name] for name in PROGRAMS if name in listed}
    with open(index_path, "w") as f:
        entries = [f"  {json.dumps(name)}: {json.dumps(entry)}" for name, entry in listed.items()]
        f.write("{\n" + ",\n".join(entries) + "\n}\n")
    return index, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--device", default="cpu", help="where the example inputs live")
    parser.add_argument("names", nargs="*", help="export only these programs")
    args = parser.parse_args()
    index, failed = export(args.outdir, args.device, args.names)
    print(f"wrote {len(index)} programs to {args.outdir} (torch {torch.__version__})")
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
