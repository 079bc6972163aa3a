#!/usr/bin/env python3
"""The backward pass against its peers, in one process.

    bench/backward.py fill CACHE                # where the compiler is
    bench/backward.py run CACHE OUT.json [--lengths 2048,8192]
                      [--compare] [--flags "--fuse-key-value-from=0"]

Vanilla and causal attention (B * N = 16k, H * D = 2048, bf16, [B, H, N, D])
at D = 64 / 128, N = 2k / 8k; against torch.compile of the same
function (one process per length: torch.compile's second shape turns on
its dynamic shapes): differential attention (causal, two branches) and sigmoid
attention, which FlexAttention and FA4 cannot take in one call, and
programs with learned tensors in the scores or around them (gpt-oss sinks,
ALiBi with learned slopes, a learned relative-position table, an
Evoformer-like pair bias and gate), every one of which gets its gradient;
and the forward benchmark's masked variants (ALiBi, soft-capping, a sliding
window, a prefix-LM, document masks, GQA) against FlexAttention's backward
(Triton and FLASH backends, bench.py's mask_mod and score_mod) and FA4's
where its arguments express them. Each system computes dQ, dK, dV of the same
inputs and output gradient; the time is of the backward alone (the forward
ran once before; `torch.autograd.grad` with the graph retained):

- `flashlight`: a `flashlight.jit` function (its gradient program: the
  forward again for O and L, then dQ, dK and dV as three attention
  kernels, [024](../docs/decisions/024-gradient-program.md));
- `sdpa_flash`, `sdpa_cudnn`: PyTorch's SDPA with that backend;
- `flex`: FlexAttention (Triton backend), torch.compile'd;
- `flex_flash`: FlexAttention's FLASH backend (FA4's kernels;
  `kernel_options={"BACKEND": "FLASH"}`) where FA4 is importable;
- `fa4`: FlashAttention-4 where importable (`../shared/peers/`);
- `compile`: torch.compile (inductor) of the eager function.

Before timing, every system's gradients are compared with SDPA's math
backend in f32 (relative Frobenius error, worst over the inputs). TFLOP/s
count 2.5 times the forward's 4*B*H*N^2*D (FlashAttention's convention),
halved for causal, once per logit branch. Writes {"gpu", "torch", "commit", "command",
"records": [{variant, D, N, system, ms, tflops, rel_err}]}.
"""

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import flashlight  # noqa: E402
from timing import timed  # noqa: E402

VARIANTS = ("vanilla", "causal", "differential", "sigmoid", "sinks", "alibi_learned",
            "t5_table", "evoformer", "alibi", "softcap_causal", "sliding_window_256",
            "prefix_lm_256", "document_mask", "gqa")
CONFIGS = [(v, d) for v in VARIANTS for d in (64, 128)]
# Programs against torch.compile of the same function only: those
# FlexAttention and FA4 cannot express in one call, and those with learned
# tensors in the scores (at 8k a [B, H, N, N] f32 gradient or scores is
# 8.6 GB; fine on the 141 GB of an H200).
BEYOND = ("differential", "sigmoid", "sinks", "alibi_learned", "t5_table", "evoformer")
# The forward benchmark's masked variants (bench/bench.py's mask_mod and
# score_mod, the same semantics): against FlexAttention's backward (Triton
# and FLASH backends) and FA4's where it takes them as arguments.
MASKED = ("alibi", "softcap_causal", "sliding_window_256", "prefix_lm_256", "document_mask",
          "gqa")
WINDOW = PREFIX = 256


def vanilla(q, k, v):
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.softmax(s.float(), -1).to(v.dtype) @ v


def causal(q, k, v):
    n = q.shape[2]
    keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    s = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).masked_fill(~keep, float("-inf"))
    return torch.softmax(s.float(), -1).to(v.dtype) @ v


def differential(q1, q2, k1, k2, v):
    """Differential attention, causal: two softmaxes, the second weighted
    by 0.5."""
    n = q1.shape[2]
    keep = torch.ones(n, n, dtype=torch.bool, device=q1.device).tril()

    def weights(q, k):
        s = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).masked_fill(~keep, float("-inf"))
        return torch.softmax(s.float(), -1)
    return ((weights(q1, k1) - 0.5 * weights(q2, k2)).to(v.dtype)) @ v


