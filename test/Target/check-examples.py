#!/usr/bin/env python3
"""Compiles every example and checks the artifacts (see examples.test)."""

import glob
import json
import os
import re
import subprocess
import sys

compiler, examples, out = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []
count = 0
for path in sorted(glob.glob(os.path.join(examples, "*.mlir"))):
    name = os.path.splitext(os.path.basename(path))[0]
    count += 1
    result = subprocess.run([compiler, path, "-o", out,
                             "--arch=sm_80,sm_90a"], capture_output=True, text=True)
    if result.returncode != 0:
        failures.append(f"{name}: flashlight-compile failed:\n{result.stderr}")
        continue
    manifest = json.load(open(os.path.join(out, name + ".json")))
    for arch in ("sm_80", "sm_90a"):
        info = manifest["archs"].get(arch, {})
        if "cubin" not in info:
            failures.append(f"{name}: no {arch} cubin")
        if info.get("spill_store_bytes", 1) or info.get("stack_frame_bytes", 1):
            failures.append(f"{name}: {arch} spills or uses a stack: {info}")
        ptx = open(os.path.join(out, info["ptx"])).read()
        # The attention kernel, and a block-mask pre-kernel for masks
        # that read data.
        entries = 2 if info.get("block_mask") else 1
        if len(re.findall(r"\.entry\s", ptx)) != entries:
            failures.append(f"{name}: {arch} PTX has not exactly {entries} .entry")
        for bad in (r"\.local\s", r"^\s*\.global\s", r"\.extern\s+\.func"):
            if re.search(bad, ptx, re.M):
                failures.append(f"{name}: {arch} PTX has {bad}")
    # Outputs are [B, Hq, M, Dv] and [B, Hq, M]: nothing grows with M x N.
    q = next(p for p in manifest["params"] if p["name"] == "q0")
    b, hq, m = q["shape"][:3]
    for p in manifest["params"]:
        if p["direction"] != "out":
            continue
        size = 1
        for d in p["shape"]:
            size *= d
        if p["shape"][:3] != [b, hq, m] or len(p["shape"]) > 4:
            failures.append(f"{name}: output {p['name']} {p['shape']} is not per query row")
    if not manifest.get("program"):
        failures.append(f"{name}: no program for the reference")
print(f"checked {count} examples")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures or count == 0 else 0)
