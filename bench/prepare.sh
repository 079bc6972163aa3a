#!/usr/bin/env bash
# Compiles the benchmark programs (bench/programs) with the tensor-core code
# generator for every benchmark shape: D in {64, 128}, N in {1k .. 16k},
# B * N = 16k, H * D = 2048, bf16 (GQA: 4 query heads per KV head). The
# MLA programs (Q.K head dim 192, V's 128) compile at DIMS=192 only.
#   bench/prepare.sh <dir>      # here; then bench/bench.py <dir> on the GPU
# Environment: VARIANTS, DIMS, LENGTHS (space-separated subsets) and EXTRA
# (more flashlight-compile flags, e.g. "--block-m=128") for experiments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: bench/prepare.sh <dir>}
build=${BUILD:-$root/build}
# flashlight-compile finds ptxas and libdevice through CUDA_HOME; default to
# the toolkit the build found (possibly the PyPI one in .deps/cuda).
if [ -z "${CUDA_HOME:-}" ] && [ -s "$build/cuda-path.txt" ]; then
  export CUDA_HOME=$(cat "$build/cuda-path.txt")
fi
rm -rf "$dir" && mkdir -p "$dir"
for program in "$root"/bench/programs/*.mlir; do
  name=$(basename "$program" .mlir)
  case " ${VARIANTS:-$name} " in *" $name "*) ;; *) continue ;; esac
  for d in ${DIMS:-64 128}; do
    # The MLA programs keep their own head dims (Q.K 192, V 128): D = 192.
    head_dim=(--head-dim=$d)
    case "$name" in mla*) [ "$d" = 192 ] || continue; head_dim=() ;; esac
    for n in ${LENGTHS:-1024 2048 4096 8192 16384}; do
      b=$((16384 / n)); h=$((2048 / d)); hkv=$h
      [ "$name" = gqa ] && hkv=$((h / 4))
      "$build/bin/flashlight-compile" "$program" -o "$dir" --arch=sm_90a \
        --emit=cubin --tensor-cores --name="$name.d$d.n$n" --batch=$b \
        --q-heads=$h --kv-heads=$hkv --q-len=$n --kv-len=$n "${head_dim[@]}" \
        --dtype=bf16 ${EXTRA:-}
    done
  done
done
rm -f "$dir"/*.mlir
echo "bench: compiled $(ls "$dir"/*.json | wc -l) kernels into $dir"
