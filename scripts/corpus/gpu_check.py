#!/usr/bin/env python3
"""Checks the real-world corpus (test/Corpus/{jax,torch}) on the GPU against
each library's own f32 output, from what scripts/corpus/prepare_gpu.sh wrote.

    python3 scripts/corpus/gpu_check.py KERNELS_DIR REF_DIR [--out results.json]
        [--only NAME...] [--require-all] [--isolate [--timeout S]] [--dry-run]

KERNELS_DIR holds <corpus>/<name>.json manifests (with the cubins and
constants they name), REF_DIR <corpus>/index.json, <name>.inputs.npz and
<name>.expected[.N].npy (the generators' --reference output); both may also
be one corpus's folder itself (REF_DIR/index.json: the corpus is the
folder's name). Needs torch (CUDA), numpy and the repo's python/ (found
from this file's place; or on PYTHONPATH); no MLIR, JAX or network.

For each program with reference data: loads its inputs (bf16 from their
uint16 bit patterns, bool, int and float as stored), moves them to the GPU,
runs `flashlight.load(manifest)` with `poison = True` (every output is
NaN-filled before each kernel, so an element no kernel writes stays NaN)
and `.call_entry(*inputs)`, and compares each output the reference has
(JAX: every result; PyTorch: the first) with the f32 expected output:
rel_err = ||out - ref||_F / ||ref||_F in float64 over the elements where the
reference is finite. A program passes when no output has a NaN and every
rel_err is within the tolerance of its first floating input's dtype
(scripts/fixture_common.py TOLERANCE: bf16 2e-2, f16 5e-3, f32 1e-3).
Status per program: pass, fail, error (an exception: its message), or
not-compiled (reference data but no manifest; counted as a failure only
with --require-all). Prints one line per program and a summary, writes
{"gpu", "torch", ..., "records": [...]} to --out and exits 1 unless every
checked program passed.

A kernel that kills the CUDA context (an illegal address) would fail every
later program; the check notices a dead context and goes on with the rest
in a fresh process. --isolate runs every program in its own process (with
--timeout seconds each: a hanging kernel cannot stop the run).

--dry-run (no GPU needed): everything except the launch. Loads each
manifest and checks that the files it names exist and that its entry's
inputs and outputs match the reference's (count, shape, dtype), decodes
the inputs, and compares the expected outputs, rounded to the manifest's
output dtype, with themselves (rel_err is then the rounding error, ~2e-3
for bf16): a check of the plumbing and of the prepared data.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    from fixture_common import TOLERANCE  # noqa: E402
except ImportError:  # scripts/ not carried: the same numbers
    TOLERANCE = {"bf16": 2e-2, "f16": 5e-3, "f32": 1e-3}

CORPORA = ("jax", "torch")
FLOATS = ("bf16", "f16", "f32", "f64")
TORCH_DTYPES = {
    "bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
    "f64": torch.float64, "bool": torch.bool, "i1": torch.bool, "i8": torch.int8,
    "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
}
#: Messages of CUDA errors after which the context is unusable.
STICKY = ("illegal", "misaligned", "unspecified launch failure", "launch timed out",
          "hardware stack error", "illegal instruction", "invalid program counter",
          "ECC", "context is destroyed")


class CheckError(Exception):
    """A problem with the program's data or manifest (not an exception of
    the run): reported with its message only."""


# --- Data --------------------------------------------------------------------


def corpus_dirs(kernels_dir, ref_dir):
    """[(corpus, kernels folder, reference folder)]."""
    if os.path.exists(os.path.join(ref_dir, "index.json")):
        corpus = os.path.basename(os.path.normpath(ref_dir))
        kdir = os.path.join(kernels_dir, corpus)
        return [(corpus, kdir if os.path.isdir(kdir) else kernels_dir, ref_dir)]
    return [(c, os.path.join(kernels_dir, c), os.path.join(ref_dir, c)) for c in CORPORA
            if os.path.exists(os.path.join(ref_dir, c, "index.json"))]


def expected_files(info):
    """The expected outputs' files: JAX lists them, PyTorch gives one."""
    e = info.get("expected")
    if isinstance(e, list):
        return e
    if isinstance(e, dict):
        return [e["file"]]
    if isinstance(e, str):
        return [e]
    raise CheckError("the reference index has no 'expected' for this program")