def sigmoid(q, k, v):
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.sigmoid(s.float() - 7.6).to(v.dtype) @ v


def _causal_keep(n, device):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def sinks(q, k, v, sink):
    """gpt-oss: a learned logit per head joins each causal softmax row."""
    n = q.shape[2]
    s = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).float()
    s = s.masked_fill(~_causal_keep(n, q.device), float("-inf"))
    column = sink.reshape(1, -1, 1, 1).expand(s.shape[0], -1, n, 1)
    return torch.softmax(torch.cat([s, column], -1), -1)[..., :-1].to(v.dtype) @ v


def alibi_learned(q, k, v, slopes):
    """Causal ALiBi with learned f32 slopes per head."""
    n = q.shape[2]
    i = torch.arange(n, device=q.device)
    s = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).float()
    s = s + slopes[:, None, None] * (i[None, :] - i[:, None]).float()
    return torch.softmax(s.masked_fill(~_causal_keep(n, q.device), float("-inf")),
                         -1).to(v.dtype) @ v


def t5_table(q, k, v, table):
    """A learned relative-position table [31, H] at the clamped key
    distance (T5-like buckets), causal."""
    n = q.shape[2]
    i = torch.arange(n, device=q.device)
    bias = table[(i[None, :] - i[:, None]).clamp(-15, 15) + 15].permute(2, 0, 1)
    s = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).float() + bias
    return torch.softmax(s.masked_fill(~_causal_keep(n, q.device), float("-inf")),
                         -1).to(v.dtype) @ v


def evoformer(q, k, v, bias, gate):
    """Evoformer-like: a learned pair bias [1, H, N, N] and a sigmoid
    gate on the output."""
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5 + bias
    return (torch.softmax(s.float(), -1).to(v.dtype) @ v) * torch.sigmoid(gate)


def _masked(q, k, v, keep, score=None):
    """softmax(score(S)) V over `keep` ([.., N, N]); K and V repeated over
    the query heads they serve (GQA)."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).float()
    if score is not None:
        s = score(s)
    return torch.softmax(s.masked_fill(~keep, float("-inf")), -1).to(v.dtype) @ v


def _positions(n, device):
    i = torch.arange(n, device=device)
    return i[:, None], i[None, :]


def alibi(q, k, v):
    """Causal ALiBi with the fixed slopes 2^(-8 (h + 1) / H)."""
    i, j = _positions(q.shape[2], q.device)
    h = q.shape[1]
    slopes = torch.tensor([2.0 ** (-8.0 * (x + 1) / h) for x in range(h)], device=q.device)
    return _masked(q, k, v, j <= i,
                   lambda s: s + slopes[:, None, None] * (j - i).float())


def softcap_causal(q, k, v):
    i, j = _positions(q.shape[2], q.device)
    return _masked(q, k, v, j <= i, lambda s: 30.0 * torch.tanh(s / 30.0))


def sliding_window_256(q, k, v):
    i, j = _positions(q.shape[2], q.device)
    return _masked(q, k, v, (j <= i) & (i - j < WINDOW))


def prefix_lm_256(q, k, v):
    i, j = _positions(q.shape[2], q.device)
    return _masked(q, k, v, (j < PREFIX) | (j <= i))


def document_mask(q, k, v, doc):
    """Causal within each document: `doc` [B, N] ids (packed sequences)."""
    i, j = _positions(q.shape[2], q.device)
    same = doc[:, None, :, None] == doc[:, None, None, :]
    return _masked(q, k, v, same & (j <= i))


def gqa(q, k, v):
    """Causal, 4 query heads per KV head."""
    i, j = _positions(q.shape[2], q.device)
    return _masked(q, k, v, j <= i)


PROGRAMS = {"vanilla": vanilla, "causal": causal, "differential": differential,
            "sigmoid": sigmoid, "sinks": sinks, "alibi_learned": alibi_learned,
            "t5_table": t5_table, "evoformer": evoformer, "alibi": alibi,
            "softcap_causal": softcap_causal, "sliding_window_256": sliding_window_256,
            "prefix_lm_256": prefix_lm_256, "document_mask": document_mask, "gqa": gqa}
INPUTS = {"differential": 5}  # tensors of [B, H, N, D]; 3 otherwise


def qkv_shapes(variant, B, H, N, D):
    """Q's, K's and V's shapes (GQA: a quarter of the heads for K and V)."""
    hkv = H // 4 if variant == "gqa" else H
    return [(B, H, N, D), (B, hkv, N, D), (B, hkv, N, D)]


