#!/usr/bin/env python3
"""The GPU check of the backward pass: flashlight.jit functions called on
inputs that require grad, against fp64 autograd of the same functions.

    scripts/gradient_check.py fill CACHE        # where the compiler is
    scripts/gradient_check.py run CACHE OUT.json  # on the GPU machine

`fill` calls every program below on CPU tensors that require grad, which
compiles its forward and its gradient program (`flashlight-compile
--gradient`) into the disk cache CACHE; `run` (no compiler: the cache must
serve) calls each on fresh random bf16 CUDA inputs, back-propagates a
random output gradient, and compares the output and every input's gradient
with the function run by PyTorch in float64 on the same values (relative
Frobenius error; bf16 tolerance 2e-2). Kernel outputs are NaN-poisoned
first. Shapes: lengths 128 and 1000 (not a multiple of the tiles), head
dims 64 and 128 (and vanilla at 2049, whose Delta takes the row groups' tail), GQA 4:2,
a prefix-LM whose prefix (100) splits tiles, [B, H, N, D] and [B, N, H, D] callers (also
with a batch of 1), a
learned sink (its gradient too), a pair bias (an input that does not
require grad) with an output gate, differential attention (two logit
branches) with a learned lambda (the gate's and lambda's gradients too), a learned pair
bias, learned ALiBi slopes and a learned relative-position table (their
gradients too: the scores' captures).
"""

import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight  # noqa: E402
from check_common import main, write_result  # noqa: E402