def decode_input(spec, a):
    """One stored input as a CPU torch tensor of its declared dtype."""
    dtype = spec["dtype"]
    if dtype not in TORCH_DTYPES:
        raise CheckError(f"input {spec['name']}: unknown dtype {dtype}")
    if dtype == "bf16":
        # Stored as the uint16 bit pattern (npz has no bf16); accept an
        # ml_dtypes bfloat16 array or int16 too.
        if a.dtype.itemsize != 2 or a.dtype == np.float16:
            raise CheckError(f"input {spec['name']}: bf16 stored as {a.dtype}, "
                             "expected uint16 bit patterns")
        t = torch.from_numpy(np.ascontiguousarray(a).view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a).copy())
        if t.dtype != TORCH_DTYPES[dtype]:
            raise CheckError(f"input {spec['name']}: stored as {a.dtype}, declared {dtype}")
    if list(t.shape) != list(spec["shape"]):
        raise CheckError(f"input {spec['name']}: stored shape {list(t.shape)}, "
                         f"declared {spec['shape']}")
    return t


def load_reference(ref, name, info):
    npz = os.path.join(ref, info.get("inputs_file", f"{name}.inputs.npz"))
    with np.load(npz) as arrays:
        missing = [s["name"] for s in info["inputs"] if s["name"] not in arrays.files]
        if missing:
            raise CheckError(f"{os.path.basename(npz)} lacks {missing}")
        inputs = [decode_input(s, arrays[s["name"]]) for s in info["inputs"]]
    expected = [np.load(os.path.join(ref, f)) for f in expected_files(info)]
    return inputs, expected


def manifest_files(manifest):
    """The files beside the manifest that flashlight.load()/call_entry may
    read: per arch the cubin, else the PTX; the constants."""
    files = []

    def artifacts(archs):
        for arch, info in (archs or {}).items():
            files.append(info.get("cubin") or info.get("ptx"))

    if manifest.get("kernel"):
        artifacts(manifest.get("archs"))
    entry = manifest.get("entry") or {}
    if "steps" in entry:
        artifacts(entry.get("archs"))
    files += [i["file"] for i in entry.get("inputs", []) if "file" in i]
    files += [s["constant"] for s in entry.get("sources", []) if "constant" in s]
    files += [s["file"] for s in entry.get("steps", []) if "file" in s]
    return [f for f in files if f]


def user_signature(manifest):
    """(inputs the caller passes, outputs) of the manifest: its entry's, or
    the kernel's parameters for a manifest without one."""
    entry = manifest.get("entry")
    if entry:
        return [i for i in entry["inputs"] if "file" not in i], entry["outputs"]
    params = manifest.get("params", [])
    return ([p for p in params if p["direction"] == "in"],
            [p for p in params if p["direction"] == "out"])


def match_signature(manifest, inputs, expected, kdir):
    """Checks the reference against the manifest; returns the inputs, ints
    cast where the manifest wants another int width, and notes."""
    notes = []
    missing = [f for f in manifest_files(manifest) if not os.path.exists(os.path.join(kdir, f))]
    if missing:
        raise CheckError(f"files the manifest names are missing: {missing}")
    ins, outs = user_signature(manifest)
    if len(ins) != len(inputs):
        raise CheckError(f"the manifest takes {len(ins)} inputs, the reference has {len(inputs)}")
    cast = []
    for k, (t, p) in enumerate(zip(inputs, ins)):
        want = TORCH_DTYPES.get(p["dtype"])
        if list(t.shape) != list(p["shape"]):
            raise CheckError(f"input {k}: shape {list(t.shape)}, the manifest's {p['shape']}")
        if t.dtype != want:
            if t.is_floating_point() or want is None or want.is_floating_point:
                raise CheckError(f"input {k}: {t.dtype}, the manifest wants {p['dtype']}")
            notes.append(f"input {k} cast {t.dtype} -> {want}")
            t = t.to(want)
        cast.append(t)
    if len(outs) < len(expected):
        raise CheckError(f"the manifest returns {len(outs)} outputs, "
                         f"the reference has {len(expected)}")
    if len(outs) > len(expected):
        notes.append(f"{len(outs)} outputs, the reference checks the first {len(expected)}")
    for k, (o, r) in enumerate(zip(outs, expected)):
        if list(o["shape"]) != list(r.shape):
            raise CheckError(f"output {k}: the manifest's shape {o['shape']}, "
                             f"the reference's {list(r.shape)}")
    return cast, notes


