#!/usr/bin/env python3
"""Attention programs beyond FlexAttention (issue 6): Flashlight vs eager
PyTorch, torch.compile and FlexAttention's best workaround, in one process.

    bench/bench_programs.py <kernels-dir> <out-dir> [--variants a,b] [--dims 64,128]
                            [--lengths 2048,8192] [--systems flashlight,eager,compile,flex]
                            [--merge] [--tag T]

Kernels come from bench/prepare_programs.sh. For every variant of
bench/programs.py, head dim D and sequence length N (B * N = 16k, H * D =
2048, bf16): fresh seeded random inputs; the fp64 reference is the PyTorch
program itself run on fp64 slices of the inputs (a batch and a few heads at a
time); then each system runs once (Flashlight's outputs poisoned with NaN
first) and is compared with the reference (rel_err = |out - ref| / |ref|),
then timed (median of triton.testing.do_bench). Systems:
- flashlight: the compiled program through the Python loader, called with the
  program's own inputs (`call_entry`);
- eager: the PyTorch program;
- compile: torch.compile of the same program function;
- flex: FlexAttention's best workaround (bench/programs.py), torch.compile'd
  as a whole (block masks built once, outside the timed call), where one
  exists.
A system that fails (OOM, compile error, FlexAttention's int32 overflow,
wrong result) is recorded with `err`; the run goes on. Cases whose inputs
hold 2^31 elements or more (Evoformer's pair bias at B = 2, H = 32, N =
8192) run last, as a CUDA error there can poison the context; after such an
error the remaining systems are recorded as skipped.

Writes <out>/<date>-<gpu>-programs[-<tag>].json ({gpu, torch, triton,
command, kernels, records: [{variant, B, H, N, D, dtype, system, ms, tflops,
rel_err, err}]}) after every case, and a markdown table (.md) with the
speedups flashlight/compile and flashlight/flex. --compare LABEL=DIR times
another build's kernels in the same process (system flashlight_LABEL; a
table of its speed over the default build's); the builds are then timed
after all checks, --rounds times each in alternating order (A B B A ...),
and the median is recorded (the build timed second measured up to 5 %
slower on identical PTX). --interleave times compile and flex that way
too, beside flashlight (eager is timed once, right after its check).
--merge keeps the records of
an existing output file for the cases not run now (split a sweep over
several invocations). TFLOP/s count 4 * B * H * N^2 * D per softmax branch
times the fraction of (query, key) pairs the mask keeps (differential: two
branches).
"""

import argparse
import datetime
import functools
import gc
import json
import os
import sys
import time
import traceback
import zlib

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
import flashlight  # noqa: E402
import programs as P  # noqa: E402

torch._dynamo.config.recompile_limit = 10_000
torch._dynamo.config.cache_size_limit = 10_000

SYSTEMS = ("flashlight", "eager", "compile", "flex")
TOLERANCE = 2e-2  # flashlight's rel_err vs the fp64 reference (bf16 output)
# CUDA errors after which the context is unusable.
STICKY = ("illegal memory access", "unspecified launch failure", "misaligned address",
          "illegal instruction", "device-side assert", "an illegal", "uncorrectable ECC",
          "context is destroyed", "CUDA_ERROR_ILLEGAL", "CUDA_ERROR_LAUNCH_FAILED")


def _err(e):
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:400]}"