def repeat_kv(x, hq):
    return x.repeat_interleave(hq // x.shape[1], dim=1)


def positions(n, device):
    i = torch.arange(n, device=device)
    return i[:, None], i[None, :]


def scores(q, k):
    return (q @ repeat_kv(k, q.shape[1]).transpose(-1, -2)) * q.shape[-1] ** -0.5


def vanilla(q, k, v):
    return torch.softmax(scores(q, k), -1) @ v


def causal_gqa(q, k, v):
    i, j = positions(q.shape[2], q.device)
    s = scores(q, k).masked_fill(j > i, float("-inf"))
    return torch.softmax(s, -1) @ repeat_kv(v, q.shape[1])


def softcap_causal(q, k, v):
    i, j = positions(q.shape[2], q.device)
    s = 30.0 * torch.tanh(scores(q, k) / 30.0)
    return torch.softmax(s.masked_fill(j > i, float("-inf")), -1) @ v


def alibi(q, k, v):
    h = q.shape[1]
    slopes = torch.tensor([2.0 ** (-8.0 * (x + 1) / h) for x in range(h)],
                          device=q.device, dtype=q.dtype)
    i, j = positions(q.shape[2], q.device)
    s = scores(q, k) + slopes[:, None, None] * (j - i).to(q.dtype)
    return torch.softmax(s.masked_fill(j > i, float("-inf")), -1) @ v


def sliding_window(q, k, v):
    i, j = positions(q.shape[2], q.device)
    keep = (j <= i) & (i - j < 64)
    s = torch.where(keep, scores(q, k), torch.finfo(q.dtype).min)
    return torch.softmax(s, -1) @ v


def prefix_lm(q, k, v):
    """A bidirectional prefix of 100 positions (not a multiple of the tiles:
    tiles of keys hold prefix and later rows), causal after it."""
    i, j = positions(q.shape[2], q.device)
    s = scores(q, k).masked_fill((j > i) & (j >= 100), float("-inf"))
    return torch.softmax(s, -1) @ v


def document(q, k, v, doc):
    keep = doc[:, None, :, None] == doc[:, None, None, :]
    s = scores(q, k).masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v


def sigmoid(q, k, v):
    return torch.sigmoid(scores(q, k) - math.log(q.shape[2])) @ v


def sinks(q, k, v, sink):
    """gpt-oss: a learned logit per head joins each softmax row; causal."""
    i, j = positions(q.shape[2], q.device)
    s = scores(q, k).masked_fill(j > i, float("-inf"))
    column = sink.reshape(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1).to(s.dtype)
    both = torch.cat([s, column], dim=-1)
    both = both - both.max(dim=-1, keepdim=True).values
    return torch.softmax(both, -1)[..., :-1] @ v


def gated_bias(q, k, v, bias, gate):
    """Evoformer-like: a pair bias in the scores (an input that does not
    require grad), a sigmoid gate on the output (its gradient too)."""
    s = scores(q, k) + bias
    return (torch.softmax(s, -1) @ v) * torch.sigmoid(gate)


def pair_bias(q, k, v, bias):
    """A learned pair bias [1, H, N, N] (broadcast over the batch) in
    causal scores: its gradient too (`--score-capture-gradients`)."""
    i, j = positions(q.shape[2], q.device)
    s = (scores(q, k) + bias).masked_fill(j > i, float("-inf"))
    return torch.softmax(s, -1) @ v


def learned_alibi(q, k, v, slopes):
    """ALiBi with learned f32 slopes per head, causal: the slopes'
    gradient too."""
    i, j = positions(q.shape[2], q.device)
    s = scores(q, k).float() + slopes[:, None, None] * (j - i).float()
    return torch.softmax(s.masked_fill(j > i, float("-inf")), -1).to(v.dtype) @ v


def bucket_table(q, k, v, table):
    """A learned relative-position table [31, H] read at the clamped key
    distance (T5-like buckets), causal: the table's gradient too."""
    i, j = positions(q.shape[2], q.device)
    bias = table[(j - i).clamp(-15, 15) + 15].permute(2, 0, 1)
    s = scores(q, k).float() + bias
    return torch.softmax(s.masked_fill(j > i, float("-inf")), -1).to(v.dtype) @ v


def differential(q1, q2, k1, k2, v, lam):
    """Differential attention: two causal softmaxes, the second weighted
    by a learned lambda per head (two logit branches; lambda's gradient
    too)."""
    i, j = positions(q1.shape[2], q1.device)

    def weights(q, k):
        return torch.softmax(scores(q, k).masked_fill(j > i, float("-inf")), -1)
    return (weights(q1, k1) - lam[:, None, None].to(q1.dtype) * weights(q2, k2)) @ v


def self_bnhd(x):
    """Self-attention on one [B, N, H, D] tensor as q, k and v."""
    y = x.transpose(1, 2)
    i, j = positions(y.shape[2], y.device)
    s = scores(y, y).masked_fill(j > i, float("-inf"))
    return (torch.softmax(s, -1) @ y).transpose(1, 2)


def cases():
    """(name, function, input shapes and dtypes)."""
    out = []
    for n in (128, 1000):
        for d in (64, 128):
            bhnd = [(2, 4, n, d)] * 3
            gqa = [(2, 4, n, d), (2, 2, n, d), (2, 2, n, d)]
            out += [
                (f"vanilla n{n} d{d}", vanilla, bhnd),
                (f"causal_gqa n{n} d{d}", causal_gqa, gqa),
                (f"softcap_causal n{n} d{d}", softcap_causal, bhnd),
                (f"alibi n{n} d{d}", alibi, bhnd),
                (f"sliding_window n{n} d{d}", sliding_window, bhnd),
                (f"prefix_lm n{n} d{d}", prefix_lm, bhnd),
                (f"document n{n} d{d}", document, bhnd + [((2, n), "int")]),
                (f"sigmoid n{n} d{d}", sigmoid, bhnd),
                (f"self_bnhd n{n} d{d}", self_bnhd, [(2, n, 4, d)]),
                # A batch of 1: the export drops the unit dim (fixed and
                # inserted dims in the layouts the backward inverts).
                (f"self_bnhd_b1 n{n} d{d}", self_bnhd, [(1, n, 4, d)]),
                (f"sinks n{n} d{d}", sinks, bhnd + [((4,), "f32")]),
                (f"differential n{n} d{d}", differential,
                 [(2, 4, n, d)] * 5 + [((4,), "f32")]),
                (f"gated_bias n{n} d{d}", gated_bias,
                 bhnd + [((1, 4, n, n), "frozen"), (2, 4, n, d)]),
                (f"pair_bias n{n} d{d}", pair_bias, bhnd + [(1, 4, n, n)]),
                (f"learned_alibi n{n} d{d}", learned_alibi, bhnd + [((4,), "slopes")]),
                (f"bucket_table n{n} d{d}", bucket_table, bhnd + [((31, 4), "f32")]),
            ]
    # 16392 rows of Delta = rowsum(dO * O): a reference-path row reduction
    # with warps taking 4 rows each, the last group past the end (the
    # per-row tests).
    out.append(("vanilla_rows n2049 d64", vanilla, [(2, 4, 2049, 64)] * 3))
    return out


_jitted = {}


# More flashlight-compile flags for every function, the same for fill and
# run (the cache keys them): GRADIENT_FLAGS="--fuse-key-value-from=0"
# checks the one-attention dK and dV at every shape of the matrix.
FLAGS = tuple(os.environ.get("GRADIENT_FLAGS", "").split())
# The archs compiled (and so run): GRADIENT_ARCHS=sm_80 checks the mma.sync
# kernels on a Hopper GPU (their PTX through the driver's JIT).
ARCHS = tuple(a for a in os.environ.get("GRADIENT_ARCHS", "").split(",") if a) or \
    flashlight._jit.DEFAULT_ARCHS


def jitted(fn):
    if fn not in _jitted:
        _jitted[fn] = flashlight.jit(fn, runtime_shapes=False, flags=FLAGS, archs=ARCHS)
    return _jitted[fn]


def make_inputs(shapes, device, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    xs = []
    for spec in shapes:
        shape, kind = spec if isinstance(spec[1], str) else (spec, "bf16")
        if kind == "int":
            # Three documents per row, in runs.
            n = shape[-1]
            cuts = torch.sort(torch.randint(1, n, (shape[0], 2), generator=g), -1).values
            pos = torch.arange(n)
            xs.append(((pos[None, :] >= cuts[:, :1]).int() +
                       (pos[None, :] >= cuts[:, 1:]).int()).to(device))
        elif kind == "slopes":
            # ALiBi's slopes 2^(-8 h / H), where a model learning them starts
            # (random normal slopes weigh key distances up to N ~ 1000 at
            # f32's resolution of the logits, far from any model).
            h = shape[0]
            xs.append(torch.tensor([2.0 ** (-8.0 * (x + 1) / h) for x in range(h)]).to(device))
        elif kind == "f32":
            xs.append(torch.randn(shape, generator=g).to(device))
        else:
            xs.append(torch.randn(shape, generator=g).to(torch.bfloat16).to(device))
    return xs


def frozen(shapes):
    """Positions of the inputs that do not require grad."""
    return {i for i, spec in enumerate(shapes)
            if not isinstance(spec[1], int) and spec[1] == "frozen"}


# The programs checked (GRADIENT_VARIANTS=vanilla,causal_gqa: those whose
# names start so; fill and run take the same), else all.
VARIANTS = tuple(v for v in os.environ.get("GRADIENT_VARIANTS", "").split(",") if v)


def selected():
    """cases() with their seeds, GRADIENT_VARIANTS's only."""
    return [(seed, case) for seed, case in enumerate(cases())
            if not VARIANTS or case[0].split(" ")[0] in VARIANTS]


def fill(cache):
    os.environ["FLASHLIGHT_CACHE"] = cache
    for seed, (name, fn, shapes) in selected():
        xs = [x.requires_grad_() if x.is_floating_point() and i not in frozen(shapes) else x
              for i, x in enumerate(make_inputs(shapes, "cpu", seed))]
        jitted(fn)(*xs)  # compiles the forward and the gradient program
        print(f"{name}: cached", flush=True)


def rel(x, ref):
    x, ref = x.double(), ref.double()
    return float((x - ref).norm() / ref.norm().clamp_min(1e-30))


def run(cache, out_path):
    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    flashlight.Kernel.poison = True
    records, failures = [], 0
    for seed, (name, fn, shapes) in selected():
        xs = make_inputs(shapes, "cuda", seed)
        floats = [i for i, x in enumerate(xs)
                  if x.is_floating_point() and i not in frozen(shapes)]
        ours = [x.clone().requires_grad_() if i in floats else x for i, x in enumerate(xs)]
        refs = [x.double().requires_grad_() if i in floats else
                x.double() if x.is_floating_point() else x for i, x in enumerate(xs)]
        try:
            out = jitted(fn)(*ours)
            dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed + 1000))
            out.backward(dout.to(out.dtype).cuda())
            ref = fn(*refs)
            ref.backward(dout.double().cuda())
            errors = {"out": rel(out, ref)}
            for i in floats:
                errors[f"d{i}"] = rel(ours[i].grad, refs[i].grad)
            worst = max(errors.values())
            ok = math.isfinite(worst) and worst <= 2e-2
            record = {"variant": name, "rel_err": worst, "errors": errors, "pass": ok}
        except Exception as e:  # noqa: BLE001 - reported per program
            ok, record = False, {"variant": name, "pass": False, "error": repr(e)[:400]}
        failures += not ok
        records.append(record)
        print(f"{name:<28} {'pass' if ok else 'FAIL'} "
              f"{record.get('errors', record.get('error'))}", flush=True)
    return write_result(out_path, "gradient_check", records, failures,
                        flags=list(FLAGS), archs=list(ARCHS),
                        variants=list(VARIANTS))


if __name__ == "__main__":
    main(__doc__, fill, run)
