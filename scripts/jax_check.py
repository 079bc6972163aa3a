#!/usr/bin/env python3
"""Checks Flashlight kernels compiled from the JAX programs of
`scripts/jax_fixtures.py` against JAX's own output of the same programs, on
the GPU machine (JAX with CUDA, PyTorch).

    python3 scripts/jax_check.py COMPILED_DIR [--out results.jsonl] [--require-all]

For every COMPILED_DIR/<name>.json manifest whose name is a program of
`jax_fixtures.PROGRAMS`: draws random inputs (fixed seed) in the declared
dtypes, evaluates the JAX function on f32 copies of them (the reference, with
f32 matmuls at full precision) and on the inputs as they are (JAX's native
result, reported for context), calls the kernel through
`flashlight.load(manifest).call_entry(...)` with the same inputs as CUDA torch
tensors, and compares: rel_err = ||out - ref||_F / ||ref||_F in float64. A
program passes when its output has no NaN and rel_err is within the tolerance
of its q dtype (bf16 2e-2, f16 5e-3, f32 1e-3). Prints one line per program
and a summary, writes one JSON line per program to --out, exits 1 on any
failure. A program without a manifest is a failure ("not compiled") only
with --require-all; otherwise it is skipped.
"""

import argparse
import json
import os
import sys

# JAX would otherwise take most of the GPU memory that PyTorch needs.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import flashlight  # noqa: E402
from fixture_common import TOLERANCE, report  # noqa: E402
import jax_fixtures  # noqa: E402

SEED = 0
FLOATS = ("bf16", "f16", "f32")


def random_input(rng, name, shape, dtype):
    """One input as a numpy array in f32 (floats), int32 or bool, by the
    parameter's name and dtype: document ids are sorted small ints per batch
    row, masks are random with the diagonal kept, ALiBi slopes lie in (0, 1),
    every other float is N(0, 1) (so q.k / sqrt(D) is O(1))."""
    if dtype == "i32":
        return np.sort(rng.integers(0, 4, size=shape), axis=-1).astype(np.int32)
    if dtype == "bool":
        return (rng.random(shape) < 0.5) | np.eye(shape[-2], shape[-1], dtype=bool)
    if name == "slopes":
        return rng.uniform(0.0, 1.0, size=shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def to_torch(x):
    """A JAX array as a CUDA torch tensor with the same bits."""
    a = np.array(x)
    if a.dtype == jnp.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(a).cuda()


def leaves(result):
    return [np.asarray(r, dtype=np.float64) for r in jax.tree_util.tree_leaves(result)]


def rel_err(outs, refs):
    """The largest relative Frobenius error over the outputs (NaN if any
    output has a NaN)."""
    worst = 0.0
    for o, r in zip(outs, refs):
        if np.isnan(o).any():
            return float("nan")
        worst = max(worst, float(np.linalg.norm(o - r) / max(np.linalg.norm(r), 1e-30)))
    return worst


def check(prog, manifest):
    rng = np.random.default_rng(SEED)
    raw = [random_input(rng, arg, shape, dtype)
           for arg, (shape, dtype) in zip(prog.arg_names, prog.inputs)]
    inputs = [jnp.asarray(x, dtype=jax_fixtures.DTYPES[dtype])
              for x, (_, dtype) in zip(raw, prog.inputs)]
    inputs_f32 = [x.astype(jnp.float32) if dtype in FLOATS else x
                  for x, (_, dtype) in zip(inputs, prog.inputs)]
    with jax.default_matmul_precision("highest"):
        refs = leaves(jax.jit(prog.fn)(*inputs_f32))
    native = leaves(jax.jit(prog.fn)(*inputs))

    kernel = flashlight.load(manifest)
    kernel.poison = True  # an element the kernel skips stays NaN
    outs = kernel.call_entry(*[to_torch(x) for x in inputs])
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    outs = [o.detach().to(torch.float64).cpu().numpy() for o in outs]
    if len(outs) != len(refs):
        raise RuntimeError(f"{len(outs)} outputs, the program has {len(refs)}")
    for o, r in zip(outs, refs):
        if o.shape != r.shape:
            raise RuntimeError(f"output shape {o.shape}, the program's is {r.shape}")
    return rel_err(outs, refs), rel_err(native, refs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compiled_dir")
    parser.add_argument("--out", help="write one JSON line per program here")
    parser.add_argument("--require-all", action="store_true",
                        help="count programs without a manifest as failures")
    args = parser.parse_args()

    results = []
    print(f"{'program':<22} {'dtype':<5} {'rel_err':>9} {'jax_native':>10}  status")
    for name, prog in jax_fixtures.PROGRAMS.items():
        dtype = prog.inputs[0][1]
        manifest = os.path.join(args.compiled_dir, f"{name}.json")
        result = {"name": name, "dtype": dtype, "rel_err": None,
                  "jax_native_rel_err": None, "pass": False}
        if not os.path.exists(manifest):
            if not args.require_all:
                continue
            result["error"] = "not compiled"
        else:
            try:
                err, native_err = check(prog, manifest)
            except Exception as e:  # one broken kernel must not stop the others
                result["error"] = f"{type(e).__name__}: {e}"
            else:
                result["rel_err"] = None if np.isnan(err) else err
                result["jax_native_rel_err"] = None if np.isnan(native_err) else native_err
                if np.isnan(err):
                    result["error"] = "NaN in the output"
                result["pass"] = bool(err <= TOLERANCE[dtype])
        results.append(result)
        if "error" in result:
            detail = f"FAIL ({result['error']})"
        else:
            detail = f"{err:9.2e} {native_err:10.2e}  {'ok' if result['pass'] else 'FAIL'}"
        print(f"{name:<22} {dtype:<5} {detail}", flush=True)

    report(results, args.out)

if __name__ == "__main__":
    main()