def _timer(device):
    if device == "cuda":
        from timing import timed
        return lambda fn: timed(fn, warmup=25, rep=100, return_mode="median")

    def cpu_bench(fn, reps=3):  # --device cpu smoke runs: no Triton needed
        fn()
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
        return sorted(times)[len(times) // 2]
    return cpu_bench


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def _free(device):
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _context_ok(device):
    if device != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return True
    except Exception:
        return False


class State:
    def __init__(self):
        self.lost = None  # the error that poisoned the CUDA context


def prepared_status(kernels):
    """{name: (status, codegen, detail)} from prepare_programs.sh's summary."""
    out = {}
    path = os.path.join(kernels, "summary.tsv")
    if os.path.exists(path):
        for line in open(path).read().splitlines()[1:]:
            cells = line.split("\t") + ["", "", ""]
            out[cells[0]] = (cells[1], cells[2], cells[3])
    return out


def flashlight_system(kernels, name, prepared):
    """(callable factory, codegen) or raises with the compile's diagnostic."""
    path = os.path.join(kernels, f"{name}.json")
    if not os.path.exists(path):
        status, codegen, detail = prepared.get(name, ("missing", "", ""))
        raise RuntimeError(f"not compiled ({status}): {detail}" if detail
                           else f"no manifest {path}")
    kernel = flashlight.load(path)
    call = getattr(kernel, "call_entry", kernel)
    codegen = kernel.manifest.get("codegen") or (
        "reference-path" if "steps" in (kernel.manifest.get("entry") or {}) else "")
    return kernel, call, codegen


def direct_call(kernel):
    """The kernel called on the user's tensors themselves, when the entry
    maps every user input onto a kernel tensor unchanged (identity layouts,
    no constants) and the result back the same way; else None. A fallback
    for when call_entry fails (e.g. a 0-d input), so the kernel is still
    timed; the record says so."""
    entry = kernel.manifest.get("entry") or {}
    if "sources" not in entry or "steps" in entry:
        return None
    order = []
    for src in entry["sources"]:
        if "input" not in src or any(e != {"dim": p} for p, e in enumerate(src["index"])):
            return None
        order.append(src["input"])
    if any(any(e != {"dim": p} for p, e in enumerate(r["index"])) or r["result"] != i
           for i, r in enumerate(entry["results"])):
        return None
    return lambda *xs: kernel(*[xs[i] for i in order])


def run_case(args, variant, D, N, records, state, prepared):
    device = args.device
    B, H = (args.tokens // N, args.width // D)
    name = P.kernel_name(variant.name, D, N)
    flops = variant.flops(B, H, N, D)
    base = {"variant": variant.name, "B": B, "H": H, "N": N, "D": D, "dtype": "bf16"}

    def record(system, ms=None, rel=None, err=None, **extra):
        r = dict(base, system=system, ms=ms, tflops=flops / ms / 1e9 if ms else None,
                 rel_err=rel, err=err, **extra)
        records.append(r)
        rate = f"{ms:9.3f} ms {r['tflops']:7.1f} TFLOP/s" if ms else " " * 27
        rel_s = f"rel_err={rel:.2e}" if rel is not None else ""
        print(f"  {name:<28} {system:<11} {rate} {rel_s} {err or ''}", flush=True)

    systems = [s for s in SYSTEMS if s in args.systems]
    if "flashlight" in systems:  # --compare builds right after it
        at = systems.index("flashlight") + 1
        systems[at:at] = [f"flashlight_{label}" for label in args.compare]
    if state.lost:
        for s in systems:
            record(s, err=f"skipped: CUDA context lost earlier ({state.lost[:200]})")
        return

    seed = zlib.crc32(name.encode())
    inputs = variant.make_inputs(B, H, N, D, seed, device)
    ref_dtype = torch.float64
    try:
        ref = P.reference(variant, inputs, B, H, N, D, dtype=ref_dtype)
    except torch.OutOfMemoryError:
        _free(device)
        ref_dtype = torch.float32
        ref = P.reference(variant, inputs, B, H, N, D, dtype=ref_dtype)
    _sync(device)
    bench = _timer(device)

    # With --compare, the builds are timed after every system's check, in
    # alternating order (A B, B A, ...) over --rounds rounds: a build timed
    # second measured up to 5 % slower than the same PTX timed first.
    # --interleave: every system but eager is timed that way (flashlight,
    # compile and flex under the same clocks and temperature; single
    # timings of one kernel swung up to 10 % between rounds).
    if args.interleave:
        interleaved = [s for s in systems if s != "eager"]
    else:
        interleaved = [s for s in systems if s.startswith("flashlight")] if args.compare else []
    deferred = []
    for system in systems:
        extra, fn, kernel = {}, None, None
        try:
            if system.startswith("flashlight"):
                if device != "cuda":
                    raise RuntimeError("needs CUDA")
                label = system[len("flashlight_"):]
                kernels = args.compare[label] if label else args.kernels
                kernel, call, codegen = flashlight_system(
                    kernels, name, prepared if not label else prepared_status(kernels))
                extra["codegen"] = codegen
                fn = functools.partial(call, *inputs)
            elif system == "eager":
                fn = functools.partial(variant.fn, *inputs)
            elif system == "compile":
                fn = functools.partial(torch.compile(variant.fn, dynamic=False), *inputs)
            elif system == "flex":
                if variant.flex is None:
                    record(system, err=f"n/a: {variant.flex_none}")
                    continue
                fn = flex_callable(variant, inputs, N, device)
        except Exception as e:
            record(system, err=_err(e), **extra)
            continue

        rel = err = ms = None
        try:
            if kernel is not None:
                kernel.poison = True  # an element the kernel skips stays NaN
            try:
                out = fn()
            except Exception as e:
                direct = direct_call(kernel) if kernel is not None else None
                if direct is None or any(s in str(e) for s in STICKY):
                    raise
                extra["note"] = (f"call_entry failed ({_err(e)[:200]}); "
                                 "timed the kernel called directly (identity layouts)")
                fn = functools.partial(direct, *inputs)
                out = fn()
            _sync(device)
            if kernel is not None:
                kernel.poison = False
            rel = P.rel_err(out, ref)
            del out
            if system.startswith("flashlight") and not rel <= TOLERANCE:
                err = f"wrong: rel_err {rel:.3e} > {TOLERANCE:g} vs the {ref_dtype} reference"
            if system in interleaved and err is None:
                # Timed below, with the other builds.
                deferred.append((system, fn, rel, extra))
                fn = None
                continue
            ms = bench(fn)
        except Exception as e:
            err = _err(e)
            if any(s in str(e) for s in STICKY) or not _context_ok(device):
                state.lost = f"{name} {system}: {err}"
        finally:
            if kernel is not None:
                kernel.poison = False
        record(system, ms, rel, err, **extra)
        fn = None
        _free(device)
        if state.lost:
            print(f"  CUDA context lost: {state.lost}", flush=True)
            for s in systems[systems.index(system) + 1:]:
                record(s, err=f"skipped: CUDA context lost ({state.lost[:200]})")
            break

    if deferred and not state.lost:
        times = {system: [] for system, *_ in deferred}
        try:
            for r in range(args.rounds):
                for system, fn, *_ in deferred[::-1] if r % 2 else deferred:
                    times[system].append(bench(fn))
        except Exception as e:
            state.lost = f"{name} timing: {_err(e)}"
        for system, fn, rel, extra in deferred:
            t = sorted(times[system])
            ms = (t[(len(t) - 1) // 2] + t[len(t) // 2]) / 2 if t else None
            record(system, ms, rel, None if t else state.lost, rounds=times[system], **extra)
    deferred = None

    del inputs, ref
    torch._dynamo.reset()  # compiled graphs of this shape hold guards on its tensors
    _free(device)


def flex_callable(variant, inputs, N, device):
    """The workaround, compiled as a whole, with its block mask built once."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    block_mask = create_block_mask(P._causal_mod, None, None, N, N, device=device) \
        if variant.causal else None

    def workaround(block_mask, *xs, _f=variant.flex):
        return _f(flex_attention, block_mask, *xs)

    compiled = torch.compile(workaround, dynamic=False)
    return functools.partial(compiled, block_mask, *inputs)


# --- Output -----------------------------------------------------------------------


def environment(args):
    env = {"torch": torch.__version__, "command": " ".join([sys.executable] + sys.argv),
           "date": datetime.datetime.now().isoformat(timespec="seconds")}
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if args.device == "cuda":
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda"] = torch.version.cuda
    else:
        env["gpu"] = "cpu"
    prepared = os.path.join(args.kernels, "PREPARED.txt")
    env["kernels"] = open(prepared).read().strip().splitlines() if os.path.exists(prepared) \
        else args.kernels
    return env


def _cell(r):
    if r is None:
        return "–"
    if r["ms"] is None:
        return "n/a" if (r["err"] or "").startswith("n/a") else "err"
    t = f"{r['tflops']:.0f}"
    return t + " (wrong)" if r["err"] else t


def markdown(meta, records):
    env = meta
    lines = [
        f"GPU: {env['gpu']}; torch {env['torch']}; Triton {env['triton']}; "
        f"CUDA {env.get('cuda')}; {env['date']}",
        f"Command: `{env['command']}`",
        "Kernels: " + "; ".join(env["kernels"] if isinstance(env["kernels"], list)
                                 else [env["kernels"]]),
        "",
        "bf16, B·N = 16k, H·D = 2048 (unless the command says otherwise); TFLOP/s "
        "(median of do_bench; 4·B·H·N²·D per softmax branch × kept fraction); "
        "×compile, ×flex = flashlight's speed over theirs; rel_err against the "
        "fp64 reference (flashlight / eager / compile / flex). Issue 6 asks for "
        "≥ 3× compile and ≥ 1.2× flex.",
        "",
        "| variant | D | N | B | H | codegen | flashlight | eager | compile | flex "
        "| ×compile | ×flex | rel_err fl / eager / compile / flex |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    errors = {}
    keys = []
    for r in records:
        k = (r["variant"], r["D"], r["N"])
        if k not in keys:
            keys.append(k)
    order = list(P.VARIANTS)
    keys.sort(key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1], k[2]))
    for key in keys:
        by = {r["system"]: r for r in records if (r["variant"], r["D"], r["N"]) == key}
        any_r = next(iter(by.values()))
        cells = []
        for s in SYSTEMS:
            r = by.get(s)
            c = _cell(r)
            for text in (r or {}).get("err"), (r or {}).get("note"):
                if text and not text.startswith("n/a"):
                    c += f" [{errors.setdefault(text, len(errors) + 1)}]"
            cells.append(c)

        def ratio(other):
            a, b = by.get("flashlight"), by.get(other)
            if a and b and a["ms"] and b["ms"] and not a["err"]:
                return f"{b['ms'] / a['ms']:.2f}"
            return "–"

        rels = " / ".join(f"{by[s]['rel_err']:.1e}" if s in by and by[s]["rel_err"] is not None
                          else "–" for s in SYSTEMS)
        codegen = (by.get("flashlight") or {}).get("codegen") or "–"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {any_r['B']} | {any_r['H']} | "
                     f"{codegen} | " + " | ".join(cells)
                     + f" | {ratio('compile')} | {ratio('flex')} | {rels} |")
    compared = sorted({r["system"] for r in records if r["system"].startswith("flashlight_")})
    if compared:
        # Same-run experiments (--compare): each build's speed over the
        # default build's.
        lines += ["", "| variant | D | N | " + " | ".join(f"×{c}" for c in compared) + " |",
                  "| --- | ---: | ---: |" + " ---: |" * len(compared)]
        for key in keys:
            by = {r["system"]: r for r in records if (r["variant"], r["D"], r["N"]) == key}
            base_r = by.get("flashlight")
            cells = []
            for c in compared:
                r = by.get(c)
                ok = base_r and r and base_r["ms"] and r["ms"] and not r["err"]
                cells.append(f"{base_r['ms'] / r['ms']:.3f}" if ok else "–")
            lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    if errors:
        lines += ["", "Errors and notes:", ""]
        lines += [f"{n}. {e}" for e, n in errors.items()]
    return "\n".join(lines) + "\n"


def write_outputs(args, env, records, stem):
    meta = dict(env, records=records)
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    text = markdown(env, records)
    with open(stem + ".md", "w") as f:
        f.write(text)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels")
    parser.add_argument("out")
    parser.add_argument("--variants", default=",".join(P.DEFAULT_VARIANTS))
    parser.add_argument("--dims", default=",".join(map(str, P.DEFAULT_DIMS)))
    parser.add_argument("--lengths", default=",".join(map(str, P.DEFAULT_LENGTHS)))
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--merge", action="store_true",
                        help="keep an existing output file's records of other cases")
    parser.add_argument("--tag", default="", help="output file suffix")
    parser.add_argument("--compare", action="append", default=[], metavar="LABEL=DIR",
                        help="also time DIR's kernels (another prepare_programs.sh "
                             "build, e.g. EXTRA=--branch-lookahead) as system "
                             "flashlight_LABEL, in the same process")
    parser.add_argument("--interleave", action="store_true",
                        help="time flashlight, compile and flex (not eager) "
                             "after every check, --rounds times each in "
                             "alternating order, and record the medians")
    parser.add_argument("--rounds", type=int, default=4,
                        help="with --compare or --interleave: timings per build (and "
                             "system), in alternating order "
                             "(the median is recorded, every round in `rounds`)")
    parser.add_argument("--tokens", type=int, default=P.TOKENS, help="B * N")
    parser.add_argument("--width", type=int, default=P.WIDTH, help="H * D")
    parser.add_argument("--device", default="cuda",
                        help="cpu: a smoke test of the harness (no flashlight, no Triton)")
    args = parser.parse_args()
    args.systems = args.systems.split(",")
    args.compare = dict(c.split("=", 1) for c in args.compare)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_programs: no CUDA device (--device cpu for a smoke test)")

    env = environment(args)
    gpu = env["gpu"].replace(" ", "-")
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{datetime.date.today()}-{gpu}-programs"
                        + (f"-{args.tag}" if args.tag else ""))
    prepared = prepared_status(args.kernels)

    cases, skipped = [], []
    for vname in [v for v in args.variants.split(",") if v]:
        variant = P.VARIANTS[vname]
        if not variant.supported:
            skipped.append(vname)
            print(f"{vname}: skipped ({variant.description})")
            continue
        for D in map(int, args.dims.split(",")):
            for N in map(int, args.lengths.split(",")):
                B, H = args.tokens // N, args.width // D
                cases.append((variant.big_bias(B, H, N, D), variant, D, N))
    # Stable: cases with an input of >= 2^31 elements last, smallest first
    # (a CUDA error there, e.g. FlexAttention's int32 overflow, can end the run).
    cases.sort(key=lambda c: (c[0], c[0] and P.largest_input(c[1], args.tokens // c[3],
                                                              args.width // c[2], c[3], c[2])))

    records = []
    if args.merge and os.path.exists(stem + ".json"):
        now = {(v.name, D, N) for _, v, D, N in cases}
        records = [r for r in json.load(open(stem + ".json"))["records"]
                   if (r["variant"], r["D"], r["N"]) not in now]
    state = State()
    for big, variant, D, N in cases:
        B, H = args.tokens // N, args.width // D
        print(f"{variant.name} D={D} N={N} B={B} H={H}"
              + (" (an input of >= 2^31 elements)" if big else ""), flush=True)
        try:
            run_case(args, variant, D, N, records, state, prepared)
        except Exception as e:  # the reference or the inputs failed
            traceback.print_exc()
            records.append({"variant": variant.name, "B": B, "H": H, "N": N, "D": D,
                            "dtype": "bf16", "system": "reference", "ms": None,
                            "tflops": None, "rel_err": None, "err": _err(e)})
            if not _context_ok(args.device):
                state.lost = state.lost or f"{variant.name} D={D} N={N}: {_err(e)}"
            torch._dynamo.reset()
            _free(args.device)
        write_outputs(args, env, records, stem)
    print(write_outputs(args, env, records, stem))
    print(f"wrote {stem}.json and {stem}.md")
    # A --compare build without this case's kernel (a partial experiment)
    # is no failure.
    bad = [r for r in records
           if (r["system"].startswith("flashlight") or r["system"] == "reference") and r["err"]
           and not (r["system"].startswith("flashlight_") and "no manifest" in r["err"])]
    print(f"bench_programs: {len(bad)} flashlight/reference failure(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
