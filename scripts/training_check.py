#!/usr/bin/env python3
"""The training check of the backward pass: a small causal transformer
trained 200 steps with Flashlight's attention and with SDPA, from the same
seed on the same batches.

    scripts/training_check.py fill CACHE          # where the compiler is
    scripts/training_check.py run CACHE OUT.json  # on the GPU machine

Byte-level tokens of the repository's own documentation (README.md and
docs/*.md, the same file order everywhere); 4 layers, d_model 256, 4 heads
of 64, sequence 256, batch 16, AdamW, bf16 autocast. Three runs: `sdpa`
(PyTorch's default backend), `flashlight` (the attention a
`flashlight.jit` function: its forward kernel and its gradient program),
and `sdpa_math` (SDPA's math backend: the control for how far two correct
attentions drift apart in bf16 over 200 steps). Pass: the mean absolute
loss difference between flashlight and sdpa over the last 50 steps is at
most twice the control's (sdpa_math against sdpa) plus 0.02, and the loss
fell by half.
"""

import glob
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402
from check_common import main, write_result  # noqa: E402

LAYERS, DIM, HEADS, SEQ, BATCH, STEPS = 4, 256, 4, 256, 16, 200
HEAD_DIM = DIM // HEADS


def causal_attention(q, k, v):
    n = q.shape[2]
    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1) @ v


_jit = flashlight.jit(causal_attention, runtime_shapes=False)


def attend(kind, q, k, v):
    if kind == "flashlight":
        return _jit(q, k, v)
    if kind == "sdpa_math":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.norm1, self.norm2 = torch.nn.RMSNorm(DIM), torch.nn.RMSNorm(DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM, bias=False)
        self.proj = torch.nn.Linear(DIM, DIM, bias=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(),
                                       torch.nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, n, 3, HEADS, HEAD_DIM).unbind(2)
        # [B, N, H, D] storage seen as [B, H, N, D]: no copy into the kernel.
        o = attend(self.kind, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.proj(o.transpose(1, 2).reshape(b, n, DIM))
        return x + self.mlp(self.norm2(x))


class Model(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.embed = torch.nn.Embedding(256, DIM)
        self.pos = torch.nn.Parameter(torch.zeros(SEQ, DIM))
        self.blocks = torch.nn.ModuleList(Block(kind) for _ in range(LAYERS))
        self.norm = torch.nn.RMSNorm(DIM)
        self.head = torch.nn.Linear(DIM, 256, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def corpus():
    root = os.path.join(os.path.dirname(__file__), "..")
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    data = b"".join(open(f, "rb").read() for f in files)
    return torch.tensor(list(data), dtype=torch.long)


def train(kind, data, device):
    torch.manual_seed(0)
    model = Model(kind).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    batches = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(STEPS):
        starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=batches)
        window = torch.stack([data[s:s + SEQ + 1] for s in starts]).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, 256), window[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def fill(cache):
    os.environ["FLASHLIGHT_CACHE"] = cache
    xs = [torch.zeros(BATCH, HEADS, SEQ, HEAD_DIM, dtype=torch.bfloat16) for _ in range(3)]
    _jit._prepare_call(xs, grad=True)
    print("causal_attention: forward and gradient program cached")


def run(cache, out_path):
    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    data = corpus()
    curves = {kind: train(kind, data, "cuda") for kind in ("sdpa", "flashlight", "sdpa_math")}

    def gap(a, b):
        tail = slice(STEPS - 50, STEPS)
        return sum(abs(x - y) for x, y in zip(curves[a][tail], curves[b][tail])) / 50

    fl, control = gap("flashlight", "sdpa"), gap("sdpa_math", "sdpa")
    fell = curves["flashlight"][-1] < 0.5 * curves["flashlight"][0]
    ok = all(math.isfinite(x) for x in curves["flashlight"]) and fell and \
        fl <= 2 * control + 0.02
    for step in (0, 49, 99, 149, 199):
        print(f"step {step + 1:>3}: " + "  ".join(f"{k} {v[step]:.4f}" for k, v in curves.items()))
    print(f"last 50 steps, mean |difference| against sdpa: flashlight {fl:.4f}, "
          f"sdpa_math (control) {control:.4f} -> {'pass' if ok else 'FAIL'}")
    record = {"variant": "causal transformer, 4 layers, D = 64, N = 256", "pass": ok,
              "gap_flashlight": fl, "gap_control": control, "curves": curves}
    return write_result(out_path, "training_check", [record], 0 if ok else 1)


if __name__ == "__main__":
    main(__doc__, fill, run)
