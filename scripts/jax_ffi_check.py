#!/usr/bin/env python3
"""The GPU check of flashlight.jax.jit (an XLA FFI custom call inside
jax.jit). Three steps, because the cache key is the StableHLO text and the
GPU machine's JAX (which lowers it) is not the build machine's:

    scripts/jax_ffi_check.py lower TEXTS           # GPU machine: the texts
    scripts/jax_ffi_check.py fill CACHE TEXTS      # build machine: compile
    scripts/jax_ffi_check.py run CACHE OUT.json    # GPU machine: check

`run` (no compiler there: the cache must serve) calls each program inside
`jax.jit` (with JAX code around the attention) and eagerly (`projected`
computes more than its attention: a projection after it, as XLA's GEMM,
and the reference path's other kernels, as custom calls; `two_layers`
calls two attention kernels of one manifest; `biased` reads a pair bias
and `slopes` learned ALiBi slopes, whose gradients are checked too), and compares
with the function itself run by XLA in f32 on the same inputs (relative
Frobenius error, bf16 tolerance 2e-2); for GRADIENTS, also `jax.grad`
inside `jax.jit` (the gradient program, through jax.custom_vjp) against
XLA's f32 gradients (through the training forward, which keeps the
log-sum-exp, and the gradient program with saved statistics). No PyTorch
is imported.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import lowered_check  # noqa: E402  (beside this script)

B, H, N, D = 2, 4, 256, 64


def programs():
    import jax
    import jax.numpy as jnp

    def bhnd(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1).astype(v.dtype), v)

    def dpa_causal(q, k, v):  # [B, N, H, D], as jax.nn writes it
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")

    def gqa_window(q, k, v):  # 4 query heads per KV head, window of 64
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, local_window_size=(64, 0),
                                            implementation="xla")

    def projected(q, k, v, w):  # more than layouts: the reference path's steps
        o = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
        o = o.reshape(B, N, H * D) @ w
        return o * jax.nn.sigmoid(o)

    def two_layers(x, w):  # two attention kernels, a projection between them
        h = jax.nn.dot_product_attention(x, x, x, implementation="xla")
        h = (h.reshape(B, N, H * D) @ (w * 0.0625)).reshape(B, N, H, D)
        return jax.nn.dot_product_attention(h, h, h, is_causal=True, implementation="xla")

    def biased(q, k, v, bias):  # a learned pair bias: its gradient too
        return jax.nn.dot_product_attention(q, k, v, bias=bias, implementation="xla")

    def slopes(q, k, v, m):  # learned ALiBi slopes [H], causal: their gradient too
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / jnp.sqrt(jnp.float32(D))
        i = jnp.arange(s.shape[-1])
        # Small slopes, as a model learning them starts (bf16 inputs are
        # standard normal): 0.05 m per key of distance.
        s = s + (0.05 * m.astype(jnp.float32))[None, :, None, None] * \
            (i[None, :] - i[:, None]).astype(jnp.float32)
        s = jnp.where(i[None, :] <= i[:, None], s, -jnp.inf)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1).astype(v.dtype), v)

    return {
        "projected": (projected, [(B, N, H, D)] * 3 + [(H * D, 128)]),
        "two_layers": (two_layers, [(B, N, H, D), (H * D, H * D)]),
        "bhnd": (bhnd, [(B, H, N, D)] * 3),
        "dpa_causal": (dpa_causal, [(B, N, H, D)] * 3),
        # From N = 2048 the gradient program computes dK and dV in one
        # kernel ([dK | dV], sliced by XLA).
        "dpa_causal_2k": (dpa_causal, [(1, 2048, H, D)] * 3),
        "gqa_window": (gqa_window, [(B, N, 8, D), (B, N, 2, D), (B, N, 2, D)]),
        "biased": (biased, [(B, N, H, D)] * 3 + [(1, H, N, N)]),
        "slopes": (slopes, [(B, N, H, D)] * 3 + [(H,)]),
    }


# Programs whose gradients are checked too (one attention and its layouts).
GRADIENTS = ("bhnd", "dpa_causal", "dpa_causal_2k", "gqa_window", "biased", "slopes")


def specs(shapes):
    import jax
    import jax.numpy as jnp

    return [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in shapes]


def lower(texts):
    lowered_check.lower(texts, {name: (fn, specs(shapes))
                                for name, (fn, shapes) in programs().items()})


def fill(cache, texts):
    # jax.grad runs the training forward (--return-lse) and the gradient
    # program with saved statistics; a differentiated argument the score
    # reads (biased, slopes) makes the jit look for the one with
    # --score-capture-gradients after the plain one.
    lowered_check.fill(cache, texts, lambda name: [()] + (
        [("--return-lse",), ("--gradient", "--saved-statistics"),
         ("--gradient", "--saved-statistics", "--score-capture-gradients")]
        if name in GRADIENTS else []))


def run(cache, out_path):
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    import jax
    import jax.numpy as jnp

    import flashlight.jax as fj

    records, failures = [], 0
    for i, (name, (fn, shapes)) in enumerate(programs().items()):
        jf = fj.jit(fn, cache=cache)
        keys = jax.random.split(jax.random.PRNGKey(i), len(shapes))
        args = [jax.random.normal(k, s, jnp.float32).astype(jnp.bfloat16)
                for k, s in zip(keys, shapes)]
        ref = jax.jit(fn)(*[a.astype(jnp.float32) for a in args]).astype(jnp.float32)

        def err(out):
            out = jnp.asarray(out, jnp.float32)
            return float(jnp.linalg.norm(out - ref) / jnp.linalg.norm(ref))

        # Inside jax.jit, with JAX code around the call.
        wrapped = jax.jit(lambda *a: jf(*a) * 2.0)
        for mode, value in (("jit", wrapped(*args) / 2.0), ("eager", jf(*args))):
            e = err(value)
            ok = e <= 2e-2
            failures += not ok
            records.append({"program": name, "mode": mode, "rel_err": e, "pass": ok})
            print(f"{name:<12} {mode:<6} {'pass' if ok else 'FAIL'} rel_err={e:.2e}", flush=True)
        if name in GRADIENTS:
            # jax.grad inside jax.jit: the gradient program, against XLA's
            # f32 gradients of the function itself.
            dout = jax.random.normal(jax.random.PRNGKey(100 + i), ref.shape, jnp.float32)
            argnums = tuple(range(len(args)))

            def loss(f):
                return lambda *a: (f(*a).astype(jnp.float32) * dout).sum()

            ours = jax.jit(jax.grad(loss(jf), argnums))(*args)
            want = jax.grad(loss(fn), argnums)(*[a.astype(jnp.float32) for a in args])
            e = max(float(jnp.linalg.norm(jnp.asarray(o, jnp.float32) - w) / jnp.linalg.norm(w))
                    for o, w in zip(ours, want))
            # The training forward served the backward (a missing cache
            # entry would fall back to the recomputing gradient program).
            saved = bool(jf._training) and all(jf._training.values())
            ok = e <= 2e-2 and saved
            failures += not ok
            records.append({"program": name, "mode": "grad", "rel_err": e,
                            "saved_statistics": saved, "pass": ok})
            print(f"{name:<12} {'grad':<6} {'pass' if ok else 'FAIL'} rel_err={e:.2e}", flush=True)
        if jf.compiles:
            raise RuntimeError(f"{name}: compiled on the GPU machine (cache miss)")
        text = jax.jit(lambda *a: jf(*a)).lower(*args).as_text()
        records[-1]["custom_call_in_jit"] = fj.TARGET in text
    return lowered_check.write_result(
        out_path, "jax_ffi_check", "scripts/jax_ffi_check.py lower T (GPU); fill CACHE T "
        "(build); run CACHE OUT (GPU)", records, failures)


if __name__ == "__main__":
    lowered_check.main(__doc__, lower, fill, run)
