#!/usr/bin/env python3
"""Cross-checks compiled examples against PyTorch's own computation of the
same variant (written independently here, in fp32 from the same bf16/fp16
inputs; SDPA where it can express the variant). Runs on the GPU machine and
also exercises the Python loader (`flashlight.load`).

    scripts/torch_check.py <kernels-dir>    # every <example>.json in it
"""

import glob
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402


def expand_kv(x, hq):
    """[B, Hkv, N, D] -> [B, Hq, N, D]: query head h reads KV head h // g."""
    return x.repeat_interleave(hq // x.shape[1], dim=1)


def scores(q, k, scale):
    return scale * torch.einsum("bhid,bhjd->bhij", q.float(), expand_kv(k, q.shape[1]).float())


def positions(m, n, device):
    i = torch.arange(m, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    return i, j


def softmax_pv(s, keep, v):
    s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ expand_kv(v, s.shape[1]).float()


def causal_keep(s):
    i, j = positions(s.shape[-2], s.shape[-1], s.device)
    return (j <= i).expand(s.shape)


def t5_bucket(rel):
    after = (rel > 0).long() * 16
    dist = rel.abs()
    small = dist < 8
    ratio = torch.clamp(dist.float() / 8.0, min=1.0)
    far = 8 + (torch.log(ratio) * 2.88539).long()
    far = torch.clamp(far, max=15)
    return after + torch.where(small, dist, far)


def reference(name, scale, t):
    """The variant's output computed by PyTorch; `t` holds the inputs in
    manifest order."""
    if name == "vanilla":
        q, k, v = t
        return F.scaled_dot_product_attention(q.float(), expand_kv(k, q.shape[1]).float(),
                                              expand_kv(v, q.shape[1]).float(), scale=scale[0])
    if name == "causal":
        q, k, v = t
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                              is_causal=True, scale=scale[0])
    if name == "gqa":
        q, k, v = t
        out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True,
                                             scale=scale[0], enable_gqa=True)
        s = scores(q, k, scale[0]).masked_fill(~causal_keep(scores(q, k, 1.0)), float("-inf"))
        return out, torch.logsumexp(s, dim=-1)
    q, k, v = t[0], t[1], t[2]
    if name == "differential":
        q1, q2, k1, k2, v, lam = t
        s1, s2 = scores(q1, k1, scale[0]), scores(q2, k2, scale[1])
        keep = causal_keep(s1)
        return softmax_pv(s1, keep, v) - lam.float() * softmax_pv(s2, keep, v)
    s = scores(q, k, scale[0])
    i, j = positions(s.shape[-2], s.shape[-1], s.device)
    if name == "sliding_window":
        return softmax_pv(s, ((i - j >= 0) & (i - j < 32)).expand(s.shape), v)
    if name == "prefix_lm":
        return softmax_pv(s, ((j < 16) | (j <= i)).expand(s.shape), v)
    if name == "document_mask":
        doc = t[3]
        same = doc[:, None, :, None] == doc[:, None, None, :]
        return softmax_pv(s, same & (j <= i), v)
    if name == "alibi":
        slopes = t[3].float()
        return softmax_pv(s + slopes[None, :, None, None] * (j - i).float(), causal_keep(s), v)
    if name == "softcap":
        return softmax_pv(30.0 * torch.tanh(s / 30.0), causal_keep(s), v)
    if name == "attention_sink":
        sink = t[3].float()
        sk = s.masked_fill(~causal_keep(s), float("-inf"))
        sink_col = sink[None, :, None, None].expand(*s.shape[:3], 1)
        p = torch.softmax(torch.cat([sk, sink_col], dim=-1), dim=-1)[..., :-1]
        return p @ expand_kv(v, s.shape[1]).float()
    if name == "sigmoid":
        p = torch.sigmoid(s - 4.8520303) * causal_keep(s)
        return p @ expand_kv(v, s.shape[1]).float()
    if name == "evoformer":
        pair, mask_bias, gate = t[3], t[4], t[5]
        o = softmax_pv(s + pair.float() + mask_bias.float(), torch.ones_like(s, dtype=torch.bool), v)
        return o * torch.sigmoid(gate.float())
    if name == "t5_relative_bias":
        table = t[3].float()
        bias = table[:, t5_bucket(j - i)]  # [H, M, N]
        return softmax_pv(s + bias[None], torch.ones_like(s, dtype=torch.bool), v)
    return None


def random_input(p, gen):
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
             "i32": torch.int32, "i64": torch.int64}[p["dtype"]]
    shape = p["shape"]
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, device="cuda").to(dtype)
    return torch.randint(0, 4, shape, generator=gen, device="cuda", dtype=dtype)


def main():
    directory = sys.argv[1]
    failures = 0
    print(f"{'example':<18} {'shape':<22} {'dtype':<5} {'rel_err':>9}  status")
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        manifest = json.load(open(path))
        name = manifest["kernel"]
        kernel = flashlight.load(path)
        gen = torch.Generator(device="cuda").manual_seed(7)
        inputs = [random_input(p, gen) for p in kernel.inputs]
        ref = reference(name, manifest["program"]["scale"], inputs)
        if ref is None:
            continue
        outs = kernel(*inputs)
        torch.cuda.synchronize()
        outs = outs if isinstance(outs, tuple) else (outs,)
        refs = ref if isinstance(ref, tuple) else (ref,)
        q = kernel.inputs[0]
        tol = {"bf16": 2e-2, "f16": 5e-3}.get(q["dtype"], 1e-4)
        worst = 0.0
        for o, r in zip(outs, refs):
            o = o.float()
            if torch.isnan(o).any():
                worst = float("inf")
                continue
            worst = max(worst, ((o - r).norm() / r.norm().clamp_min(1e-30)).item())
        ok = worst <= tol
        failures += not ok
        shape = "x".join(str(d) for d in q["shape"])
        print(f"{name:<18} {shape:<22} {q['dtype']:<5} {worst:9.2e}  {'ok' if ok else 'FAIL'}")
    print(f"torch cross-check: {failures} failure(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