def compare(out, ref):
    """{rel_err, max_abs_err, nan, nonfinite_ref} of one output (numpy f64)."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        raise CheckError(f"output shape {list(out.shape)}, the reference's {list(ref.shape)}")
    finite = np.isfinite(ref)
    nan = int(np.isnan(out).sum())
    d = out[finite] - ref[finite]
    rel = float(np.linalg.norm(d) / max(float(np.linalg.norm(ref[finite])), 1e-30))
    result = {"shape": list(out.shape), "rel_err": rel,
              "max_abs_err": float(np.abs(d).max()) if d.size else 0.0, "nan": nan,
              "nonfinite_ref": int((~finite).sum())}
    if out.ndim >= 1 and out.size:
        # Rows (vectors along the last dim) off by more than 10x the bf16
        # rounding, relative to the reference's typical row: a few bad rows
        # (e.g. the fully masked ones) or all of them?
        o2, r2 = out.reshape(-1, out.shape[-1]), ref.reshape(-1, ref.shape[-1])
        scale = max(float(np.sqrt(np.mean(np.where(np.isfinite(r2), r2, 0) ** 2))), 1e-30)
        row_err = np.sqrt(np.mean(np.where(np.isfinite(r2), o2 - r2, 0) ** 2, axis=1)) / scale
        bad = np.flatnonzero(~(row_err <= 2e-2))
        result["rows"] = int(r2.shape[0])
        result["bad_rows"] = int(bad.size)
        if bad.size:
            result["bad_row_examples"] = [list(map(int, np.unravel_index(i, out.shape[:-1])))
                                          for i in bad[:8]]
    if result["nonfinite_ref"]:
        # Where the library itself gives inf/NaN: does the kernel agree?
        same = (np.isnan(out[~finite]) & np.isnan(ref[~finite])) | (out[~finite] == ref[~finite])
        result["nonfinite_ref_matched"] = int(same.sum())
    return result


# --- One program --------------------------------------------------------------


def tolerance_dtype(info):
    for s in info["inputs"]:
        if s["dtype"] in FLOATS and s["dtype"] in TOLERANCE:
            return s["dtype"]
    return "f32"


def dry_outputs(expected, outs_info):
    """--dry-run's outputs: the expected ones in the manifest's dtypes."""
    return [torch.from_numpy(r).to(TORCH_DTYPES[o["dtype"]]) for r, o in zip(expected, outs_info)]


def check_program(corpus, name, info, kdir, ref, dry_run, save_dir=None):
    dtype = tolerance_dtype(info)
    record = {"corpus": corpus, "name": name, "library": info.get("library"),
              "dtype": dtype, "tolerance": TOLERANCE[dtype], "status": "error",
              "rel_err": None}
    manifest_path = os.path.join(kdir, f"{name}.json")
    try:
        inputs, expected = load_reference(ref, name, info)
        with open(manifest_path) as f:
            manifest = json.load(f)
        inputs, notes = match_signature(manifest, inputs, expected, kdir)
        entry = manifest.get("entry") or {}
        record.update(attention_kernel=bool(manifest.get("kernel")),
                      reference_steps=sum(s.get("op") == "kernel" for s in entry.get("steps", [])))
        if notes:
            record["notes"] = notes
        if dry_run:
            # The expected outputs, rounded to what the kernel returns.
            outs = dry_outputs(expected, user_signature(manifest)[1])
        else:
            import flashlight

            kernel = flashlight.load(manifest_path)
            kernel.poison = True  # an element no kernel writes stays NaN
            for arch, a in (manifest.get("archs") or {}).items():
                if manifest.get("kernel") and kernel.artifact in (a.get("cubin"), a.get("ptx")):
                    record["arch"], record["codegen"] = arch, a.get("codegen")
            args = [t.cuda() for t in inputs]
            torch.cuda.synchronize()
            start = time.perf_counter()
            outs = kernel.call_entry(*args)
            torch.cuda.synchronize()
            record["call_ms"] = round(1e3 * (time.perf_counter() - start), 3)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if len(outs) < len(expected):
            raise CheckError(f"{len(outs)} outputs, the reference has {len(expected)}")
        outs = [o.detach().to(torch.float64).cpu().numpy() for o in outs]
        results = [compare(o, r) for o, r in zip(outs, expected)]
        nan = sum(r["nan"] for r in results)
        if nan:  # the error over the elements that are not NaN; JSON has no NaN
            for r, o, e in zip(results, outs, expected):
                ok = ~np.isnan(o) & np.isfinite(e)
                d = o[ok] - e[ok]
                r["rel_err"] = float(np.linalg.norm(d) / max(float(np.linalg.norm(e[ok])), 1e-30))
                r["max_abs_err"] = float(np.abs(d).max()) if d.size else 0.0
                r["rel_err_excludes_nan"] = True
        record["outputs"] = results
        record["rel_err"] = max(r["rel_err"] for r in results)
        record["max_abs_err"] = max(r["max_abs_err"] for r in results)
        if nan:
            record["status"] = "fail"
            record["error"] = f"NaN in the output ({nan} elements)"
        elif not record["rel_err"] <= record["tolerance"]:
            record["status"] = "fail"
        else:
            record["status"] = "pass"
        if save_dir and record["status"] != "pass":
            os.makedirs(os.path.join(save_dir, corpus), exist_ok=True)
            for k, o in enumerate(outs):
                np.save(os.path.join(save_dir, corpus, f"{name}.out{'' if k == 0 else f'.{k}'}.npy"),
                        o.astype(np.float32))
    except CheckError as e:
        record["error"] = str(e)
    except Exception as e:  # noqa: BLE001  one broken program must not stop the rest
        record["error"] = f"{type(e).__name__}: {e}"
        record["traceback"] = traceback.format_exc(limit=6)
    return record


def cuda_alive():
    try:
        torch.cuda.synchronize()
        return float((torch.ones(1, device="cuda") + 1).item()) == 2.0
    except Exception:  # noqa: BLE001
        return False


# --- Driver -------------------------------------------------------------------


def line(r):
    name = f"{r['corpus']}/{r['name']}"
    if r["status"] in ("pass", "fail") and r.get("rel_err") is not None:
        detail = f"{r['rel_err']:9.2e} (tol {r['tolerance']:.0e}) max_abs {r['max_abs_err']:.2e}"
        if r.get("error"):
            detail += f"  {r['error']}"
        nonfinite = sum(o["nonfinite_ref"] for o in r.get("outputs", []))
        if nonfinite:
            detail += f"  [{nonfinite} non-finite in the reference, skipped]"
        if r["status"] != "pass" and r.get("outputs"):
            detail += "  bad rows " + ", ".join(f"{o.get('bad_rows', '?')}/{o.get('rows', '?')}"
                                                for o in r["outputs"])
    else:
        detail = r.get("error", "")
    return f"{name:<48} {r['dtype']:<4} {r['status']:<12} {detail}"


def child(args, todo, timeout):
    """Runs `todo` ([(corpus, name)]) in a fresh process; its records."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results.json")
        cmd = [sys.executable, os.path.abspath(__file__), args.kernels_dir, args.ref_dir,
               "--out", out, "--quiet-summary", "--only"] + [f"{c}/{n}" for c, n in todo]
        if args.dry_run:
            cmd.append("--dry-run")
        if args.save_failed:
            cmd += ["--save-failed", args.save_failed]
        try:
            proc = subprocess.run(cmd, timeout=timeout, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            output = proc.stdout
        except subprocess.TimeoutExpired as e:
            output = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return None, f"timed out after {timeout} s", output
        if not os.path.exists(out):
            return None, f"the process exited {proc.returncode} without results", output
        with open(out) as f:
            return json.load(f)["records"], None, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels_dir")
    parser.add_argument("ref_dir")
    parser.add_argument("--out", help="write the results (JSON) here")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="check only these programs (NAME or CORPUS/NAME)")
    parser.add_argument("--require-all", action="store_true",
                        help="count programs with reference data but no manifest as failures")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: check the data and the manifests, compare the "
                             "expected outputs with themselves")
    parser.add_argument("--isolate", action="store_true",
                        help="each program in its own process")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds per program with --isolate (default 300)")
    parser.add_argument("--save-failed", metavar="DIR",
                        help="save the outputs of programs that do not pass as "
                             "DIR/<corpus>/<name>.out[.N].npy (f32)")
    parser.add_argument("--quiet-summary", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if not args.dry_run and not args.isolate and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device (use --dry-run to check the data)")
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference path's torch ops

    programs = []  # (corpus, name, info, kernels folder, reference folder)
    for corpus, kdir, ref in corpus_dirs(args.kernels_dir, args.ref_dir):
        with open(os.path.join(ref, "index.json")) as f:
            index = json.load(f)
        for name in sorted(index):
            if name.startswith("_"):  # the torch index's "_generator"
                continue
            if args.only and name not in args.only and f"{corpus}/{name}" not in args.only:
                continue
            programs.append((corpus, name, index[name], kdir, ref))
    if args.only:
        known = {p[1] for p in programs} | {f"{p[0]}/{p[1]}" for p in programs}
        unknown = [n for n in args.only if n not in known]
        if unknown:
            print(f"gpu_check: no reference data for {' '.join(unknown)}", file=sys.stderr)
    if not programs:
        sys.exit(f"gpu_check: no programs with reference data under {args.ref_dir}")

    records = []
    compile_errors = {}
    for corpus, kdir, _ in corpus_dirs(args.kernels_dir, args.ref_dir):
        tsv = os.path.join(kdir, "compile.tsv")
        if os.path.exists(tsv):
            with open(tsv) as f:
                for row in f:
                    parts = row.rstrip("\n").split("\t")
                    if len(parts) >= 3 and parts[1] != "ok":
                        compile_errors[(corpus, parts[0])] = parts[2]

    if not args.quiet_summary:
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        print(f"gpu_check: {len(programs)} programs; {gpu or 'no GPU'}; torch {torch.__version__}"
              + ("; DRY RUN (no launches)" if args.dry_run else ""), flush=True)
    todo = list(programs)
    while todo:
        corpus, name, info, kdir, ref = todo.pop(0)
        if not os.path.exists(os.path.join(kdir, f"{name}.json")):
            why = compile_errors.get((corpus, name), "no manifest")
            r = {"corpus": corpus, "name": name, "library": info.get("library"),
                 "dtype": tolerance_dtype(info), "tolerance": TOLERANCE[tolerance_dtype(info)],
                 "status": "not-compiled", "rel_err": None, "error": why}
            records.append(r)
            print(line(r), flush=True)
            continue
        if args.isolate:
            got, why, output = child(args, [(corpus, name)], args.timeout)
            if got is None:
                got = [{"corpus": corpus, "name": name, "library": info.get("library"),
                        "dtype": tolerance_dtype(info),
                        "tolerance": TOLERANCE[tolerance_dtype(info)], "status": "error",
                        "rel_err": None, "error": why, "output_tail": output[-2000:]}]
            for r in got:
                records.append(r)
                print(line(r), flush=True)
            continue
        r = check_program(corpus, name, info, kdir, ref, args.dry_run, args.save_failed)
        records.append(r)
        print(line(r), flush=True)
        if r["status"] == "error" and not args.dry_run and (
                any(s.lower() in r.get("error", "").lower() for s in STICKY) or not cuda_alive()):
            if cuda_alive():
                continue
            # The context is gone: the rest in a fresh process.
            rest = [(c, n) for c, n, *_ in todo]
            r["error"] += " (CUDA context lost; the rest ran in a fresh process)"
            print(f"gpu_check: the CUDA context is lost after {corpus}/{name}; "
                  f"{len(rest)} programs go on in a fresh process", flush=True)
            if rest:
                got, why, output = child(args, rest, None)
                sys.stdout.write(output)
                if got is None:
                    sys.exit(f"gpu_check: the fresh process failed: {why}")
                records += got
            todo = []

    counted = [r for r in records if r["status"] != "not-compiled" or args.require_all]
    passed = [r for r in counted if r["status"] == "pass"]
    summary = {s: sum(r["status"] == s for r in records)
               for s in ("pass", "fail", "error", "not-compiled")}
    by_corpus = {}
    for r in records:
        by_corpus.setdefault(r["corpus"], {}).setdefault(r["status"], 0)
        by_corpus[r["corpus"]][r["status"]] += 1
    if not args.quiet_summary:
        for corpus, counts in sorted(by_corpus.items()):
            print(f"{corpus}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        print(f"gpu_check: {len(passed)}/{len(counted)} passed"
              + (f" ({summary['not-compiled']} not compiled, not counted)"
                 if summary["not-compiled"] and not args.require_all else ""))
    if args.out:
        result = {
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "dry_run": args.dry_run,
            "kernels_dir": args.kernels_dir,
            "ref_dir": args.ref_dir,
            "summary": summary,
            "by_corpus": by_corpus,
            "records": records,
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0 if counted and len(passed) == len(counted) else 1


if __name__ == "__main__":
    sys.exit(main())
