#!/usr/bin/env python3
"""Flashlight on the caller's layout vs cuDNN, in one process.

    bench/layout.py <kernels-dir> <out.json> [--variants vanilla,causal]
                    [--dims 64,128] [--lengths 2048,8192] [--command TEXT]
                    [--compare LABEL=DIR ...]

Callers hold q, k, v as [B, N, H, D] storage (HF models after `.view()`,
JAX, FlashAttention) and see them as [B, H, N, D] views. Every system gets
the same views (B * N = 16k, H * D = 2048, bf16):

- `flashlight`: the kernel reads the views through its runtime strides and
  writes the output into a [B, N, H, D] tensor through its view (`out=`):
  no copy anywhere;
- `flashlight_copy`: what a caller had to do before runtime strides: make
  the views contiguous, call, transpose the output back;
- `sdpa_cudnn`: PyTorch's cuDNN attention on the same views;
- `fa4`: FlashAttention-4 (`flash_attn.cute.flash_attn_func`, when
  importable: `../shared/peers/`) on the [B, N, H, D] storage itself, its
  native layout.

Kernels come from bench/prepare.sh (default: runtime strides). --compare
times the kernels of another bench/prepare.sh directory on the same views as
system `flashlight_<LABEL>` (same-run experiments): the builds are timed in
two rounds, the second in the opposite order, and each gets the mean of its
two medians. Before
timing, each output is checked: the strided call must equal the contiguous
call of the same kernel bit for bit, and both must match SDPA (math
backend, f32) within bf16 tolerance; outputs are NaN-filled first. TFLOP/s
count 2*B*H*N^2*(D + Dv) times the fraction of pairs the mask keeps. The
`mla` and `mla_causal` variants (bench/programs/mla*.mlir, D = 192) take V
with 128 columns (Dv); the others Dv = D. Writes {"gpu", "torch", "commit",
"command", "records": [{variant, D, Dv, N, B, H, system, ms, tflops,
rel_err}]}.
"""

import argparse
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402
from timing import timed as bench_timed  # noqa: E402
from peers import fa4_func  # noqa: E402


def commit():
    # The GPU machine's copy of the tree may carry a stale .git: the
    # caller's FLASHLIGHT_COMMIT first.
    if os.environ.get("FLASHLIGHT_COMMIT"):
        return os.environ["FLASHLIGHT_COMMIT"]
    root = os.path.join(os.path.dirname(__file__), "..")
    try:
        return subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("FLASHLIGHT_COMMIT", "unknown")


def run_config(kernels, variant, D, N, records, compare=()):
    B, H = 16384 // N, 2048 // D
    kernel = flashlight.load(os.path.join(kernels, f"{variant}.d{D}.n{N}.json"))
    if not kernel.geometry.get("runtime_strides"):
        raise RuntimeError(f"{variant}.d{D}.n{N}: compiled with static strides")
    # A compared build may cover only some cells.
    builds = {f"flashlight_{label}": flashlight.load(path) for label, path in (
        (label, os.path.join(directory, f"{variant}.d{D}.n{N}.json"))
        for label, directory in compare) if os.path.exists(path)}
    scale = kernel.manifest["program"]["scale"][0]
    causal = variant in ("causal", "mla_causal")
    # MLA (bench/programs/mla*.mlir): V's head dim is 128 where Q.K's is D.
    Dv = 128 if variant.startswith("mla") else D
    gen = torch.Generator(device="cpu").manual_seed(N + D)
    # [B, N, H, D] storage, seen as [B, H, N, D].
    q, k, v = (torch.randn(B, N, H, d, generator=gen).to("cuda", torch.bfloat16)
               .transpose(1, 2) for d in (D, D, Dv))
    out_user = torch.empty(B, N, H, Dv, device="cuda", dtype=torch.bfloat16)
    out_view = out_user.transpose(1, 2)

    def strided(kernel=kernel):
        kernel(q, k, v, out=out_view)
        return out_view

    def copied():
        o = kernel(q.contiguous(), k.contiguous(), v.contiguous())
        return o.transpose(1, 2).contiguous().transpose(1, 2)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    def fa4():
        # [B, N, H, D] in and out: the views' storage, FA4's own layout.
        out = fa4_func()(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                     softmax_scale=scale, causal=causal)
        return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)

    # Checks: the strided call equals the contiguous call bit for bit, and
    # both match the f32 math reference.
    with sdpa_kernel(SDPBackend.MATH):
        reference = F.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), is_causal=causal, scale=scale)
    out_user.fill_(float("nan"))
    got = strided().clone()
    torch.cuda.synchronize()
    if not torch.equal(got, copied()):
        raise RuntimeError(f"{variant} D={D} N={N}: strided and contiguous calls differ")
    systems = {"flashlight": strided, "flashlight_copy": copied, "sdpa_cudnn": cudnn}
    for name, build in builds.items():
        systems[name] = lambda build=build: strided(build)
    if fa4_func():
        systems["fa4"] = fa4
    flops = 2.0 * B * H * N * N * (D + Dv) * (0.5 + 0.5 / N if causal else 1.0)
    checked = {}
    for name, fn in systems.items():
        try:
            out_user.fill_(float("nan"))
            out = fn()
            torch.cuda.synchronize()
            rel = ((out.float() - reference).norm() / reference.norm()).item()
            if name.startswith("flashlight") and not rel <= 2e-2:
                raise RuntimeError(f"{name} differs from the reference: {rel:.3e}")
            checked[name] = rel
        except Exception as e:  # a peer that cannot run this case
            print(f"  {variant} D={D} N={N} {name}: {type(e).__name__}: {str(e)[:120]}")
            if name.startswith("flashlight"):
                raise
    # The builds under comparison alternate (two rounds, opposite orders);
    # everything else is timed once.
    timed = {name: [] for name in checked}
    order = [name for name in checked if name == "flashlight" or name in builds]
    for round_order in ([order, order[::-1]] if builds else [order]):
        for name in round_order:
            timed[name].append(bench_timed(systems[name], warmup=25, rep=100,
                                           return_mode="median"))
    for name in checked:
        if not timed[name]:
            timed[name].append(bench_timed(systems[name], warmup=25, rep=100,
                                           return_mode="median"))
    for name, rel in checked.items():
        ms = sum(timed[name]) / len(timed[name])
        records.append({"variant": variant, "D": D, "Dv": Dv, "N": N, "B": B, "H": H,
                        "dtype": "bf16", "layout": "BNHD views", "system": name,
                        "ms": ms, "tflops": flops / ms / 1e9, "rel_err": rel})
        print(f"  {variant:<8} D={D:<4} N={N:<6} {name:<16} {ms:8.3f} ms "
              f"{flops / ms / 1e9:7.1f} TFLOP/s  rel_err={rel:.1e}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kernels")
    parser.add_argument("out")
    parser.add_argument("--variants", default="vanilla,causal")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--lengths", default="2048,8192")
    parser.add_argument("--command", default=" ".join(sys.argv))
    parser.add_argument("--compare", action="append", default=[],
                        help="LABEL=DIR: time another build's kernels in the same run")
    args = parser.parse_args()
    compare = [tuple(c.split("=", 1)) for c in args.compare]
    records = []
    for variant in args.variants.split(","):
        for D in map(int, args.dims.split(",")):
            for N in map(int, args.lengths.split(",")):
                run_config(args.kernels, variant, D, N, records, compare)
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "commit": commit(), "command": args.command, "records": records}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {len(records)} records to {args.out}")


if __name__ == "__main__":
    main()
