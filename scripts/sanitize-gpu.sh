#!/usr/bin/env bash
# The GPU robustness matrix: compute-sanitizer over every example, with every
# code generator, at a shape that is not a multiple of the tiles.
#
#   scripts/sanitize-gpu.sh prepare <dir>   # here (needs the build)
#   scripts/sanitize-gpu.sh run <dir> [out.json]   # on the GPU machine
#
# `prepare` compiles each example (EXAMPLES: a subset) re-shaped to B = 1,
# M = N = 100 (SHAPE_ARGS to change) for three generators: the reference one
# (sm_90, --tensor-cores=false), mma.sync (sm_90) and wgmma (sm_90a), and
# copies flashlight-run beside them. `run` runs `flashlight-run --check`
# under compute-sanitizer's memcheck, racecheck, synccheck and initcheck
# (TOOLS to change; JOBS in parallel), prints one line per run, writes the
# records to out.json and exits non-zero on any sanitizer error or check
# failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?prepare or run}
dir=${2:?directory}

if [ "$mode" = prepare ]; then
  build=${BUILD:-$root/build}
  shape=${SHAPE_ARGS:---batch=1 --q-len=100 --kv-len=100}
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/kernels"
  cp "$build/bin/flashlight-run" "$dir/bin/"
  examples=${EXAMPLES:-$(cd "$root/examples" && ls *.mlir | sed 's/\.mlir$//')}
  for name in $examples; do
    for gen in reference mma_sync wgmma; do
      case $gen in
        reference) flags="--arch=sm_90 --tensor-cores=false" ;;
        mma_sync) flags="--arch=sm_90" ;;
        wgmma) flags="--arch=sm_90a" ;;
      esac
      # shellcheck disable=SC2086
      "$build/bin/flashlight-compile" "$root/examples/$name.mlir" \
        -o "$dir/kernels/$name.$gen" --name "$name" $flags $shape >/dev/null
    done
  done
  echo "sanitize-gpu: $(ls "$dir/kernels" | wc -l) kernels in $dir"
  exit 0
fi

out=${3:-$dir/sanitizer.json}
tools=${TOOLS:-memcheck racecheck synccheck initcheck}
jobs=${JOBS:-8}
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
list=$(mktemp)
for kernel in "$dir"/kernels/*; do
  for tool in $tools; do
    echo "$kernel $tool" >> "$list"
  done
done
one() {
  kernel=$1 tool=$2
  name=$(basename "$kernel")
  log="$kernel/$tool.log"
  rc=0
  timeout "${RUN_TIMEOUT:-240}" "$sanitizer" --tool "$tool" --error-exitcode 99 \
    "$dir/bin/flashlight-run" "$kernel/${name%.*}.json" --check >"$log" 2>&1 || rc=$?
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/=* //')
  echo "$name $tool $rc ${summary:-no summary}"
}
export -f one
export dir sanitizer
xargs -P "$jobs" -L 1 bash -c 'one $0 $1' < "$list" | sort | tee "$dir/results.txt"
rm -f "$list"
python3 - "$dir/results.txt" "$out" <<'PY'
import json, subprocess, sys
records = []
for line in open(sys.argv[1]):
    name, tool, rc, summary = line.split(" ", 3)
    variant, codegen = name.rsplit(".", 1)
    records.append({"variant": variant, "codegen": codegen, "tool": tool,
                    "exit": int(rc), "summary": summary.strip(),
                    "status": "pass" if rc == "0" else "fail"})
try:
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
except OSError:
    gpu = ""
failed = [r for r in records if r["status"] != "pass"]
json.dump({"gpu": gpu, "command": "scripts/sanitize-gpu.sh prepare DIR && "
           "scripts/sanitize-gpu.sh run DIR", "records": records},
          open(sys.argv[2], "w"), indent=1)
print(f"sanitize-gpu: {len(records) - len(failed)}/{len(records)} clean")
sys.exit(1 if failed else 0)
PY