def extra_inputs(variant, B, H, N, D, generator):
    """The inputs after q, k, v (CPU; the floating-point ones
    differentiated)."""
    if variant == "document_mask":  # bench.py's, on the CPU
        from bench import random_documents
        return [random_documents(B, N, generator, device="cpu")]
    if variant == "sinks":
        return [torch.randn(H, generator=generator)]
    if variant == "alibi_learned":  # ALiBi's slopes, where a model starts
        return [torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)])]
    if variant == "t5_table":
        return [torch.randn(31, H, generator=generator)]
    if variant == "evoformer":
        return [torch.randn(1, H, N, N, generator=generator).to(torch.bfloat16),
                torch.randn(B, H, N, D, generator=generator).to(torch.bfloat16)]
    return []
_jitted = {}
# The A/B of one gradient-program change in the same process
# (`--compare`): the previous form's flashlight-compile flags.
PREVIOUS = {"flashlight_previous": ("--unfused-key-value-gradients",)}


# More flashlight-compile flags for system `flashlight` (`--flags`: an
# experiment, e.g. --fuse-key-value-from=0); part of the cache key, so fill
# and run take the same.
FLAGS = []


def jitted(variant, system="flashlight"):
    if (variant, system) not in _jitted:
        _jitted[variant, system] = flashlight.jit(
            PROGRAMS[variant], runtime_shapes=False,
            flags=tuple(PREVIOUS.get(system, FLAGS)))
    return _jitted[variant, system]


def shapes(D, N):
    return 16384 // N, 2048 // D


def input_shapes(variant, B, H, N, D):
    """The [B, H, N, D] tensors' shapes (Q, K, V; differential's two Q and
    K)."""
    if variant in INPUTS:
        return [(B, H, N, D)] * INPUTS[variant]
    return qkv_shapes(variant, B, H, N, D)


def fill(cache, lengths, variants=None, compare=False):
    os.environ["FLASHLIGHT_CACHE"] = cache
    for variant, D in CONFIGS:
        if variants and variant not in variants:
            continue
        for N in lengths:
            B, H = shapes(D, N)
            xs = [torch.zeros(*shape, dtype=torch.bfloat16)
                  for shape in input_shapes(variant, B, H, N, D)]
            xs += extra_inputs(variant, B, H, N, D, torch.Generator().manual_seed(0))
            # What a call on CUDA tensors that require grad looks up.
            for system in ("flashlight", *(PREVIOUS if compare else ())):
                jitted(variant, system)._prepare_call(
                    [x.requires_grad_() if x.is_floating_point() else x for x in xs],
                    grad=True)
            print(f"{variant} d{D} n{N}: cached", flush=True)


