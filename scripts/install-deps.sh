#!/usr/bin/env bash
# Installs what Flashlight needs to build and test on Debian 12, and nothing
# that is already there. Idempotent; run as root (or with sudo available).
#   scripts/install-deps.sh [--fuzz]
# --fuzz adds what the libFuzzer targets need (clang-22 and its runtime
# libraries: libFuzzer, ASan), for `make fuzz` / scripts/fuzz.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  cmake ninja-build g++ make python3 python3-pip
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  nlohmann-json3-dev catch2
  # The static compiler of the pip package links zlib and zstd too.
  zlib1g-dev libzstd-dev
)
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang-22 libclang-rt-22-dev)
fi

# ptxas and libdevice assemble and link the PTX (CUDA toolkit, or NVIDIA's
# PyPI wheel when no toolkit is installed).
cuda_wheel="nvidia-cuda-nvcc-cu12==12.9.86"
cuda_local="$root/.deps/cuda"
has_cuda() {
  for dir in "${CUDA_HOME:-}" /usr/local/cuda "$cuda_local/nvidia/cuda_nvcc"; do
    [ -n "$dir" ] && [ -x "$dir/bin/ptxas" ] &&
      [ -f "$dir/nvvm/libdevice/libdevice.10.bc" ] && return 0
  done
  return 1
}
missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
      grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
if [ ${#missing[@]} -ne 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! has_cuda; then
  echo "install-deps: no CUDA toolkit; installing ptxas and libdevice from PyPI ($cuda_wheel)"
  python3 -m pip install --quiet --no-deps --break-system-packages \
    --target "$cuda_local" "$cuda_wheel"
  chmod +x "$cuda_local/nvidia/cuda_nvcc/bin/"*
fi
# JAX (CPU) exports the StableHLO fixtures that the tests regenerate and
# compile (scripts/check-jax-fixtures.sh); pinned, since the committed
# fixtures are its output.
jax_version="0.10.2"
python_local="$root/.deps/python"
if ! PYTHONPATH="$python_local" python3 -c \
    "import jax, sys; sys.exit(jax.__version__ != '$jax_version')" 2>/dev/null; then
  echo "install-deps: installing jax==$jax_version (CPU) into .deps/python"
  python3 -m pip install --quiet --break-system-packages --target "$python_local" \
    "jax==$jax_version" "jaxlib==$jax_version"
fi
echo "install-deps: everything is installed"
