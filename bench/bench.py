#!/usr/bin/env python3
"""Flashlight vs FlexAttention (Triton and FLASH backends), FlashAttention-4
and SDPA (flash, cuDNN), in one process.

    bench/bench.py <kernels-dir> <out-dir> [--variants a,b] [--dims 64,128]
                   [--compare LABEL=DIR ...]

Kernels come from bench/prepare.sh. For every variant, head dim and sequence
length (B*N = 16k, H*D = 2048, bf16), the same random inputs go to every
system. Each Flashlight kernel is checked against FlexAttention's output (or
PyTorch math where Flex is absent) before it is timed. Times are the median
of triton.testing.do_bench; TFLOP/s count 4*B*H*N^2*D times the fraction of
(query, key) pairs the mask keeps. Writes <out>/<date>-<gpu>.json (records
{variant, B, H, N, D, dtype, system, ms, tflops, rel_err}), a markdown
table and one PNG per variant. --compare times the kernels of another
bench/prepare.sh directory (e.g. built with EXTRA="--overlap-softmax=false")
in the same process, as system "flashlight_<LABEL>": same-run experiments,
timed in two rounds (the second in the opposite order; each build gets the
mean of its two medians). --systems times only the systems named (and the
compared builds); FlexAttention still computes the reference.

Where FlashAttention-4 is importable (`../shared/peers/`), two more systems:
`flex_flash` (FlexAttention with `kernel_options={"BACKEND": "FLASH"}`, FA4
with the same score_mod/mask_mod) and `fa4` (`flash_attn.cute.
flash_attn_func` called directly on [B, N, H, D] copies of the inputs, its
own layout, made before timing) for the variants it takes as arguments
(causal, GQA, a sliding window, a soft-cap).
"""

import argparse
import datetime
import json
import math
import os
import sys
import traceback

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402
from timing import timed  # noqa: E402
from peers import fa4_func  # noqa: E402

torch._dynamo.config.recompile_limit = 10_000
torch._dynamo.config.cache_size_limit = 10_000
flex = torch.compile(flex_attention, dynamic=False)

WINDOW = PREFIX = 256


def mask_mod_for(variant, doc):
    causal = lambda b, h, q, kv: q >= kv  # noqa: E731
    if variant in ("vanilla",):
        return None
    if variant in ("causal", "alibi", "softcap_causal", "gqa"):
        return causal
    if variant == "sliding_window_256":
        return lambda b, h, q, kv: (q >= kv) & (q - kv < WINDOW)
    if variant == "prefix_lm_256":
        return lambda b, h, q, kv: (kv < PREFIX) | (q >= kv)
    if variant == "document_mask":
        return lambda b, h, q, kv: (doc[b, q] == doc[b, kv]) & (q >= kv)
    raise ValueError(variant)


def score_mod_for(variant, slopes):
    if variant == "alibi":
        return lambda s, b, h, q, kv: s + slopes[h] * (kv - q).to(torch.float32)
    if variant == "softcap_causal":
        return lambda s, b, h, q, kv: 30.0 * torch.tanh(s / 30.0)
    return None


def kept_fraction(mask_mod, B, N):
    if mask_mod is None:
        return 1.0
    q = torch.arange(N, device="cuda")[:, None]
    kv = torch.arange(N, device="cuda")[None, :]
    total = 0
    for b in range(B):
        bb = torch.full((), b, device="cuda", dtype=torch.long)
        total += mask_mod(bb, 0, q, kv).sum().item()
    return total / (B * N * N)


