#!/usr/bin/env bash
# Builds the pip package: the Python package with the statically linked
# compiler (flashlight-compile-static, as flashlight/_bin/flashlight-compile)
# and, when it was built, the JAX FFI library (flashlight/_lib).
#   scripts/build-wheel.sh [OUT_DIR]     # default dist/; BUILD=build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$root/dist}" && cd "${1:-$root/dist}" && pwd)
build=${BUILD:-$root/build}
cmake -S "$root" -B "$build" -DFLASHLIGHT_STATIC_COMPILER=ON > /dev/null
cmake --build "$build" --target flashlight-compile-static
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -r "$root/python/." "$stage/"
rm -rf "$stage/flashlight/__pycache__" "$stage/build" "$stage"/*.egg-info
mkdir -p "$stage/flashlight/_bin" "$stage/flashlight/_lib"
cp "$build/bin/flashlight-compile-static" "$stage/flashlight/_bin/flashlight-compile"
if [ -f "$build/lib/libflashlight_jax.so" ]; then
  cp "$build/lib/libflashlight_jax.so" "$stage/flashlight/_lib/"
fi
python3 -m pip wheel --no-deps -q "$stage" -w "$out"
ls "$out"/flashlight_attn-*.whl
