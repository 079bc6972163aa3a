#!/usr/bin/env bash
# Compiles every example, benchmark program, imported fixture and corpus
# program to PTX (both archs, each code generator) into one directory, so
# that a refactoring of the compiler can be checked byte for byte:
#   scripts/ptx-snapshot.sh <dir>            # with build/ (BUILD=...)
#   diff -r <before> <after>                 # what changed
# Manifests are kept next to the PTX (they carry the kernel plan, block
# sizes and shared memory). The programs of bench/programs.py are exported
# too when PyTorch is importable. JOBS compiles run at once (default nproc).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: scripts/ptx-snapshot.sh <dir>}
build=${BUILD:-$root/build}
compile=$build/bin/flashlight-compile
jobs=${JOBS:-$(nproc)}
if [ -z "${CUDA_HOME:-}" ] && [ -s "$build/cuda-path.txt" ]; then
  export CUDA_HOME=$(cat "$build/cuda-path.txt")
fi
rm -rf "$dir" && mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
tasks=$dir/tasks.txt
: > "$tasks"
# One line per compile: output subdirectory, then flashlight-compile's
# arguments (no spaces inside an argument).
add() { echo "$*" >> "$tasks"; }

for example in "$root"/examples/*.mlir; do
  name=$(basename "$example" .mlir)
  add examples-reference "$example" --arch=sm_80,sm_90a --tensor-cores=false
  add examples-mma "$example" --arch=sm_80,sm_90a --wgmma=false
  add examples-default "$example" --arch=sm_80,sm_90a
  for n in 17 1000 8192; do
    for d in 64 128; do
      shape="--batch=2 --q-heads=8 --kv-heads=2 --q-len=$n --kv-len=$n"
      shape="$shape --head-dim=$d --dtype=bf16"
      add matrix "$example" --arch=sm_80,sm_90a --name=$name.n$n.d$d $shape
      add matrix-mma "$example" --arch=sm_90a --wgmma=false \
        --name=$name.n$n.d$d $shape
      [ "$n" = 8192 ] || add matrix-reference "$example" --arch=sm_90a \
        --tensor-cores=false --name=$name.n$n.d$d $shape
    done
  done
done
for program in "$root"/bench/programs/*.mlir; do
  name=$(basename "$program" .mlir)
  # The MLA programs (Q.K 192, V 128) are benchmarked at their own head dims.
  case "$name" in mla*) continue ;; esac
  for d in 64 128; do
    for n in 1024 2048 4096 8192 16384; do
      b=$((16384 / n)) h=$((2048 / d)) hkv=$((2048 / d))
      [ "$name" = gqa ] && hkv=$((h / 4))
      add bench "$program" --arch=sm_80,sm_90a --name=$name.d$d.n$n \
        --batch=$b --q-heads=$h --kv-heads=$hkv --q-len=$n --kv-len=$n \
        --head-dim=$d --dtype=bf16
    done
  done
done
for program in "$root"/test/Import/StableHLO/Inputs/jax/*.stablehlo.mlir \
    "$root"/test/Import/TorchMLIR/Inputs/*.mlir; do
  add fixtures "$program" --arch=sm_80,sm_90a
done
for program in "$root"/test/Import/JSON/Inputs/torch/*.json; do
  [ "$(basename "$program")" = index.json ] && continue
  add fixtures "$program" --arch=sm_80,sm_90a
done
for program in "$root"/test/Corpus/jax/*.mlir "$root"/test/Corpus/torch/*.json; do
  [ "$(basename "$program")" = index.json ] && continue
  [ -e "$program" ] || continue
  add corpus "$program" --arch=sm_80,sm_90a
done
if python3 -c "import torch" 2>/dev/null; then
  mkdir -p "$dir/graphs"
  PYTHONPATH="$root/python" python3 "$root/bench/programs.py" export \
    "$dir/graphs" --dims 64,128 --lengths 2048,8192 2>/dev/null
  for graph in "$dir"/graphs/*.json; do
    [ -e "$graph" ] && add programs "$graph" --arch=sm_80,sm_90a
  done
fi

run() {
  local sub=$1; shift
  mkdir -p "$dir/$sub"
  "$compile" "$@" -o "$dir/$sub" --emit=ptx > /dev/null 2>&1 ||
    echo "failed: $sub $*" >> "$dir/failures.txt"
}
export -f run
export compile dir
xargs -P "$jobs" -L 1 bash -c 'run "$@"' _ < "$tasks"
# The manifests name the source by its path (keep it relative) and time
# the compile (drop that).
sed -i "s|$root/||g; s|$dir/||g; /\"[a-z_]*_ms\":/d" "$dir"/*/*.json 2>/dev/null
rm -f "$tasks"
echo "ptx-snapshot: $(ls "$dir"/*/*.ptx | wc -l) PTX files in $dir" \
  "($(cat "$dir/failures.txt" 2>/dev/null | wc -l) failed compiles)"