def random_documents(B, N, gen, device="cuda"):
    """Document ids per position: random lengths, ordered."""
    doc = torch.empty(B, N, dtype=torch.int32, device=device)
    for b in range(B):
        pos, d = 0, 0
        while pos < N:
            length = int(torch.randint(N // 16, N // 2 + 1, (1,), generator=gen).item())
            doc[b, pos:pos + length] = d
            pos, d = pos + length, d + 1
    return doc


def fa4_options(variant):
    """flash_attn_func's arguments for `variant`, or None where it takes
    none that express it."""
    return {"vanilla": {}, "causal": {"causal": True}, "gqa": {"causal": True},
            "sliding_window_256": {"causal": True, "window_size": (WINDOW - 1, 0)},
            "softcap_causal": {"causal": True, "softcap": 30.0}}.get(variant)


def run_config(kernels, variant, D, N, records, compare=(), systems_wanted=()):
    B, H = 16384 // N, 2048 // D
    Hkv = H // 4 if variant == "gqa" else H
    path = os.path.join(kernels, f"{variant}.d{D}.n{N}.json")
    kernel = flashlight.load(path)
    scale = kernel.manifest["program"]["scale"][0]
    gen = torch.Generator(device="cpu").manual_seed(N + D)
    q = torch.randn(B, H, N, D, generator=gen).to("cuda", torch.bfloat16)
    k = torch.randn(B, Hkv, N, D, generator=gen).to("cuda", torch.bfloat16)
    v = torch.randn(B, Hkv, N, D, generator=gen).to("cuda", torch.bfloat16)
    slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / H) for i in range(H)],
                          device="cuda", dtype=torch.float32)
    doc = random_documents(B, N, gen) if variant == "document_mask" else None
    extra = {"alibi": [slopes], "document_mask": [doc]}.get(variant, [])
    mask_mod, score_mod = mask_mod_for(variant, doc), score_mod_for(variant, slopes)
    frac = kept_fraction(mask_mod, B, N)
    flops = 4.0 * B * H * N * N * D * frac

    block_mask = create_block_mask(mask_mod, B if doc is not None else None, None, N, N) \
        if mask_mod else None
    # A data-dependent mask's block mask is built once, outside the timed
    # call, as FlexAttention's is ("flashlight"); "flashlight_mask_per_call"
    # also runs the block-mask pre-kernel in every call.
    kernel_mask = kernel.build_block_mask(q, k, v, *extra)
    systems = {
        "flashlight": lambda: kernel(q, k, v, *extra, block_mask=kernel_mask),
        "flex": lambda: flex(q, k, v, score_mod=score_mod, block_mask=block_mask,
                             scale=scale, enable_gqa=Hkv != H),
    }
    if kernel_mask is not None:
        systems["flashlight_mask_per_call"] = lambda: kernel(q, k, v, *extra)
    if fa4_func() is not None:
        systems["flex_flash"] = lambda: flex(
            q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale,
            enable_gqa=Hkv != H, kernel_options={"BACKEND": "FLASH"})
        options = fa4_options(variant)
        if options is not None:
            q4, k4, v4 = (x.transpose(1, 2).contiguous() for x in (q, k, v))

            def fa4(options=options):
                out = fa4_func()(q4, k4, v4, softmax_scale=scale, **options)
                return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)
            systems["fa4"] = fa4
    for label, other_dir in compare:
        other_path = os.path.join(other_dir, f"{variant}.d{D}.n{N}.json")
        if not os.path.exists(other_path):  # a subset was prepared there
            continue
        other = flashlight.load(other_path)
        other_mask = other.build_block_mask(q, k, v, *extra)
        systems[f"flashlight_{label}"] = \
            lambda other=other, m=other_mask: other(q, k, v, *extra, block_mask=m)
    compared = {f"flashlight_{label}" for label, _ in compare}
    if variant in ("vanilla", "causal", "gqa"):
        causal = variant != "vanilla"
        for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                              ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            def call(backend=backend, causal=causal):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(
                        q, k, v, is_causal=causal, scale=scale, enable_gqa=Hkv != H)
            systems[name] = call

    reference = systems["flex"]().float()
    if systems_wanted:
        systems = {n: f for n, f in systems.items()
                   if n in systems_wanted or n.startswith("flashlight_")}
    errors, first = {}, {}
    for name, fn in systems.items():
        try:
            out = fn()
            torch.cuda.synchronize()
            if name.startswith("flashlight"):
                first[name] = out.clone()
            errors[name] = ((out.float() - reference).norm() / reference.norm()).item()
            if name.startswith("flashlight") and not errors[name] <= 2e-2:
                raise RuntimeError(f"flashlight output differs from flex: {errors[name]:.3e}")
        except Exception as e:  # a backend that cannot run this case
            print(f"  {variant} D={D} N={N} {name}: {type(e).__name__}: {str(e)[:120]}")
            if name.startswith("flashlight"):
                raise
    # The builds compared (flashlight and flashlight_<label>) are timed in
    # two rounds, the second in the opposite order; each gets the mean of
    # its two medians.
    builds = [n for n in errors if n == "flashlight" or n in compared]
    rounds = builds + builds[::-1] if len(builds) > 1 else builds
    times = {n: [] for n in errors}
    for name in [n for n in errors if n not in builds] + rounds:
        times[name].append(timed(systems[name], warmup=25, rep=100, return_mode="median"))
    # After hundreds of launches (whatever state a kernel keeps between
    # them, such as a tile counter, served each), the same output.
    for name, out in first.items():
        if not torch.equal(systems[name](), out):
            raise RuntimeError(f"{name}: the output changed after the timed calls")
    for name, rel in errors.items():
        ms = sum(times[name]) / len(times[name])
        records.append({"variant": variant, "B": B, "H": H, "N": N, "D": D,
                        "dtype": "bf16", "system": name, "ms": ms,
                        "tflops": flops / ms / 1e9, "rel_err": rel})
        print(f"  {variant:<20} D={D:<4} N={N:<6} {name:<12} {ms:8.3f} ms "
              f"{flops / ms / 1e9:7.1f} TFLOP/s  rel_err={rel:.1e}", flush=True)


