"""What the fixture exporters (jax_fixtures.py, torch_fixtures.py) and their
GPU checkers (jax_check.py, torch_import_check.py) share: the default sizes,
the program registry, the tolerances and the report."""

import json
import sys

B, H, N, D = 2, 4, 128, 64
BHND = (B, H, N, D)
BNHD = (B, N, H, D)

#: Relative Frobenius error allowed against the f32 reference, by q dtype.
TOLERANCE = {"bf16": 2e-2, "f16": 5e-3, "f32": 1e-3}


def qkv(shape=BHND, dtype="bf16", kv_shape=None):
    """Input specs of q, k, v; k and v take kv_shape when given."""
    kv_shape = kv_shape or shape
    return [(shape, dtype), (kv_shape, dtype), (kv_shape, dtype)]


def registry(programs, program_class):
    """A decorator `program(inputs, description)` that registers the
    decorated function in `programs` under its own name."""

    def program(inputs, description):
        def register(fn):
            programs[fn.__name__] = program_class(fn, inputs, description)
            return fn

        return register

    return program


def report(results, out_path):
    """Prints the summary, writes one JSON line per result to `out_path`
    (if given) and exits 1 unless every result passed."""
    passed = sum(r["pass"] for r in results)
    print(f"{passed}/{len(results)} passed")
    if out_path:
        with open(out_path, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    sys.exit(0 if results and passed == len(results) else 1)
