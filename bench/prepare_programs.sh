#!/usr/bin/env bash
# Exports the PyTorch attention programs of bench/programs.py (issue 6:
# differential, Evoformer, sigmoid, sinks, T5) with flashlight.export and
# compiles each with flashlight-compile for every benchmark shape: D in
# {64, 128}, N in {2048, 8192}, B * N = 16k, H * D = 2048, bf16.
#   bench/prepare_programs.sh <dir>     # here; then bench/bench_programs.py <dir> <out> there
# Environment: VARIANTS, DIMS, LENGTHS (space-separated subsets), EXTRA (more
# flashlight-compile flags), BUILD (default: <repo>/build), PYTHON.
# Writes <dir>/graphs/<name>.json (the exported graphs; example inputs on the
# "meta" device, nothing allocated), <dir>/<name>.json (manifests) and
# cubins, <dir>/logs/<name>.log (flashlight-compile --flashlight-explain) and
# <dir>/summary.tsv (name, ok/failed, code generator, first error). A program
# that fails to export or compile is reported and skipped (the benchmark
# records the error); the exit status is 1 then, 0 when all compiled.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: bench/prepare_programs.sh <dir>}
build=${BUILD:-$root/build}
python=${PYTHON:-python3}
if [ -z "${CUDA_HOME:-}" ] && [ -s "$build/cuda-path.txt" ]; then
  export CUDA_HOME=$(cat "$build/cuda-path.txt")
fi
variants=${VARIANTS:-differential evoformer sigmoid sigmoid_causal sink t5 ipa}
dims=${DIMS:-64 128}
lengths=${LENGTHS:-2048 8192}
rm -rf "$dir" && mkdir -p "$dir/graphs" "$dir/logs"
{
  echo "source tree: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(
    git -C "$root" diff --quiet HEAD -- lib include dialects tools 2>/dev/null ||
    echo ' (compiler sources modified since; the binary may be older or newer)')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "flashlight-compile: $build/bin/flashlight-compile, sha256 $(sha256sum "$build/bin/flashlight-compile" | cut -c1-16), built $(date -u -r "$build/bin/flashlight-compile" +%Y-%m-%dT%H:%M:%SZ)"
  echo "command: VARIANTS='$variants' DIMS='$dims' LENGTHS='$lengths' EXTRA='${EXTRA:-}' $0 $*"
} > "$dir/PREPARED.txt"

comma() { echo "$*" | tr ' ' ','; }
"$python" "$root/bench/programs.py" export "$dir/graphs" --variants "$(comma $variants)" \
  --dims "$(comma $dims)" --lengths "$(comma $lengths)" 2> "$dir/logs/export.log"
export_status=$?
grep -v "Warning\|warn" "$dir/logs/export.log" >&2

printf 'name\tstatus\tcodegen\tdetail\n' > "$dir/summary.tsv"
failed=0
for variant in $variants; do
  for d in $dims; do
    for n in $lengths; do
      name=$variant.d$d.n$n
      graph=$dir/graphs/$name.json
      log=$dir/logs/$name.log
      if [ ! -s "$graph" ]; then
        printf '%s\tfailed\t-\texport failed (logs/export.log)\n' "$name" >> "$dir/summary.tsv"
        failed=$((failed + 1)); continue
      fi
      "$build/bin/flashlight-compile" "$graph" -o "$dir" --arch=sm_90a --emit=cubin \
        --tensor-cores --name="$name" --flashlight-explain ${EXTRA:-} > "$log" 2>&1
      status=$?
      codegen=$(grep -o 'code generator [a-z_-]*' "$log" | head -1 | cut -d' ' -f3)
      [ -z "$codegen" ] && grep -q 'takes the reference path' "$log" && codegen=reference-path
      if [ $status -eq 0 ] && [ -s "$dir/$name.json" ]; then
        why=$(grep -o 'tensor-core path not taken: [^;]*' "$log" | head -1)
        printf '%s\tok\t%s\t%s\n' "$name" "${codegen:--}" "$why" >> "$dir/summary.tsv"
      else
        err=$(grep -m1 'error:' "$log" | sed 's/^[^ ]*: error: /error: /')
        printf '%s\tfailed\t%s\t%s\n' "$name" "${codegen:--}" "${err:-exit status $status}" \
          >> "$dir/summary.tsv"
        rm -f "$dir/$name".*  # nothing half-written for a failed compile
        failed=$((failed + 1))
      fi
    done
  done
done
rm -f "$dir"/*.mlir "$dir"/*.ptx
column -t -s $'\t' "$dir/summary.tsv" 2>/dev/null || cat "$dir/summary.tsv"
echo "bench: $(grep -c $'\tok\t' "$dir/summary.tsv") compiled, $failed failed;" \
  "$(du -sh "$dir" | cut -f1) in $dir"
[ $failed -eq 0 ] && [ $export_status -eq 0 ]