def masked_peers(variant, inputs):
    """The masked variants' systems (`inputs`: the variant's, on the GPU):
    FlexAttention with bench.py's mask_mod and score_mod (its block mask
    built once, outside the timed call), its FLASH backend and FA4 where
    FA4 is importable (FA4 where its arguments express the variant), and
    the fraction of (query, key) pairs the mask keeps."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from bench import fa4_options, kept_fraction, mask_mod_for, score_mod_for
    from peers import fa4_func

    B, H, N = inputs[0].shape[:3]
    hkv = inputs[1].shape[1]
    doc = inputs[3] if variant == "document_mask" else None
    slopes = torch.tensor([2.0 ** (-8.0 * (x + 1) / H) for x in range(H)], device="cuda")
    mask_mod, score_mod = mask_mod_for(variant, doc), score_mod_for(variant, slopes)
    block_mask = create_block_mask(mask_mod, B if doc is not None else None, None, N, N)
    flex = torch.compile(flex_attention)

    def flex_call(q, k, v, *_, **options):
        return flex(q, k, v, score_mod=score_mod, block_mask=block_mask,
                    enable_gqa=hkv != H, **options)
    out = {"flashlight": jitted(variant), "flex": flex_call}
    fa4 = fa4_func()
    if fa4 is not None:
        out["flex_flash"] = lambda q, k, v, *_: flex_call(
            q, k, v, kernel_options={"BACKEND": "FLASH"})
        options = fa4_options(variant)
        if options is not None:
            def fa4_call(q, k, v, *_):
                o = fa4(*(x.transpose(1, 2) for x in (q, k, v)), **options)
                return (o[0] if isinstance(o, tuple) else o).transpose(1, 2)
            out["fa4"] = fa4_call
    return out, kept_fraction(mask_mod, B, N)


def systems(variant, compare=False):
    """name -> function of the variant's inputs with autograd. `compare`:
    the previous form and this one in alternating rounds (A B B A) before
    the peers."""
    if compare:
        return {"flashlight_previous#1": jitted(variant, "flashlight_previous"),
                "flashlight#1": jitted(variant),
                "flashlight#2": jitted(variant),
                "flashlight_previous#2": jitted(variant, "flashlight_previous")}
    if variant in BEYOND:
        return {"flashlight": jitted(variant), "compile": torch.compile(PROGRAMS[variant])}
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    is_causal = variant == "causal"

    def sdpa(backend):
        def call(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        return call

    flex = torch.compile(flex_attention)

    def flex_call(q, k, v, **options):
        n = q.shape[2]
        mask = None
        if is_causal:
            key = ("causal", n)
            if key not in _masks:
                _masks[key] = create_block_mask(lambda b, h, i, j: i >= j, None, None, n, n)
            mask = _masks[key]
        return flex(q, k, v, block_mask=mask, **options)

    out = {"flashlight": jitted(variant), "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
           "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "flex": flex_call,
           "compile": torch.compile(PROGRAMS[variant])}
    from peers import fa4_func

    fa4 = fa4_func()
    if fa4 is not None:
        # FlexAttention's FLASH backend (FA4's kernels, forward and
        # backward); a backend that cannot differentiate is reported.
        out["flex_flash"] = lambda q, k, v: flex_call(
            q, k, v, kernel_options={"BACKEND": "FLASH"})

        def fa4_call(q, k, v):
            o = fa4(*(x.transpose(1, 2) for x in (q, k, v)), causal=is_causal)
            return (o[0] if isinstance(o, tuple) else o).transpose(1, 2)
        out["fa4"] = fa4_call
    return out


_masks = {}


def rel(x, ref):
    return float((x.float() - ref).norm() / ref.norm())


def breakdown(call, ms, calls=20):
    """Prints the GPU kernels of one call (mean over `calls`) against its
    measured time `ms`: what the backward spends where."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            kernels[e.name] = kernels.get(e.name, 0.0) + e.device_time / 1e3 / calls
    total = sum(kernels.values())
    print(f"    kernels {total:.3f} ms of {ms:.3f} ms per call:")
    for name, t in sorted(kernels.items(), key=lambda kv: -kv[1])[:12]:
        print(f"    {t:8.3f} ms  {name[:90]}")


