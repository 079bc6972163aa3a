#!/usr/bin/env python3
"""The GPU check of flashlight.jax_ring: ring attention inside shard_map
over the GPUs of one machine, each step a Flashlight kernel through the
XLA FFI call, forward and (jax.grad) backward. Three steps, as
scripts/jax_ffi_check.py (the cache key is the StableHLO text, and the GPU
machine's JAX, which lowers it, is not the build machine's):

    scripts/jax_ring_check.py lower TEXTS          # GPU machine (one GPU is enough)
    scripts/jax_ring_check.py fill CACHE TEXTS     # build machine: compile
    scripts/jax_ring_check.py run CACHE OUT.json   # GPU machine, 2 or 4 GPUs

`run` (no compiler there: the cache must serve) runs the ring on 2 and, where
there are 4 GPUs, 4 devices, causal, full, a causal sliding window of
WINDOW keys and packed documents (DOCUMENTS), on [B, H, N, D] =
[1, 8, 8192, 128] bf16 inputs, and compares the output and dq, dk, dv with
XLA's f32 attention over the whole sequence on one device with the same
mask (relative Frobenius error, bf16 tolerance 2e-2). No PyTorch is
imported.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import lowered_check  # noqa: E402  (beside this script)

B, H, N, D = 1, 8, 8192, 128
WORLDS = (2, 4)
WINDOW = 1500
# Packed documents: lengths that cross the ring's chunks.
DOCUMENTS = (1000, 3000, 700, 2500, 992)


def document_ids():
    import numpy as np

    return np.repeat(np.arange(len(DOCUMENTS)), DOCUMENTS).astype(np.int32)


def step_shapes(world):
    """(causal, [q, k, v shapes]) of every step call the ring traces on
    `world` devices (lax.cond traces both branches)."""
    c = N // (2 * world)
    whole, half = (B, H, 2 * c, D), (B, H, c, D)
    return [(True, [whole] * 3),            # a device's own chunks
            (False, [whole, half, half]),   # both query chunks, one key chunk
            (False, [half, whole, whole]),  # the second query chunk, both key chunks
            (False, [whole] * 3)]           # full attention


def programs():
    import jax
    import jax.numpy as jnp

    import flashlight.jax_ring as ring

    seen = {}
    for world in WORLDS:
        for causal, shapes in step_shapes(world):
            name = f"{'causal' if causal else 'plain'}." + "_".join(
                str(s[2]) for s in shapes)
            seen[name] = (ring.step_program(causal),
                          [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in shapes])
        # The masked rings' steps: one chunk pair, its positions (and ids).
        c = N // (2 * world)
        pair = [jax.ShapeDtypeStruct((B, H, c, D), jnp.bfloat16)] * 3
        ids = [jax.ShapeDtypeStruct((c,), jnp.int32)] * 2
        seen[f"window{WINDOW}.{c}"] = (ring.step_program(True, window=WINDOW), pair + ids)
        seen[f"document.{c}"] = (ring.step_program(True, document=True), pair + ids * 2)
    return seen


def lower(texts):
    lowered_check.lower(texts, programs())


def fill(cache, texts):
    # The step program and its gradient program with saved statistics.
    lowered_check.fill(cache, texts, lambda name: [(), ("--gradient", "--saved-statistics")])


def run(cache, out_path):
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, PartitionSpec as P

    import flashlight.jax_ring as ring

    # Each step's kernels come from `cache` (the default step function's
    # flashlight.jax.jit takes the default cache: point it there).
    os.environ["FLASHLIGHT_CACHE"] = cache
    devices = jax.devices()
    records, failures = [], 0
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q, k, v, dout = (jax.random.normal(key, (B, H, N, D), jnp.float32) for key in keys)
    q, k, v = (x.astype(jnp.bfloat16) for x in (q, k, v))
    t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731  (jax.nn takes [B, N, H, D])
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731

    def err(got, want):
        return float(jnp.linalg.norm(f32(got) - want) / jnp.linalg.norm(want))

    i, j = np.arange(N)[:, None], np.arange(N)[None, :]
    ids = document_ids()
    variants = {"causal": ({}, None), "vanilla": ({"causal": False}, None),
                f"window{WINDOW}": ({"window": WINDOW}, (j <= i) & (i - j < WINDOW)),
                "document": ({"document": jnp.asarray(ids)},
                             (j <= i) & (ids[:, None] == ids[None, :]))}
    for variant, (options, keep) in variants.items():
        causal = options.get("causal", True)

        def whole(q, k, v):
            return t(jax.nn.dot_product_attention(
                t(q), t(k), t(v), is_causal=causal and keep is None,
                mask=None if keep is None else jnp.asarray(keep), implementation="xla"))

        args32 = [f32(x) for x in (q, k, v)]
        ref = jax.jit(whole)(*args32)
        ref_grads = jax.jit(jax.grad(lambda *a: (whole(*a) * dout).sum(), argnums=(0, 1, 2)))(
            *args32)
        for world in WORLDS:
            if world > len(devices):
                print(f"world {world}: only {len(devices)} GPUs, skipped")
                continue
            mesh = Mesh(np.array(devices[:world]), ("seq",))
            spec = P(None, None, "seq", None)
            attend = jax.shard_map(
                lambda q, k, v: ring.attention(q, k, v, "seq", **options),
                mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)

            def ours(q, k, v):
                out = attend(*(ring.zigzag(x, world) for x in (q, k, v)))
                return ring.unzigzag(out, world)

            out = jax.jit(ours)(q, k, v)
            grads = jax.jit(jax.grad(lambda *a: (f32(ours(*a)) * dout).sum(),
                                     argnums=(0, 1, 2)))(q, k, v)
            errs = {"out": err(out, ref)}
            errs.update({name: err(g, r) for name, g, r in zip(("dq", "dk", "dv"), grads,
                                                               ref_grads)})
            ok = all(e <= 2e-2 for e in errs.values())
            failures += not ok
            records.append({"world_size": world, "N": N, "D": D, "H": H, "B": B,
                            "variant": variant, "pass": ok,
                            **{f"rel_err_{name}": e for name, e in errs.items()}})
            print(f"world {world} {variant:<10} "
                  f"{'pass' if ok else 'FAIL'} " +
                  " ".join(f"{name}={e:.2e}" for name, e in errs.items()), flush=True)
    return lowered_check.write_result(
        out_path, "jax_ring_check", "scripts/jax_ring_check.py lower T (GPU); fill CACHE T "
        "(build); run CACHE OUT (GPU, 2-4 GPUs)", records, failures)


if __name__ == "__main__":
    lowered_check.main(__doc__, lower, fill, run)
