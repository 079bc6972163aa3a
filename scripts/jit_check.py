#!/usr/bin/env python3
"""The GPU check of flashlight.jit: eager calls, torch.compile, CUDA graphs.

    scripts/jit_check.py fill CACHE      # where the compiler is (CPU tensors)
    scripts/jit_check.py run CACHE OUT.json   # on the GPU machine

`fill` exports and compiles every program below for its shapes into the
disk cache CACHE (FLASHLIGHT_CACHE); the GPU machine has no compiler, so
`run` must find every kernel there (a miss is an error). `run` checks, per
program, against the function itself run by PyTorch in f32 on the same
inputs (relative Frobenius error, bf16 tolerance 2e-2):

- `eager`: the decorated function called on CUDA tensors;
- `views`: called on [B, N, H, D] storage seen as [B, H, N, D] (the
  kernel reads the strides; nothing is copied for a permutation);
- `compile`: a torch.compile'd model around it (projections in PyTorch,
  the attention the custom op), fullgraph;
- `cuda_graph`: captured in a CUDA graph after one warm-up call, replayed
  on new inputs copied into the captured ones;
- `compile_backward`: a training step of the torch.compile'd model (the
  backward through the gradient program), its gradients against the f32
  model's within bf16 eager's distance from them; `compile_backward_fused`
  the same with dK and dV in one kernel (`--fuse-key-value-from=0`), which
  leave the gradient op as that kernel's output, sliced in the graph;

and `flashlight.varlen_attention` on packed sequences (3 sequences given by
their offsets, GQA) against SDPA run on each sequence alone.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402
from check_common import main, write_result  # noqa: E402

B, H, N, D = 2, 4, 256, 64


def causal_attention(q, k, v):
    n = q.shape[2]
    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ v


def softcap_bnhd(q, k, v):
    """[B, N, H, D] in and out, soft-capped scores (Gemma 2)."""
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    s = (q @ k.transpose(-1, -2)) * 0.125
    s = 30.0 * torch.tanh(s / 30.0)
    return (torch.softmax(s, -1) @ v).transpose(1, 2)


def gqa_sliding(q, k, v):
    """4 query heads per KV head, causal window of 64 keys."""
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    v = v.repeat_interleave(q.shape[1] // v.shape[1], dim=1)
    n = q.shape[2]
    i = torch.arange(n, device=q.device)
    keep = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < 64)
    s = (q @ k.transpose(-1, -2)) * 0.125
    s = torch.where(keep, s, torch.finfo(s.dtype).min)
    return torch.softmax(s, -1) @ v


def rmsnorm_causal(q, k, v):
    """RMS-normalized queries (a row reduction on the reference path: a
    warp per row), then causal attention."""
    qf = q.float()
    q = (qf * torch.rsqrt(qf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(q.dtype)
    return causal_attention(q, k, v)


PROGRAMS = {
    "causal": (causal_attention, [(B, H, N, D)] * 3),
    "softcap_bnhd": (softcap_bnhd, [(B, N, H, D)] * 3),
    "gqa_sliding": (gqa_sliding, [(B, 8, N, D), (B, 2, N, D), (B, 2, N, D)]),
    "rmsnorm_causal": (rmsnorm_causal, [(B, H, N, D)] * 3),
}


def inputs(shapes, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g).to(device, torch.bfloat16) for s in shapes]


# Packed sequences (flashlight.varlen_attention): 3 sequences, GQA 8 / 2.
CU_SEQLENS = [0, 100, 180, 300]


def varlen_inputs(device, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(300, 8, D, generator=g).to(device, torch.bfloat16)
    k, v = (torch.randn(300, 2, D, generator=g).to(device, torch.bfloat16) for _ in range(2))
    return q, k, v, torch.tensor(CU_SEQLENS, dtype=torch.int32, device=device)


def varlen_reference(q, k, v):
    """Each sequence on its own, by SDPA in f32."""
    outs = []
    for a, b in zip(CU_SEQLENS[:-1], CU_SEQLENS[1:]):
        qs, ks, vs = (x[a:b].float().transpose(0, 1) for x in (q, k, v))
        ks, vs = ks.repeat_interleave(4, 0), vs.repeat_interleave(4, 0)
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            qs, ks, vs, is_causal=True).transpose(0, 1))
    return torch.cat(outs)


def fill(cache):
    os.environ["FLASHLIGHT_CACHE"] = cache
    for name, (fn, shapes) in PROGRAMS.items():
        jf = flashlight.jit(fn)
        print(f"{name}: {jf.prepare(*inputs(shapes, 'cpu'))} ({jf.compiles} compiled)")
    flashlight.varlen_attention(*varlen_inputs("cpu"))  # compiles off the GPU
    print("varlen: cache filled")
    # Inputs that require grad: the gradient program too (compile_backward).
    for flags in ((), FUSED):
        flashlight.jit(causal_attention, flags=flags)(
            *[a.requires_grad_() for a in inputs([(B, H, N, D)] * 3, "cpu")])
    print("causal: gradient programs cached")


# dK and dV in one kernel at this length (by default from N = 2048): under
# torch.compile they leave flashlight::jit_grad as that kernel's output,
# sliced in the traced graph.
FUSED = ("--fuse-key-value-from=0",)


def rel_err(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


class Model(torch.nn.Module):
    """Projections around a jit attention: what stays in PyTorch."""

    def __init__(self, attention):
        super().__init__()
        self.attention = attention
        self.wq = torch.nn.Linear(H * D, H * D, bias=False)
        self.wo = torch.nn.Linear(H * D, H * D, bias=False)

    def forward(self, x, k, v):
        q = self.wq(x).view(B, N, H, D).transpose(1, 2)
        o = self.attention(q, k, v)
        return self.wo(o.transpose(1, 2).reshape(B, N, H * D))


def run(cache, out_path):
    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    records, failures = [], 0

    def record(name, mode, err, **extra):
        nonlocal failures
        ok = err is not None and err <= 2e-2
        failures += not ok
        records.append({"program": name, "mode": mode, "rel_err": err,
                        "pass": ok, **extra})
        print(f"{name:<14} {mode:<11} {'pass' if ok else 'FAIL'} rel_err={err}", flush=True)

    for name, (fn, shapes) in PROGRAMS.items():
        jf = flashlight.jit(fn)
        args = inputs(shapes, "cuda", seed=1)
        with torch.no_grad():
            ref = fn(*[a.float() for a in args]).float()
            record(name, "eager", rel_err(jf(*args), ref))
            # The same values in [B, N, H, D] storage seen as the function's
            # layout: a permutation the kernel reads through its strides.
            views = [a.transpose(1, 2).contiguous().transpose(1, 2) for a in args]
            record(name, "views", rel_err(jf(*views), ref),
                   contiguous=[v.is_contiguous() for v in views])
            # CUDA graph: capture after a warm-up call, replay on new inputs.
            static = [a.clone() for a in args]
            jf(*static)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = jf(*static)
            fresh = inputs(shapes, "cuda", seed=2)
            for s, f in zip(static, fresh):
                s.copy_(f)
            graph.replay()
            torch.cuda.synchronize()
            ref2 = fn(*[a.float() for a in fresh]).float()
            record(name, "cuda_graph", rel_err(captured, ref2))
        if jf.compiles:
            raise RuntimeError(f"{name}: compiled on the GPU machine (cache miss)")

    # Packed sequences: one kernel, the sequences from the offsets.
    with torch.no_grad():
        q, k, v, cu = varlen_inputs("cuda", seed=4)
        record("varlen", "eager", rel_err(flashlight.varlen_attention(q, k, v, cu),
                                          varlen_reference(q, k, v)))

    # torch.compile around the attention: projections stay in PyTorch.
    jf = flashlight.jit(causal_attention)
    model = Model(jf).to("cuda", torch.bfloat16).eval()
    x = torch.randn(B, N, H * D, device="cuda", dtype=torch.bfloat16)
    k, v = inputs([(B, H, N, D)] * 2, "cuda", seed=3)
    with torch.no_grad():
        compiled = torch.compile(model, fullgraph=True)
        out = compiled(x, k, v)
        model.attention = lambda q, k, v: causal_attention(q.float(), k.float(), v.float())
        ref = Model.forward(model.float(), x.float(), k.float(), v.float()).float()
    record("causal", "compile", rel_err(out, ref))

    # A training step under torch.compile: the backward traced through
    # flashlight::jit_grad; the gradients of wq, k and v against the f32
    # model's, within bf16 eager's distance from it.
    def step(m, attention, dtype, compiled):
        m = Model(attention).to("cuda", dtype)
        m.load_state_dict(model.state_dict())
        xs = [t.to(dtype).clone().requires_grad_(i > 0) for i, t in enumerate((x, k, v))]
        f = torch.compile(m, fullgraph=True) if compiled else m
        out = f(*xs)
        out.float().backward(dout.float().to(out.dtype))
        return [m.wq.weight.grad, xs[1].grad, xs[2].grad]

    model.attention = jf
    dout = torch.randn(B, N, H * D, device="cuda", generator=torch.Generator(
        device="cuda").manual_seed(5))
    eager_attention = lambda q, k, v: causal_attention(q, k, v)  # noqa: E731
    ref = step(model, eager_attention, torch.float32, False)
    noise = max(rel_err(g, r) for g, r in zip(step(model, eager_attention, torch.bfloat16,
                                                   False), ref))
    for name, attention in (("compile_backward", jf),
                            ("compile_backward_fused",
                             flashlight.jit(causal_attention, flags=FUSED))):
        ours = step(model, attention, torch.bfloat16, True)
        err = max(rel_err(g, r) for g, r in zip(ours, ref))
        record("causal", name, err if err <= max(2e-2, 1.5 * noise) else 1.0,
               grad_rel_err=err, eager_bf16_grad_rel_err=noise)

    return write_result(out_path, "jit_check", records, failures)


if __name__ == "__main__":
    main(__doc__, fill, run)
