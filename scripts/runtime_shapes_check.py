#!/usr/bin/env python3
"""The GPU check and benchmark of runtime shapes (flashlight.jit).

    scripts/runtime_shapes_check.py fill CACHE           # build machine
    scripts/runtime_shapes_check.py run CACHE OUT.json   # GPU machine

Each program below is a `flashlight.jit` function called first at two
shapes (the second compiles the kernel with runtime shapes against the
first one's export), then at shapes it was never compiled for: lengths of
1, lengths that are not multiples of any tile, other batch sizes, and the
benchmark's long ones. `run` must not compile anything (the cache filled by
`fill` serves), checks every output (NaN-poisoned before the launch)
against the function itself in f32 on the same inputs (relative Frobenius
error, bf16 tolerance 2e-2), and times the kernel with runtime shapes
against the kernel compiled for the shape (`runtime_shapes=False`) at the
benchmark shapes: CUDA-graph replays of 10 calls each, alternating rounds,
median. RS_PROGRAMS (comma-separated names) runs a subset, in both steps.
"""

import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402
from check_common import main, write_result  # noqa: E402
from jit_check import gqa_sliding  # noqa: E402


def causal_bnhd(q, k, v):
    """The caller's [B, N, H, D] layout, causal (SDPA)."""
    q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return o.transpose(1, 2)


def vanilla(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def cross(q, k, v):
    """Queries and keys of independent lengths (M != N)."""
    s = (q @ k.transpose(-1, -2)).float() * q.shape[-1] ** -0.5
    return torch.softmax(s, -1).to(v.dtype) @ v


def document(q, k, v, ids):
    """Causal within each document; ids [B, N] (a captured tensor whose
    extents follow B and N)."""
    n = q.shape[2]
    pos = torch.arange(n, device=q.device)
    keep = (ids[:, None, :, None] == ids[:, None, None, :]) & (pos[:, None] >= pos[None, :])
    s = (q @ k.transpose(-1, -2)).float() * q.shape[-1] ** -0.5
    s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1).to(v.dtype) @ v


def pair_bias(q, k, v, bias):
    """An additive [B, H, N, N] bias (Evoformer's pair bias)."""
    s = (q @ k.transpose(-1, -2)).float() * q.shape[-1] ** -0.5 + bias
    return torch.softmax(s, -1).to(v.dtype) @ v


def bhnd(h, d):
    return lambda b, n: [(b, h, n, d)] * 3


def bnhd(h, d):
    return lambda b, n: [(b, n, h, d)] * 3


# name: (function, shapes(b, n) -> argument shapes, the two compile
# shapes, the check shapes, the benchmark shapes (b, n) with FLOPs per
# (b, n)). Cross attention's n is (m, n).
PROGRAMS = {
    "causal_bnhd_d128": (causal_bnhd, bnhd(16, 128), [(2, 256), (3, 384)],
                         [(1, 1), (2, 77), (3, 130), (1, 1000), (2, 2049), (1, 512)],
                         [(8, 2048), (2, 8192)]),
    "causal_bnhd_d64": (causal_bnhd, bnhd(32, 64), [(2, 256), (3, 384)],
                        [(1, 33), (2, 1000)], [(2, 8192)]),
    "vanilla_d128": (vanilla, bhnd(16, 128), [(2, 256), (3, 384)],
                     [(1, 1), (2, 200), (1, 1031), (2, 1024)], [(8, 2048), (2, 8192)]),
    # A persistent grid with Q copied ahead (128 x 128 at D = 64): blocks
    # loop over up to 2 * 32 * 33 work tiles.
    "vanilla_d64": (vanilla, bhnd(32, 64), [(2, 256), (3, 384)],
                    [(1, 1), (2, 200), (1, 1031), (2, 4100)], [(8, 2048)]),
    "cross_d64": (cross, lambda b, mn: [(b, 4, mn[0], 64)] + [(b, 4, mn[1], 64)] * 2,
                  [(2, (128, 256)), (3, (192, 320))],
                  [(1, (1, 1)), (2, (300, 77)), (1, (64, 1000)), (2, (1000, 64)),
                   (1, (128, 512))], []),
    "document_d128": (document, lambda b, n: bhnd(16, 128)(b, n) + [(b, n)],
                      [(2, 256), (3, 384)], [(1, 1), (2, 130), (1, 2049), (1, 1024)],
                      [(2, 8192)]),
    "gqa_sliding_d64": (gqa_sliding, lambda b, n: [(b, 8, n, 64), (b, 2, n, 64), (b, 2, n, 64)],
                        [(2, 256), (3, 384)], [(1, 1), (2, 100), (1, 1000)], []),
    "pair_bias_d64": (pair_bias, lambda b, n: bhnd(4, 64)(b, n) + [(b, 4, n, n)],
                      [(2, 256), (3, 384)], [(1, 1), (2, 130), (1, 700), (1, 512)], []),
    # Head dims that fill their last 64-column atom in part (wgmma, TMA
    # boxes past the tensor's columns).
    "causal_bnhd_d80": (causal_bnhd, bnhd(8, 80), [(2, 256), (3, 384)],
                        [(1, 1), (2, 77), (1, 1000), (2, 2049)], []),
    "vanilla_d96": (vanilla, bhnd(8, 96), [(2, 256), (3, 384)],
                    [(1, 1), (2, 200), (1, 1031), (2, 4100)], []),
}


