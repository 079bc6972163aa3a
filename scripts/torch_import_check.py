#!/usr/bin/env python3
"""Checks Flashlight kernels compiled from the PyTorch programs of
`scripts/torch_fixtures.py` (exported by `flashlight.export`, imported from
the JSON graph) against PyTorch's own output of the same programs, on the
GPU machine.

    python3 scripts/torch_import_check.py COMPILED_DIR [--out results.jsonl]

For every COMPILED_DIR/<name>.json manifest of a program in
`torch_fixtures.PROGRAMS`: draws random inputs (fixed seed) in the declared
dtypes, evaluates the function in PyTorch on f32 copies of them (the
reference; TF32 off) and as they are (PyTorch's native result, for
context), calls the kernel through `flashlight.load(manifest).call_entry`
with outputs poisoned (NaN), and compares: rel_err = ||out - ref|| / ||ref||
in float64. Passes with no NaN and rel_err within the q dtype's tolerance
(bf16 2e-2, f16 5e-3, f32 1e-3). Exits 1 on any failure.
"""

import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import flashlight  # noqa: E402
from fixture_common import TOLERANCE, report  # noqa: E402
import torch_fixtures  # noqa: E402

FLOATS = (torch.bfloat16, torch.float16, torch.float32)


def random_input(gen, name, shape, dtype):
    """Floats N(0, 1) (ALiBi slopes in (0, 1)), bool masks random with the
    diagonal kept."""
    if dtype == "bool":
        keep = torch.rand(shape, generator=gen) < 0.5
        return keep | torch.eye(shape[-2], shape[-1], dtype=torch.bool)
    if name == "slopes":
        return torch.rand(shape, generator=gen)
    return torch.randn(shape, generator=gen).to(torch_fixtures.DTYPES[dtype])


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    if torch.isnan(out).any():
        return float("nan")
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def check(name, prog, manifest):
    gen = torch.Generator().manual_seed(0)
    names = list(prog.fn.__code__.co_varnames[:len(prog.inputs)])
    inputs = [random_input(gen, n, shape, dtype).cuda()
              for n, (shape, dtype) in zip(names, prog.inputs)]
    f32 = [x.float() if x.dtype in FLOATS else x for x in inputs]
    with torch.no_grad():
        ref = prog.fn(*f32)
        native = prog.fn(*inputs)
    kernel = flashlight.load(manifest)
    kernel.poison = True  # an element the kernel skips stays NaN
    out = kernel.call_entry(*inputs)
    if out.shape != ref.shape:
        raise RuntimeError(f"output shape {tuple(out.shape)}, the program's is "
                           f"{tuple(ref.shape)}")
    return rel_err(out, ref), rel_err(native, ref)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compiled_dir")
    parser.add_argument("--out", help="write one JSON line per program here")
    parser.add_argument("--fixtures", metavar="DIR/*.SUFFIX",
                        help="check only the programs with a fixture here "
                        "(torch-mlir's text has none for programs added later)")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    # Captured tensors of the programs live with the inputs, on the GPU.
    for attr, value in vars(torch_fixtures).items():
        if isinstance(value, torch.Tensor):
            setattr(torch_fixtures, attr, value.cuda())

    results = []
    print(f"{'program':<22} {'dtype':<5} {'rel_err':>9} {'torch':>9}  status")
    for name, prog in torch_fixtures.PROGRAMS.items():
        dtype = prog.inputs[0][1]
        if args.fixtures and not os.path.exists(args.fixtures.replace("*", name)):
            print(f"{name:<22} {dtype:<5} no fixture, skipped")
            continue
        manifest = os.path.join(args.compiled_dir, f"{name}.json")
        result = {"name": name, "dtype": dtype, "rel_err": None,
                  "torch_native_rel_err": None, "pass": False}
        if not os.path.exists(manifest):
            result["error"] = "not compiled"
        else:
            try:
                err, native = check(name, prog, manifest)
                result.update(rel_err=err, torch_native_rel_err=native,
                              **{"pass": err == err and err <= TOLERANCE[dtype]})
            except Exception as e:  # one broken kernel must not stop the rest
                result["error"] = f"{type(e).__name__}: {e}"
        results.append(result)
        if "error" in result:
            print(f"{name:<22} {dtype:<5} FAIL ({result['error']})")
        else:
            print(f"{name:<22} {dtype:<5} {result['rel_err']:9.2e} "
                  f"{result['torch_native_rel_err']:9.2e}  "
                  f"{'ok' if result['pass'] else 'FAIL'}")
    report(results, args.out)

if __name__ == "__main__":
    main()
