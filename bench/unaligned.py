#!/usr/bin/env python3
"""Static kernels at lengths no tile divides, several builds in one process.

    bench/prepare_unaligned.sh DIR LABEL [flags]    # per build, here
    bench/unaligned.py DIR OUT.json                  # on the GPU

For every kernel set of bench/prepare_unaligned.sh in DIR (one per label),
the same random inputs ([B, H, N, D], bf16) go to each build's kernel;
each output (NaN-filled first) is checked against SDPA's math backend in
f32 (bf16 tolerance), then the builds are timed in two rounds, the second
in the opposite order, each getting the mean of its two medians. TFLOP/s
count 4*B*H*N^2*D, halved for causal. Writes {"gpu", "torch", "commit"
(FLASHLIGHT_COMMIT), "command", "records": [{variant, D, N, B, system,
tiles, ms, tflops, rel_err}]}.
"""

import glob
import json
import os
import re
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import flashlight  # noqa: E402
from timing import timed  # noqa: E402


def main(directory, out_path):
    cells = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        m = re.fullmatch(r"(\w+?)_d(\d+)_n(\d+)_(\w+)\.json", os.path.basename(path))
        if m:
            variant, d, n, label = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
            cells.setdefault((variant, d, n), {})[label] = flashlight.load(path)
    records = []
    for (variant, d, n), builds in sorted(cells.items()):
        first = next(iter(builds.values()))
        b, h = first.manifest["params"][0]["shape"][:2]
        g = torch.Generator(device="cpu").manual_seed(n + d)
        q, k, v = (torch.randn(b, h, n, d, generator=g).to("cuda", torch.bfloat16)
                   for _ in range(3))
        scale = first.manifest["program"]["scale"][0]
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                 is_causal=variant == "causal", scale=scale)
        flops = 4.0 * b * h * n * n * d * (0.5 if variant == "causal" else 1.0)
        errors, times = {}, {label: [] for label in builds}
        for label, kernel in builds.items():
            out = torch.full_like(q, float("nan"))
            kernel(q, k, v, out=out)
            errors[label] = ((out.float() - ref).norm() / ref.norm()).item()
            if not errors[label] <= 2e-2:
                raise RuntimeError(f"{variant} D={d} N={n} {label}: relative error "
                                   f"{errors[label]:.3e}")
        order = list(builds)
        for label in order + order[::-1]:
            times[label].append(timed(lambda kernel=builds[label]: kernel(q, k, v),
                                      warmup=25, rep=100, return_mode="median"))
        for label in order:
            ms = sum(times[label]) / len(times[label])
            plan = builds[label].geometry
            records.append({"variant": variant, "D": d, "N": n, "B": b,
                            "system": f"flashlight_{label}",
                            "tiles": f"{plan['block_m']}x{plan['block_n']}", "ms": ms,
                            "tflops": flops / ms / 1e9, "rel_err": errors[label]})
            print(f"{variant:<8} D={d:<4} N={n:<5} {label:<4} {records[-1]['tiles']:<8} "
                  f"{ms:.4f} ms {flops / ms / 1e9:6.1f} TFLOP/s  rel_err={errors[label]:.1e}",
                  flush=True)
    json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
               "commit": os.environ.get("FLASHLIGHT_COMMIT", "unknown"),
               "command": " ".join(sys.argv), "records": records},
              open(out_path, "w"), indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