def selected():
    """PROGRAMS, or the RS_PROGRAMS subset of it."""
    names = os.environ.get("RS_PROGRAMS")
    if not names:
        return PROGRAMS
    return {n: PROGRAMS[n] for n in names.split(",")}


def inputs(name, b, n, device, seed=0):
    shapes = PROGRAMS[name][1](b, n)
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in shapes:
        if name.startswith("document") and len(s) == 2:
            # Contiguous runs of document ids, 4 documents on average.
            ids = torch.sort(torch.randint(0, 4, s, generator=g), dim=-1).values
            out.append(ids.to(device, torch.int32))
        elif name.startswith("pair_bias") and s == shapes[-1]:
            out.append(torch.randn(s, generator=g).to(device))
        else:
            out.append(torch.randn(s, generator=g).to(device, torch.bfloat16))
    return out


def flops(name, b, n):
    """Of the attention's two products; causal halves them; None where the
    mask keeps a data-dependent share."""
    h, d = {"causal_bnhd_d128": (16, 128), "causal_bnhd_d64": (32, 64),
            "vanilla_d128": (16, 128), "vanilla_d64": (32, 64)}.get(name, (None, None))
    if h is None:
        return None
    return 4 * b * h * n * n * d / (2 if name.startswith("causal") else 1)


def fill(cache):
    os.environ["FLASHLIGHT_CACHE"] = cache
    for name, (fn, _, compiled, checked, timed) in selected().items():
        jf = flashlight.jit(fn)
        for b, n in compiled + checked + timed:
            jf.prepare(*inputs(name, b, n, "cpu"))
        if jf.compiles > 2:
            raise RuntimeError(f"{name}: {jf.compiles} compiles; runtime shapes would take 2")
        static = flashlight.jit(fn, runtime_shapes=False)
        for b, n in timed:
            static.prepare(*inputs(name, b, n, "cpu"))
        print(f"{name}: {jf.compiles} + {static.compiles} compiled", flush=True)


def rel_err(out, ref):
    return ((out.float() - ref).norm() / ref.norm()).item()


def graph_time(fn, args, calls=10, rounds=5):
    """Milliseconds per call: CUDA-graph replays of `calls` calls."""
    fn(*args)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(*args)
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def run(cache, out_path):
    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    flashlight.Kernel.poison = True
    records, failures = [], 0

    def record(ok, **fields):
        nonlocal failures
        failures += not ok
        records.append({**fields, "pass": ok})
        print(" ".join(f"{k}={v}" for k, v in fields.items()), "pass" if ok else "FAIL",
              flush=True)

    for name, (fn, _, compiled, checked, timed) in selected().items():
        jf = flashlight.jit(fn)
        static = flashlight.jit(fn, runtime_shapes=False)
        with torch.no_grad():
            for phase, shapes in (("compiled", compiled), ("checked", checked),
                                  ("timed", timed)):
                for b, n in shapes:
                    args = inputs(name, b, n, "cuda", seed=1)
                    out = jf(*args)
                    manifest = jf._manifests[jf.shape_class(args)]
                    kind = "runtime" if "extents" in open(manifest).read() else "static"
                    # Runtime shapes: the aligned kernel where whole tiles
                    # divide the lengths, else the general one.
                    variant = jf._kernels[manifest]._attention(0).last_variant
                    ref = fn(*[a.float() if a.is_floating_point() else a for a in args]).float()
                    err = rel_err(out, ref)
                    del ref
                    fields = {"variant": name, "B": b, "N": n, "phase": phase,
                              "system": "flashlight", "kernel": kind, "variant_kernel": variant,
                              "rel_err": err}
                    ok = err <= 2e-2
                    if phase == "timed":
                        serve = static(*args)
                        static_err = rel_err(serve, fn(*[a.float() if a.is_floating_point()
                                                         else a for a in args]).float())
                        ok = ok and static_err <= 2e-2
                        # Alternating rounds: runtime shapes, then static.
                        t_rt, t_st = [], []
                        for _ in range(3):
                            t_rt.append(graph_time(jf, args))
                            t_st.append(graph_time(static, args))
                        t_rt, t_st = statistics.median(t_rt), statistics.median(t_st)
                        f = flops(name, b, n)
                        fields.update({
                            "ms_runtime_shapes": round(t_rt, 4), "ms_static": round(t_st, 4),
                            "static_rel_err": static_err,
                            "runtime_over_static": round(t_st / t_rt, 3),
                            "tflops": None if f is None else round(f / t_rt / 1e9, 1),
                            "tflops_static": None if f is None else round(f / t_st / 1e9, 1)})
                    record(ok and kind == ("static" if phase == "compiled" and (b, n) ==
                                           compiled[0] else "runtime"), **fields)
        if jf.compiles or static.compiles:
            raise RuntimeError(f"{name}: compiled on the GPU machine (cache miss)")
    return write_result(out_path, "runtime_shapes_check", records, failures)


if __name__ == "__main__":
    main(__doc__, fill, run)
