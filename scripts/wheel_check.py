#!/usr/bin/env python3
"""The GPU check of the pip package on a machine without LLVM or MLIR.

    scripts/build-wheel.sh DIST                       # build machine
    pip install --no-deps --target SITE DIST/*.whl     # GPU machine
    PYTHONPATH=SITE python3 scripts/wheel_check.py OUT.json

Imports flashlight from the installed package only (the repository's
python/ is not on the path), checks that the compiler is the one the
package carries and that it runs here (no LLVM 22), then compiles from an
empty cache and runs: a `flashlight.jit` function at four shapes (a batch
of 1 among them: one kernel with runtime shapes serves the last two), and a
`flashlight.jax.jit` function at two shapes inside `jax.jit` and one with
runtime shapes at four (and its `jax.grad`); each output against the
function itself in f32 (bf16 tolerance 2e-2).
"""

import json
import os
import subprocess
import sys
import tempfile


def rel_err(out, ref):
    import numpy as np

    out, ref = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def main(out_path):
    import flashlight
    from flashlight._jit import find_compiler

    records, failures = [], 0

    def record(ok, **fields):
        nonlocal failures
        failures += not ok
        records.append({**fields, "pass": ok})
        print(fields, "pass" if ok else "FAIL", flush=True)

    compiler = find_compiler()
    package = os.path.dirname(os.path.abspath(flashlight.__file__))
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True)
    record(compiler.startswith(package) and version.returncode == 0, check="compiler",
           compiler=compiler, output=(version.stdout + version.stderr).strip()[:200])
    os.environ["FLASHLIGHT_CACHE"] = tempfile.mkdtemp(prefix="wheel-cache-")

    import torch

    def causal_bnhd(q, k, v):
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2)

    jf = flashlight.jit(causal_bnhd)
    for b, n in ((2, 256), (1, 384), (3, 1000), (1, 77)):
        g = torch.Generator().manual_seed(n)
        args = [torch.randn(b, n, 8, 64, generator=g).to("cuda", torch.bfloat16)
                for _ in range(3)]
        with torch.no_grad():
            out = jf(*args).float().cpu()
            ref = causal_bnhd(*[a.float() for a in args]).cpu()
        err = rel_err(out, ref)
        record(err <= 2e-2, check="jit", B=b, N=n, rel_err=err, compiles=jf.compiles)
    # (2, 256) for its shapes; (1, 384) too (torch.export specializes a
    # batch of 1, so the pair is refused); (3, 1000) with runtime shapes,
    # which (1, 77) takes.
    record(jf.compiles == 3, check="jit compiles", compiles=jf.compiles)

    import jax
    import jax.numpy as jnp

    import flashlight.jax as fj

    def dpa(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")

    attention = fj.jit(dpa)
    for n in (256, 512):
        keys = jax.random.split(jax.random.PRNGKey(n), 3)
        args = [jax.random.normal(k, (2, n, 4, 64), jnp.float32).astype(jnp.bfloat16)
                for k in keys]
        out = jax.jit(lambda q, k, v: attention(q, k, v) * 2)(*args)
        ref = dpa(*[a.astype(jnp.float32) for a in args]) * 2
        err = rel_err(out.astype(jnp.float32), ref)
        record(err <= 2e-2, check="jax", N=n, rel_err=err, compiles=attention.compiles)
    # Runtime shapes: the second shape class compiles the kernel that the
    # later ones take (the arrays in place through its strides), a batch of
    # 1 among them; jax.grad at the first shape.
    shaped = fj.jit(dpa, runtime_shapes=True)
    for b, n in ((2, 256), (3, 384), (5, 1000), (1, 130)):
        keys = jax.random.split(jax.random.PRNGKey(b * n), 4)
        args = [jax.random.normal(k, (b, n, 4, 64), jnp.float32).astype(jnp.bfloat16)
                for k in keys[:3]]
        out = jax.jit(shaped)(*args)
        ref = dpa(*[a.astype(jnp.float32) for a in args])
        err = rel_err(out.astype(jnp.float32), ref)
        record(err <= 2e-2, check="jax runtime shapes", B=b, N=n, rel_err=err,
               compiles=shaped.compiles)
        if n == 256:
            # The plain function above compiled this lowering: a cache hit
            # or not, what comes after compiles once.
            first = shaped.compiles
            dout = jax.random.normal(keys[3], out.shape, jnp.float32)

            def loss(f):
                return lambda *a: (f(*a).astype(jnp.float32) * dout).sum()
            ours = jax.jit(jax.grad(loss(shaped), (0, 1, 2)))(*args)
            want = jax.grad(loss(dpa), (0, 1, 2))(*[a.astype(jnp.float32) for a in args])
            err = max(rel_err(o.astype(jnp.float32), w) for o, w in zip(ours, want))
            record(err <= 2e-2, check="jax grad", B=b, N=n, rel_err=err)
    # (3, 384) with runtime B and N against (2, 256), which (5, 1000) and
    # (1, 130) take.
    record(shaped.compiles == first + 1, check="jax runtime shapes compiles",
           compiles=shaped.compiles - first)

    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "jax": jax.__version__, "commit": os.environ.get("FLASHLIGHT_COMMIT", "unknown"),
              "command": "scripts/build-wheel.sh DIST; pip install --no-deps --target SITE "
                         "DIST/*.whl; PYTHONPATH=SITE scripts/wheel_check.py OUT (GPU)",
              "records": records}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wheel_check: {len(records) - failures}/{len(records)} pass")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
