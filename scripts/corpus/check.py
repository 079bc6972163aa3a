#!/usr/bin/env python3
"""Compiles every program of the real-world corpus (test/Corpus/{jax,torch})
and tells, per program, what Flashlight made of it:

    python3 scripts/corpus/check.py BUILD_DIR [--out TABLE.md] [--expect STATUS.tsv]

For each program: `flashlight-compile PROGRAM --arch=sm_80,sm_90a
--emit=ptx --flashlight-explain`, then its manifest says whether an attention
was raised (`kernel`), by which code generator per arch (`codegen`), and what
runs outside the fused kernel (the entry's reference-path `steps`). A
program is

- `fused`: each attention one kernel on tensor cores for both archs, no tensor
  of the scores' size ([.., M, N]) materialized outside it (a kernel
  operand computed from an [.., M, N, ..] input, AlphaFold's pair bias, is
  the program's own data);
- `fused-reference-codegen`: raised, but a kernel generator without tensor
  cores took it (the remark says why);
- `materialized`: raised, but an [M, N] tensor is computed outside;
- `not-raised`: compiled, everything on the reference path (the first
  `attn-raise` remark says why);
- `error`: flashlight-compile failed (its first error line).

Writes a markdown table (--out) and a TSV `name<TAB>status` (--status);
with --expect, exits 1 when the statuses differ from the expected file, so
that a regression, or an improvement not yet recorded, fails the test.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPORA = [("jax", ".stablehlo.mlir"), ("torch", ".json")]
TENSOR_CORE = ("mma.sync", "wgmma")


def programs(root):
    for lib, suffix in CORPORA:
        folder = os.path.join(root, "test", "Corpus", lib)
        index_path = os.path.join(folder, "index.json")
        if not os.path.exists(index_path):
            continue
        with open(index_path) as f:
            index = json.load(f)
        for name in sorted(index):
            path = os.path.join(folder, name + suffix)
            if os.path.exists(path):
                yield lib, name, path, index[name]


def first_line(text, pattern):
    for line in text.splitlines():
        if re.search(pattern, line):
            return line.strip()
    return ""


def classify(manifest):
    """(status, codegens, outside) of a compiled manifest."""
    if manifest.get("kernel") is None:
        return "not-raised", "", []
    # Every attention kernel of the program (manifest version 2 lists
    # them in `attentions`; the first is also the top level's).
    kernels = manifest.get("attentions") or [manifest]
    codegens = sorted({str(a.get("codegen", "")) for k in kernels
                       for a in (k.get("archs") or {}).values()
                       if isinstance(a, dict)}) or [str(manifest.get("codegen", ""))]
    entry = manifest.get("entry") or {}
    steps = entry.get("steps") or []
    values = entry.get("values") or []
    outside = [s.get("kernel", s.get("op")) for s in steps if s.get("op") == "kernel"]
    # The scores' size: M and N of the kernel's first q and k params. A
    # value of the reference path whose last dims are [M, N] is a score
    # matrix (or a mask) materialized outside the kernel, unless it is
    # computed from the program's constants alone (a transposed weight).
    shapes = [p.get("shape") for p in manifest.get("params", []) if isinstance(p, dict)]
    qk = [s for s in shapes if s and len(s) == 4][:2]
    fixed = {i for i, inp in enumerate(entry.get("inputs", [])) if "file" in inp}
    empty = set()
    for s in steps:
        if s.get("op") == "constant":
            fixed.add(s["result"])
        elif s.get("op") == "empty":
            empty.add(s["result"])
        elif s.get("op") == "reshape" and s.get("source") in fixed:
            fixed.add(s["result"])
        elif s.get("op") == "kernel":
            reads = [a for a in s.get("args", []) if a not in empty
                     and a not in s.get("results", [])]
            if all(a in fixed for a in reads):
                fixed.update(s.get("results", []))
    materialized = False
    if len(qk) == 2:
        b, hq, m, dqk = qk[0]
        hkv, n = qk[1][1], qk[1][2]
        # Kernel operands computed from an input that is itself [.., M, N, ..]
        # (a pair representation) are the program's own N x N data, not
        # scores: AlphaFold projects its pair representation [M, N, c] to the
        # bias [heads, M, N] before the kernel.
        pairwise = {i for i, inp in enumerate(entry.get("inputs", []))
                    if any(list(inp.get("shape", []))[d:d + 2] == [m, n]
                           for d in range(len(inp.get("shape", []))))}
        for s in steps:
            if s.get("op") == "kernel" and pairwise & set(s.get("args", [])):
                pairwise.update(s.get("results", []))
            elif s.get("op") == "reshape" and s.get("source") in pairwise:
                pairwise.add(s["result"])
        dv = shapes[2][3] if len(shapes) > 2 and shapes[2] and len(shapes[2]) == 4 else dqk
        # Scores are [B, heads, M, N]; where N equals a head dim the shape
        # cannot tell scores from Q/K/V, so it is not flagged.
        heads = {hq, hkv, b * hq, b * hkv}
        kernel_results = {r for s in steps if s.get("op") == "kernel"
                          for r in s.get("results", [])}
        fed = {a for s in steps if s.get("op") == "attention" for a in s.get("args", [])}
        for i, v in enumerate(values):
            shape = v.get("shape", []) if isinstance(v, dict) else []
            if i not in kernel_results or i in fixed or m <= 1 or shape[-2:] != [m, n]:
                continue
            # A score-sized operand of the kernel (a dense mask or bias the
            # reference path built), or a [B, heads, M, N] value anywhere (a
            # projection's [B, N, hidden] is rank 3).
            if n not in (dqk, dv) and (
                    (i in fed and i not in pairwise)
                    or (len(shape) >= 4 and shape[-3] in heads)):
                materialized = True
    if materialized:
        return "materialized", "/".join(codegens), outside
    if all(c in TENSOR_CORE for c in codegens):
        return "fused", "/".join(codegens), outside
    return "fused-reference-codegen", "/".join(codegens), outside


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--out", help="markdown table to write")
    parser.add_argument("--status", help="TSV of name and status to write")
    parser.add_argument("--expect", help="TSV of name and status to compare with")
    parser.add_argument("--gpu", action="append", default=[],
                        help="gpu_check.py results JSON to add as a column (repeatable)")
    args = parser.parse_args()
    compiler = os.path.join(args.build, "bin", "flashlight-compile")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for lib, name, path, info in programs(ROOT):
            out = os.path.join(tmp, lib, name)
            proc = subprocess.run(
                [compiler, path, "-o", out, "--name", name, "--arch=sm_80,sm_90a",
                 "--emit=ptx", "--flashlight-explain"],
                capture_output=True, text=True)
            log = proc.stdout + proc.stderr
            row = {"library": info.get("library", lib), "corpus": lib, "name": name,
                   "description": info.get("description", "")}
            if proc.returncode != 0:
                row.update(status="error", codegen="", outside=[],
                           why=first_line(log, r"error") or log.strip()[-200:])
            else:
                with open(os.path.join(out, name + ".json")) as f:
                    manifest = json.load(f)
                status, codegen, outside = classify(manifest)
                why = ""
                if status == "not-raised":
                    why = first_line(log, r"is not raised|no attention found")
                elif status == "fused-reference-codegen":
                    why = first_line(log, r"attn-to-gpu")
                row.update(status=status, codegen=codegen, outside=outside, why=why)
            rows.append(row)
            print(f"{lib}/{name}: {row['status']} {row['codegen']} {row['why']}", flush=True)
    counts = {}
    for r in rows:
        counts.setdefault(r["corpus"], {}).setdefault(r["status"], 0)
        counts[r["corpus"]][r["status"]] += 1
    summary = "; ".join(f"{lib}: " + ", ".join(f"{n} {s}" for s, n in sorted(c.items()))
                        for lib, c in sorted(counts.items()))
    print(summary)
    gpu = {}
    gpu_names = []
    for path in args.gpu:
        with open(path) as f:
            run = json.load(f)
        gpu_names.append(run.get("gpu", "GPU"))
        for r in run.get("records", []):
            err = r.get("rel_err")
            text = r.get("status", "")
            if err is not None and text in ("pass", "fail"):
                text = f"{text} {err:.1e}"
            gpu[(r.get("corpus"), r.get("name"))] = text
    if args.out:
        with open(args.out, "w") as f:
            f.write("<!-- generated by scripts/corpus/check.py; do not edit -->\n\n")
            f.write(f"{summary}\n\n")
            if gpu:
                f.write("GPU check (relative error against the library's own f32 output, "
                        f"outputs NaN-poisoned): {', '.join(sorted(set(gpu_names)))}.\n\n")
            f.write("| corpus | program | library | what it is | status | code generator "
                    "| reference-path kernels | GPU check | why not fused |\n")
            f.write("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
            for r in rows:
                outside = str(len(r["outside"])) if r["outside"] else "-"
                why = r["why"].replace("|", "\\|")
                why = why.split("remark: ")[-1].split("error: ")[-1]
                desc = r["description"].replace("|", "\\|")
                check = gpu.get((r["corpus"], r["name"]), "-")
                f.write(f"| {r['corpus']} | {r['name']} | {r['library']} | {desc} | {r['status']} | "
                        f"{r['codegen']} | {outside} | {check} | {why} |\n")
    status = "".join(f"{r['corpus']}/{r['name']}\t{r['status']}\n" for r in rows)
    if args.status:
        with open(args.status, "w") as f:
            f.write(status)
    if args.expect:
        with open(args.expect) as f:
            expected = f.read()
        if expected != status:
            import difflib
            sys.stdout.writelines(difflib.unified_diff(
                expected.splitlines(True), status.splitlines(True), "expected", "now"))
            print("check-corpus: the statuses differ from " + args.expect)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
