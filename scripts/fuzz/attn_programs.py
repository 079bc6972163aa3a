#!/usr/bin/env python3
"""Pipeline fuzzer: random valid `attn` programs through flashlight-compile.

    python3 scripts/fuzz/attn_programs.py BUILD [--count N] [--seed S]
        [--emit ptx|cubin] [--crashes DIR] [--jobs J]

Each program draws its shapes (sequence lengths that are not multiples of
the tiles, GQA groups, head dims 16..256, Dv != Dqk), element type, branch
count (1, or 2 combined by an epilogue), normalizer (softmax, sigmoid,
none), mask (causal with an offset, sliding window, prefix, document ids,
per-batch lengths), score region (soft-cap, ALiBi, a captured bias, a
relative-position table), sinks and an output gate, and is compiled for
sm_80 and sm_90a. A compile may refuse a program with a located error
(counted); a signal, an LLVM fatal error, an assertion, a stack dump, a
timeout, a failure that does not say why, or a success without both archs'
artifacts is a crash: the program is saved under --crashes and the run
fails. With --mutate P, a share P of the programs is edited at random
first (a changed number, a deleted or duplicated line, a swapped type or
operation): those must be compiled or refused with a located error. With
--flags="--gradient --score-capture-gradients" the same holds for the
programs' gradient programs.
"""

import argparse
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile

CRASH_MARKERS = ("LLVM ERROR", "Assertion", "Stack dump", "PLEASE submit",
                 "terminate called", "Segmentation fault", "UNREACHABLE")


class Program:
    """Text of one attn function, assembled piece by piece."""

    def __init__(self, rng):
        self.rng = rng
        self.args = []      # (name, type) of the function
        self.captures = []  # (name, type) captured by the regions

    def capture(self, name, type_):
        self.args.append((name, type_))
        self.captures.append((name, type_))
        return len(self.captures) - 1

    def capture_args(self):
        return "".join(f", %c_{n}: {t}" for n, t in self.captures)


def draw_shapes(rng):
    hkv = rng.choice([1, 1, 2, 4])
    group = rng.choice([1, 1, 2, 4])
    dqk = rng.choice([1, 8, 16, 20, 32, 48, 64, 64, 80, 96, 100, 128, 128,
                      192, 256])
    dv = dqk if rng.random() < 0.8 else rng.choice([8, 32, 64, 128])
    m = rng.choice([1, 7, 16, 33, 64, 100, 128, 130, 192, 257, 1000])
    n = m if rng.random() < 0.6 else rng.choice([1, 9, 64, 77, 128, 200, 256,
                                                 1031])
    return dict(b=rng.choice([1, 2, 3]), hq=hkv * group, hkv=hkv, m=m, n=n,
                dqk=dqk, dv=dv)


def mask_body(p, s, kind):
    """Lines of a mask region computing %keep (i1)."""
    if kind == "causal":
        off = p.rng.choice([0, 0, s["n"] - s["m"], 3, -2])
        return [f"%off = arith.constant {off} : index",
                "%io = arith.addi %i, %off : index",
                "%keep = arith.cmpi sge, %io, %j : index"]
    if kind == "window":
        w = p.rng.choice([1, 8, 33, 64])
        return [f"%w = arith.constant {w} : index",
                "%jw = arith.addi %j, %w : index",
                "%near = arith.cmpi slt, %i, %jw : index",
                "%past = arith.cmpi sge, %i, %j : index",
                "%keep = arith.andi %near, %past : i1"]
    if kind == "prefix":
        pre = p.rng.choice([0, 5, 64])
        return [f"%pre = arith.constant {pre} : index",
                "%inpre = arith.cmpi slt, %j, %pre : index",
                "%past = arith.cmpi sge, %i, %j : index",
                "%keep = arith.ori %inpre, %past : i1"]
    if kind == "document":
        length = max(s["m"], s["n"])
        c = p.capture("doc", f"tensor<{s['b']}x{length}xi32>")
        t = p.captures[c][1]
        return [f"%di = tensor.extract %c_doc[%b, %i] : {t}",
                f"%dj = tensor.extract %c_doc[%b, %j] : {t}",
                "%keep = arith.cmpi eq, %di, %dj : i32"]
    if kind == "lengths":
        c = p.capture("len", f"tensor<{s['b']}xi32>")
        t = p.captures[c][1]
        return [f"%l = tensor.extract %c_len[%b] : {t}",
                "%ji = arith.index_cast %j : index to i32",
                "%keep = arith.cmpi slt, %ji, %l : i32"]
    raise ValueError(kind)


