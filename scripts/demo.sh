#!/usr/bin/env bash
# Runs Flashlight on every shipped example: parse, verify and explain it,
# compile it to PTX and cubin for sm_80 and sm_90a, print a table, and where
# a GPU is present run each kernel against the fp64 reference.
# Usage: scripts/demo.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
opt="$build/bin/flashlight-opt"
compile="$build/bin/flashlight-compile"
out="$build/demo"
# flashlight-compile finds ptxas and libdevice through CUDA_HOME; default to
# the toolkit the build found (possibly the PyPI one in .deps/cuda).
if [ -z "${CUDA_HOME:-}" ] && [ -s "$build/cuda-path.txt" ]; then
  export CUDA_HOME=$(cat "$build/cuda-path.txt")
fi
rm -rf "$out" && mkdir -p "$out"

echo "=== what the analysis sees in each example (flashlight-opt --attn-explain)"
for example in examples/*.mlir; do
  "$opt" "$example" --verify-roundtrip --canonicalize --attn-explain \
    --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 |
    sed -n 's/.*remark: attn.attention: /  /p' |
    sed "s/^/$(printf '%-18s' "$(basename "$example" .mlir)")/"
done

echo
echo "=== the lowering pipelines flashlight-compile runs (vanilla.mlir)"
"$compile" examples/vanilla.mlir -o "$out/pipeline" --emit=ptx --dump-pass-pipeline |
  sed 's/^/  /' 

echo
echo "=== compiled kernels (flashlight-compile --arch=sm_80,sm_90a)"
for example in examples/*.mlir; do
  start=$(date +%s%N)
  "$compile" "$example" -o "$out" --arch=sm_80,sm_90a
  echo "$(basename "$example" .mlir) $(( ($(date +%s%N) - start) / 1000000 ))" \
    >> "$out/times.txt"
done
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
times = dict(line.split() for line in open(os.path.join(out, "times.txt")))
# Per arch: its code generator, and the shared memory a block uses (the
# dynamic amount the launch asks for plus ptxas's static bytes).
print(f"{'variant':<18} {'codegen':<9} {'arch':<7} {'regs':>4} {'spill B':>7} "
      f"{'smem B':>7} {'lower ms':>8} {'ptxas ms':>8} {'total ms':>8}")
for name in sorted(times):
    m = json.load(open(os.path.join(out, name + ".json")))
    for arch, a in m["archs"].items():
        smem = a.get("dynamic_shared_memory", 0) + a.get("shared_bytes", 0)
        print(f"{name:<18} {a.get('codegen', m['codegen']):<9} {arch:<7} "
              f"{a['registers']:>4} {a['spill_store_bytes']:>7} {smem:>7} "
              f"{a['lower_ms']:>8.1f} {a['ptxas_ms']:>8.1f} {times[name]:>8}")
PY

echo
if ldconfig -p 2>/dev/null | grep -q libcuda.so.1; then
  echo "=== GPU check (flashlight-run --check)"
  for manifest in "$out"/*.json; do
    "$build/bin/flashlight-run" "$manifest" --check --bench --iters=10
  done
else
  echo "=== no GPU driver here: kernels compiled, not run (see scripts/gpu-check.sh)"
fi
