#!/usr/bin/env bash
# Regenerates the JAX fixtures with a real JAX and compiles every program:
#   scripts/check-jax-fixtures.sh BUILD_DIR
# 1. scripts/jax_fixtures.py writes them again; with the pinned JAX version
#    the committed test/Import/StableHLO/Inputs/jax must be identical (they
#    are generated, never edited by hand);
# 2. flashlight-compile turns each into one kernel (PTX, and cubin when
#    ptxas is there) with a manifest.
# Exits 77 (skipped) when JAX is not installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
out="$build/jax-fixtures"
export PYTHONPATH="$root/.deps/python${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import jax" 2>/dev/null; then
  echo "check-jax-fixtures: jax is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
if [ -z "${CUDA_HOME:-}" ] && [ -s "$build/cuda-path.txt" ]; then
  CUDA_HOME=$(cat "$build/cuda-path.txt")
  export CUDA_HOME
fi

rm -rf "$out"
python3 "$root/scripts/jax_fixtures.py" "$out/programs" --generic
committed="$root/test/Import/StableHLO/Inputs/jax"
version=$(python3 -c "import jax; print(jax.__version__)")
if head -1 "$committed/vanilla_bhnd.stablehlo.mlir" | grep -q "(jax $version)"; then
  diff -r "$committed" "$out/programs"
  echo "check-jax-fixtures: the committed fixtures are what jax $version exports"
else
  echo "check-jax-fixtures: jax $version differs from the fixtures' version; not comparing"
fi

emit=ptx
if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/ptxas" ]; then
  emit=cubin
fi
programs=0
for f in "$out"/programs/*.stablehlo.mlir; do
  programs=$((programs + 1))
  "$build/bin/flashlight-compile" "$f" -o "$out/kernels" --arch=sm_80,sm_90a \
    --emit=$emit
done
manifests=$(ls "$out"/kernels/*.json | wc -l)
echo "check-jax-fixtures: $manifests of $programs programs compiled to one kernel each ($emit)"
[ "$manifests" -eq "$programs" ]