def run(cache, out_path, lengths, only=None, variants=None, profile=False,
        compare=False):
    # The backward is timed with the graph retained: compiled graphs
    # (FlexAttention) must not donate their buffers to it.
    import torch._functorch.config

    torch._functorch.config.donated_buffer = False
    # FlexAttention compiles once per shape, mask and backend: more than
    # dynamo's default of 8, past which it would run eagerly.
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.accumulated_recompile_limit = 4096

    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"
    records = []
    for variant, D in CONFIGS:
        if variants and variant not in variants:
            continue
        for N in lengths:
            B, H = shapes(D, N)
            g = torch.Generator().manual_seed(N + D)
            inputs = [torch.randn(*shape, generator=g).to("cuda", torch.bfloat16)
                      for shape in input_shapes(variant, B, H, N, D)]
            inputs += [x.to("cuda") for x in extra_inputs(variant, B, H, N, D, g)]
            dout = torch.randn(B, H, N, D, generator=g).to("cuda", torch.bfloat16)
            # Every floating-point input is differentiated (not document
            # ids).
            ref_in = [x.float().requires_grad_() if x.is_floating_point() else x
                      for x in inputs]
            ref = PROGRAMS[variant](*ref_in)
            ref_grads = torch.autograd.grad(ref, [x for x in ref_in if x.requires_grad],
                                            dout.float())
            del ref, ref_in
            # Each logit branch counts as one attention; causal halves, a
            # mask of the forward benchmark's counts the pairs it keeps.
            flops = 2.5 * 4 * B * H * N * N * D * (
                0.5 if variant in ("causal", "sinks", "alibi_learned", "t5_table") else 1.0)
            if variant in MASKED and not compare:
                candidates, kept = masked_peers(variant, inputs)
                flops *= kept
            else:
                candidates = systems(variant, compare)
            for name, fn in candidates.items():
                name, _, rnd = name.partition("#")
                if only and name not in only:
                    continue
                xs = [x.clone().requires_grad_() if x.is_floating_point() else x
                      for x in inputs]
                wrt = [x for x in xs if x.requires_grad]
                try:
                    out = fn(*xs)
                    grads = torch.autograd.grad(out, wrt, dout, retain_graph=True)
                    err = max(rel(a, b) for a, b in zip(grads, ref_grads))
                    ms = timed(lambda: torch.autograd.grad(out, wrt, dout, retain_graph=True),
                               warmup=50, rep=300)
                except Exception as e:  # noqa: BLE001 - a peer that cannot run
                    print(f"{variant} d{D} n{N} {name}: {type(e).__name__}: {str(e)[:200]}")
                    continue
                if profile:
                    breakdown(lambda: torch.autograd.grad(out, wrt, dout, retain_graph=True), ms)
                rec = {"variant": variant, "D": D, "N": N, "B": B, "H": H, "system": name,
                       "ms": ms, "tflops": flops / ms / 1e9, "rel_err": err}
                if rnd:
                    rec["round"] = int(rnd)
                records.append(rec)
                print(f"{variant:<8} d{D:<4} n{N:<5} {name:<11} {ms:8.3f} ms "
                      f"{rec['tflops']:6.1f} TFLOP/s  err {err:.1e}", flush=True)
                del out, grads
                write(out_path, records)  # what ran so far, if the run is cut


def write(out_path, records):
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "commit": os.environ.get("FLASHLIGHT_COMMIT", "unknown"),
              "command": "bench/backward.py fill CACHE (build); bench/backward.py "
                         + " ".join(sys.argv[1:]),
              "records": records}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["fill", "run"])
    parser.add_argument("cache")
    parser.add_argument("out", nargs="?")
    parser.add_argument("--lengths", default="2048,8192")
    parser.add_argument("--systems", help="only these, comma-separated")
    parser.add_argument("--variants", help="only these, comma-separated")
    parser.add_argument("--profile", action="store_true",
                        help="print each call's GPU kernels and their times")
    parser.add_argument("--compare", action="store_true",
                        help="Flashlight against its previous gradient form "
                             "(PREVIOUS), alternating rounds, no peers")
    parser.add_argument("--flags", default="",
                        help="more flashlight-compile flags (space-separated) for "
                             "system flashlight, at fill and run alike")
    parser.add_argument("--previous", default=None,
                        help="with --compare: the previous form's flags "
                             "(default: " + " ".join(PREVIOUS["flashlight_previous"]) +
                             "; '' for the default compile)")
    a = parser.parse_args()
    FLAGS.extend(a.flags.split())
    if a.previous is not None:
        PREVIOUS["flashlight_previous"] = tuple(a.previous.split())
    lengths = [int(x) for x in a.lengths.split(",")]
    if a.mode == "fill":
        fill(a.cache, lengths, a.variants and a.variants.split(","), a.compare)
    else:
        run(a.cache, a.out, lengths, a.systems and a.systems.split(","),
            a.variants and a.variants.split(","), a.profile, a.compare)
