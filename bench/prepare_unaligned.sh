#!/usr/bin/env bash
# Compiles bench/unaligned.py's kernels: vanilla and causal programs at
# static lengths no tile divides (and between the tile rules' measured
# lengths), B * N about 16k, H * D = 2048, bf16, named
# <variant>_d<D>_n<N>_<label>.json.
#   bench/prepare_unaligned.sh <dir> <label> [flashlight-compile flags]
# BUILD picks the compiler (default build/), so that two builds compare:
#   BUILD=/old/build bench/prepare_unaligned.sh DIR A
#   bench/prepare_unaligned.sh DIR C
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: bench/prepare_unaligned.sh <dir> <label> [flags]}
label=${2:?usage: bench/prepare_unaligned.sh <dir> <label> [flags]}
shift 2
flags=("$@")
build=${BUILD:-$root/build}
if [ -z "${CUDA_HOME:-}" ] && [ -s "$build/cuda-path.txt" ]; then
  export CUDA_HOME=$(cat "$build/cuda-path.txt")
fi
mkdir -p "$dir"
# variant, D, N, B
for spec in "vanilla 64 2000 8" "causal 64 2000 8" "vanilla 128 2000 8" \
            "causal 128 2000 8" "vanilla 128 1000 16" "causal 64 4000 4" \
            "vanilla 64 1536 8" "vanilla 64 1200 8" "causal 64 6144 2"; do
  set -- $spec
  "$build/bin/flashlight-compile" "$root/bench/programs/$1.mlir" -o "$dir" \
    --name="$1_d$2_n$3_$label" --arch=sm_90a --emit=cubin --batch=$4 \
    --q-heads=$((2048 / $2)) --kv-heads=$((2048 / $2)) --q-len=$3 --kv-len=$3 \
    --head-dim=$2 --dtype=bf16 "${flags[@]}"
done
rm -f "$dir"/*.mlir "$dir"/*.ptx