def score_body(p, s, kind):
    """Lines of a one-branch score region computing %r from %s."""
    if kind == "softcap":
        cap = p.rng.choice([5.0, 30.0, 50.0])
        return [f"%cap = arith.constant {cap} : f32",
                "%x = arith.divf %s, %cap : f32", "%t = math.tanh %x : f32",
                "%r = arith.mulf %t, %cap : f32"]
    if kind == "alibi":
        p.capture("slopes", f"tensor<{s['hq']}xf32>")
        return [f"%slope = tensor.extract %c_slopes[%h] : tensor<{s['hq']}xf32>",
                "%rel = arith.subi %j, %i : index",
                "%rel_i = arith.index_cast %rel : index to i64",
                "%rel_f = arith.sitofp %rel_i : i64 to f32",
                "%bias = arith.mulf %slope, %rel_f : f32",
                "%r = arith.addf %s, %bias : f32"]
    if kind == "bias":
        bb = p.rng.choice([1, s["b"]])
        bh = p.rng.choice([1, s["hq"]])
        t = f"tensor<{bb}x{bh}x{s['m']}x{s['n']}xf32>"
        p.capture("bias", t)
        ib = "%b" if bb > 1 else "%z"
        ih = "%h" if bh > 1 else "%z"
        return ["%z = arith.constant 0 : index",
                f"%x = tensor.extract %c_bias[{ib}, {ih}, %i, %j] : {t}",
                "%r = arith.addf %s, %x : f32"]
    if kind == "relative":
        size = s["m"] + s["n"]
        t = f"tensor<{s['hq']}x{size}xf32>"
        p.capture("table", t)
        return [f"%off = arith.constant {s['m']} : index",
                "%d0 = arith.subi %j, %i : index",
                "%d1 = arith.addi %d0, %off : index",
                f"%x = tensor.extract %c_table[%h, %d1] : {t}",
                "%r = arith.addf %s, %x : f32"]
    raise ValueError(kind)


def region(name, leading, body, result, p):
    lines = [f"  {name} {{", f"  ^bb0({leading}{p.capture_args()}):"]
    lines += [f"    {line}" for line in body]
    lines += [f"    attn.yield {result}", "  }"]
    return lines


def generate(rng):
    """One attn program (text) and a one-line description."""
    s = draw_shapes(rng)
    dtype = rng.choice(["bf16", "bf16", "f16", "f32"])
    branches = 2 if rng.random() < 0.15 else 1
    normalizer = rng.choice(["softmax"] * 6 + ["sigmoid"] * 2 + ["none"])
    mask = rng.choice([None, None, "causal", "window", "prefix", "document",
                       "lengths"])
    score = None if branches > 1 else rng.choice(
        [None, None, "softcap", "alibi", "bias", "relative"])
    sinks = branches == 1 and normalizer == "softmax" and rng.random() < 0.15
    gate = branches == 1 and rng.random() < 0.15
    p = Program(rng)
    qt = f"tensor<{s['b']}x{s['hq']}x{s['m']}x{s['dqk']}x{dtype}>"
    kt = f"tensor<{s['b']}x{s['hkv']}x{s['n']}x{s['dqk']}x{dtype}>"
    vt = f"tensor<{s['b']}x{s['hkv']}x{s['n']}x{s['dv']}x{dtype}>"
    ot = f"tensor<{s['b']}x{s['hq']}x{s['m']}x{s['dv']}x{dtype}>"
    qs = [f"q{r}" for r in range(branches)]
    ks = [f"k{r}" for r in range(branches)]
    for name in qs:
        p.args.append((name, qt))
    for name in ks:
        p.args.append((name, kt))
    p.args.append(("v", vt))
    # Captures first, so that every region names all of them.
    score_lines = score_body(p, s, score) if score else None
    mask_lines = mask_body(p, s, mask) if mask else None
    if sinks:
        p.args.append(("sinks", f"tensor<{s['hq']}xf32>"))
    if gate:
        p.capture("gate", ot)
    if branches > 1:
        p.capture("lambda", "tensor<f32>")
    scale = ", ".join(f"{rng.uniform(0.01, 1.0):.6f}" for _ in range(branches))
    header = ", ".join(f"%{n}: {t}" for n, t in p.args)
    lines = [f"func.func @fuzz({header}) -> {ot} {{",
             f"  %o = attn.attention q({', '.join('%' + q for q in qs)} : "
             f"{', '.join([qt] * branches)})",
             f"      k({', '.join('%' + k for k in ks)} : {', '.join([kt] * branches)})",
             f"      v(%v : {vt})"]
    if sinks:
        lines.append(f"      sinks(%sinks : tensor<{s['hq']}xf32>)")
    if p.captures:
        lines.append(f"      captures({', '.join('%' + n for n, _ in p.captures)} : "
                     f"{', '.join(t for _, t in p.captures)})")
    lines.append(f"      scale [{scale}] normalizer {normalizer}")
    if score_lines:
        lines += region("score", "%s: f32, %b: index, %h: index, %i: index, "
                        "%j: index", score_lines, "%r : f32", p)
    if mask_lines:
        lines += region("mask", "%b: index, %h: index, %i: index, %j: index",
                        mask_lines, "%keep : i1", p)
    if branches > 1:
        lines += region("epilogue", "%o1: f32, %o2: f32, %b: index, %h: index, "
                        "%i: index, %d: index",
                        ["%lam = tensor.extract %c_lambda[] : tensor<f32>",
                         "%x = arith.mulf %lam, %o2 : f32",
                         "%r = arith.subf %o1, %x : f32"], "%r : f32", p)
    elif gate:
        lines += region("epilogue", "%out: f32, %b: index, %h: index, "
                        "%i: index, %d: index",
                        [f"%g = tensor.extract %c_gate[%b, %h, %i, %d] : {ot}",
                         "%gf = arith.extf %g : " + dtype + " to f32"
                         if dtype != "f32" else "%gf = arith.addf %g, %g : f32",
                         "%r = arith.mulf %out, %gf : f32"], "%r : f32", p)
    lines[-1] += f" -> {ot}"
    lines += [f"  return %o : {ot}", "}"]
    what = (f"B{s['b']} H{s['hq']}/{s['hkv']} M{s['m']} N{s['n']} D{s['dqk']}/"
            f"{s['dv']} {dtype} x{branches} {normalizer} mask={mask} score={score}"
            f"{' sinks' if sinks else ''}{' gate' if gate else ''}")
    return "\n".join(lines) + "\n", what