def plot(records, path):
    """One PNG: TFLOP/s against N, a row per variant, a column per D."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    systems = ["flashlight", "flashlight_mask_per_call", "flex", "sdpa_flash", "sdpa_cudnn"]
    variants = sorted({r["variant"] for r in records})
    fig, axes = plt.subplots(len(variants), 2, figsize=(10, 3 * len(variants)),
                             squeeze=False)
    for row, variant in enumerate(variants):
        for col, D in enumerate((64, 128)):
            ax = axes[row][col]
            for s in systems:
                pts = sorted((r["N"], r["tflops"]) for r in records
                             if r["variant"] == variant and r["D"] == D and r["system"] == s)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{variant}, D={D}")
            ax.set_ylabel("TFLOP/s")
            ax.legend(fontsize=7)
    axes[-1][0].set_xlabel("N")
    axes[-1][1].set_xlabel("N")
    fig.tight_layout()
    fig.savefig(path, dpi=70)
    plt.close(fig)


def write_outputs(records, out):
    os.makedirs(out, exist_ok=True)
    gpu = torch.cuda.get_device_name().replace(" ", "-")
    stem = os.path.join(out, f"{datetime.date.today()}-{gpu}")
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "commit": os.environ.get("FLASHLIGHT_COMMIT", "unknown"),
            "command": " ".join(sys.argv), "records": records}
    json.dump(meta, open(stem + ".json", "w"), indent=1)
    systems = ["flashlight", "flex", "flex_flash", "fa4", "sdpa_flash", "sdpa_cudnn"]
    systems = [s for s in systems if any(r["system"] == s for r in records)]
    systems += sorted({r["system"] for r in records
                       if r["system"].startswith("flashlight_")})
    lines = [f"GPU: {meta['gpu']}; torch {meta['torch']}; bf16; B*N = 16k; H*D = 2048; "
             "TFLOP/s (median of do_bench), ratio = flashlight / best other", "",
             "| variant | D | N | " + " | ".join(systems) + " | ratio |",
             "| --- | ---: | ---: |" + " ---: |" * (len(systems) + 1)]
    keys = sorted({(r["variant"], r["D"], r["N"]) for r in records})
    for key in keys:
        by = {r["system"]: r["tflops"] for r in records if (r["variant"], r["D"], r["N"]) == key}
        others = [t for s, t in by.items() if not s.startswith("flashlight")]
        ratio = by.get("flashlight", 0) / max(others) if others else float("nan")
        cells = [f"{by[s]:.0f}" if s in by else "–" for s in systems]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + f" | {ratio:.2f} |")
    open(stem + ".md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot(records, stem + ".png")
    return stem


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kernels")
    parser.add_argument("out")
    parser.add_argument("--variants", default="vanilla,causal,alibi,softcap_causal,"
                        "sliding_window_256,document_mask,prefix_lm_256,gqa")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--lengths", default="1024,2048,4096,8192,16384")
    parser.add_argument("--compare", action="append", default=[],
                        metavar="LABEL=DIR", help="more kernels to time, same run")
    parser.add_argument("--systems", default="",
                        help="time only these (comma-separated; the compared "
                        "builds always); FlexAttention still gives the reference")
    args = parser.parse_args()
    systems_wanted = set(filter(None, args.systems.split(",")))
    compare = [tuple(c.split("=", 1)) for c in args.compare]
    records = []
    for variant in args.variants.split(","):
        for D in map(int, args.dims.split(",")):
            for N in map(int, args.lengths.split(",")):
                try:
                    run_config(args.kernels, variant, D, N, records, compare,
                               systems_wanted)
                except Exception:
                    traceback.print_exc()
                    records.append({"variant": variant, "D": D, "N": N,
                                    "system": "flashlight", "error": True})
    write_outputs([r for r in records if not r.get("error")], args.out)
    failed = [r for r in records if r.get("error")]
    print(f"bench: {len(failed)} configuration(s) failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
