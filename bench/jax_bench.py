#!/usr/bin/env python3
"""flashlight.jax against XLA's attentions, inside jax.jit, in one process.

    bench/jax_bench.py lower TEXTS          # the GPU machine (its JAX lowers)
    bench/jax_bench.py fill CACHE TEXTS     # where the compiler is
    bench/jax_bench.py run CACHE OUT.json   # the GPU machine

Vanilla and causal attention as JAX users write it
(`jax.nn.dot_product_attention(..., implementation="xla")` on `[B, N, H, D]`
arrays; B * N = 16k, H * D = 2048, bf16) at D = 64 / 128, N = 2k / 8k.
Systems, each inside `jax.jit`:

- `flashlight`: the function decorated with `flashlight.jax.jit`; its
  backward is the training forward's saved output and log-sum-exp and the
  gradient program that takes them;
- `flashlight_recompute`: the same, but the backward is the gradient
  program that computes the forward's statistics again (what `jax.grad`
  ran before the training forward; in alternating rounds with
  `flashlight`, A B B A);
- `cudnn`: `jax.nn.dot_product_attention(..., implementation="cudnn")`;
- `xla`: the function itself, compiled by XLA.

Modes: `forward` (the jitted call) and `backward` (the jitted
vector-Jacobian product of a forward that ran before: `jax.vjp`'s function
called on dO, so the backward alone). Before timing, each result is
compared with XLA's f32 result of the function on the same inputs
(relative Frobenius error; the worst of dQ, dK, dV). Times: the mean of a
batch of calls between two `block_until_ready`s, the best of five
batches. TFLOP/s count 4 * B * H * N^2 * D for the forward, 2.5 times that
for the backward, halved for causal. Writes {"gpu", "jax", "commit",
"command", "records": [{variant, D, N, system, mode, ms, tflops,
rel_err}]}.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import lowered_check  # noqa: E402

CONFIGS = [(variant, D, N) for variant in ("vanilla", "causal") for D in (64, 128)
           for N in (2048, 8192)]


def program(variant, implementation="xla"):
    import jax

    def attention(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=variant == "causal",
                                            implementation=implementation)
    return attention


def shape(D, N):
    return (16384 // N, N, 2048 // D, D)


def name(variant, D, N):
    return f"{variant}_d{D}_n{N}"


def lower(texts):
    import jax
    import jax.numpy as jnp

    lowered_check.lower(texts, {
        name(variant, D, N): (program(variant),
                              [jax.ShapeDtypeStruct(shape(D, N), jnp.bfloat16)] * 3)
        for variant, D, N in CONFIGS})


def fill(cache, texts):
    lowered_check.fill(cache, texts, lambda _: [
        (), ("--return-lse",), ("--gradient", "--saved-statistics"), ("--gradient",)])


def best_ms(call, *args, calls=20, batches=5):
    """The best over `batches` of the mean time of `calls` calls."""
    import jax

    jax.block_until_ready(call(*args))
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            out = call(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - start) / calls * 1e3)
    return min(times)


def systems(variant):
    """name -> function of (q, k, v), in timing order."""
    import flashlight.jax as fj

    class Recomputing(fj.JaxFunction):
        """flashlight.jax.jit without a training forward."""

        def prepare_training(self, *args):
            return None

    fn = program(variant)
    ours, again = fj.jit(fn), Recomputing(fn)
    return [("flashlight_recompute", again), ("flashlight", ours), ("flashlight", ours),
            ("flashlight_recompute", again), ("cudnn", program(variant, "cudnn")),
            ("xla", fn)]


def run(cache, out_path):
    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    import jax
    import jax.numpy as jnp

    records, failures = [], 0
    for variant, D, N in CONFIGS:
        keys = jax.random.split(jax.random.PRNGKey(N + D), 4)
        q, k, v, dout = (jax.random.normal(key, shape(D, N), jnp.float32) for key in keys)
        ref, ref_vjp = jax.vjp(jax.jit(program(variant)), q, k, v)
        ref_grads = ref_vjp(dout)
        q, k, v, dout = (x.astype(jnp.bfloat16) for x in (q, k, v, dout))
        B, _, H, _ = shape(D, N)
        flops = 4 * B * H * N * N * D * (0.5 if variant == "causal" else 1.0)
        rounds = {}
        for system, fn in systems(variant):
            rounds[system] = rounds.get(system, 0) + 1
            forward = jax.jit(fn)
            out, pull = jax.vjp(forward, q, k, v)
            backward = jax.jit(lambda pull, g: pull(g))
            grads = backward(pull, dout)
            for mode, ms, err, work in (
                    ("forward", best_ms(forward, q, k, v), error([out], [ref]), flops),
                    ("backward", best_ms(backward, pull, dout), error(grads, ref_grads),
                     2.5 * flops)):
                ok = err <= 2e-2
                failures += not ok
                records.append({"variant": variant, "D": D, "N": N, "B": B, "H": H,
                                "system": system, "round": rounds[system], "mode": mode,
                                "ms": ms, "tflops": work / ms / 1e9, "rel_err": err,
                                "pass": ok})
                print(f"{variant:<8} d{D:<4} n{N:<5} {system:<21} {mode:<8} {ms:8.3f} ms "
                      f"{work / ms / 1e9:6.1f} TFLOP/s  err {err:.1e}"
                      f"{'' if ok else '  FAIL'}", flush=True)
            if system.startswith("flashlight") and fn.compiles:
                raise RuntimeError(f"{variant} d{D} n{N}: compiled on the GPU machine")
            if system == "flashlight" and not all(fn._training.values()):
                raise RuntimeError(f"{variant} d{D} n{N}: no training forward in the cache")
            del out, pull, grads
    return lowered_check.write_result(
        out_path, "jax_bench", "bench/jax_bench.py lower T (GPU); fill CACHE T (build); "
        "run CACHE OUT (GPU)", records, failures)


def error(outs, refs):
    import jax.numpy as jnp

    return max(float(jnp.linalg.norm(jnp.asarray(o, jnp.float32) - r) / jnp.linalg.norm(r))
               for o, r in zip(outs, refs))


if __name__ == "__main__":
    lowered_check.main(__doc__, lower, fill, run)