def mutate(rng, text):
    """The program with 1 to 3 random edits: a changed number (a dim, an
    index, a constant), a deleted or duplicated line, a swapped type or
    operation. The result is mostly invalid: the compiler must say so with a
    located error, never crash."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines))
        line = lines[k]
        choice = rng.randrange(5)
        if choice == 0:
            numbers = [m for m in re.finditer(r"\d+", line)]
            if numbers:
                m = rng.choice(numbers)
                new = str(rng.choice([0, 1, 2, 3, 63, 65, 127, 4096, 99999]))
                line = line[:m.start()] + new + line[m.end():]
        elif choice == 1 and len(lines) > 3:
            del lines[k]
            continue
        elif choice == 2:
            lines.insert(k, line)
            continue
        elif choice == 3:
            a, b = rng.sample(["f32", "bf16", "f16", "i32", "i1", "index", "i64"], 2)
            line = line.replace(a, b, 1)
        else:
            a, b = rng.sample(["arith.addf", "arith.mulf", "arith.cmpi sge",
                               "arith.cmpi eq", "math.tanh", "arith.subi",
                               "tensor.extract", "attn.yield"], 2)
            line = line.replace(a, b, 1)
        lines[k] = line
    return "\n".join(lines) + "\n"


def compile_one(build, emit, text, index, crashes, flags=()):
    compiler = os.path.join(build, "bin", "flashlight-compile")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fuzz.mlir")
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(tmp, "out")
        try:
            proc = subprocess.run([compiler, path, "-o", out, f"--emit={emit}",
                                   "--arch=sm_80,sm_90a", *flags],
                                  capture_output=True, text=True, timeout=300)
            log, rc = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired:
            log, rc = "timeout", -999
        crash = rc < 0 or rc > 1 or any(m in log for m in CRASH_MARKERS)
        if rc == 0 and not crash:
            manifest = os.path.join(out, "fuzz.json")
            artifact = "fuzz.sm_90a.ptx" if emit == "ptx" else "fuzz.sm_90a.cubin"
            crash = not (os.path.exists(manifest)
                         and os.path.exists(os.path.join(out, artifact)))
        if rc == 1 and "error" not in log:
            crash = True  # a failure must say why
    if crash and crashes:
        os.makedirs(crashes, exist_ok=True)
        with open(os.path.join(crashes, f"crash-{index}.mlir"), "w") as f:
            f.write(text + "\n// " + log.replace("\n", "\n// ")[:4000] + "\n")
    status = "crash" if crash else ("ok" if rc == 0 else "refused")
    first = next((l for l in log.splitlines() if "error" in l), "")
    return status, first


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--emit", default="ptx", choices=["ptx", "cubin"])
    parser.add_argument("--crashes", default="")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--mutate", type=float, default=0.0,
                        help="share of programs to edit at random (mostly "
                             "invalid: a located error is expected)")
    parser.add_argument("--flags", default="",
                        help="more flashlight-compile flags, e.g. '--gradient "
                             "--score-capture-gradients' (the gradient programs)")
    parser.add_argument("--print", action="store_true",
                        help="print the programs instead of compiling them")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    programs = []
    for _ in range(args.count):
        text, what = generate(rng)
        if rng.random() < args.mutate:
            text, what = mutate(rng, text), what + " (mutated)"
        programs.append((text, what))
    if args.print:
        for text, what in programs:
            print(f"// {what}\n{text}")
        return 0
    counts = {"ok": 0, "refused": 0, "crash": 0}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(compile_one, args.build, args.emit, text,
                               args.seed * 1000000 + i, args.crashes, args.flags.split())
                   for i, (text, _) in enumerate(programs)]
        for i, fut in enumerate(futures):
            status, first = fut.result()
            counts[status] += 1
            if status != "ok":
                print(f"{status}: {programs[i][1]}: {first}", flush=True)
    print(f"attn_programs: {args.count} programs (seed {args.seed}): "
          f"{counts['ok']} compiled, {counts['refused']} refused with an error, "
          f"{counts['crash']} crashes")
    return 1 if counts["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
