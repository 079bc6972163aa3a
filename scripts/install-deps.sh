#!/usr/bin/env bash
# Installs what Flashlight needs to build and test on Debian 12, and nothing
# that is already there. Idempotent; run as root (or with sudo available).
set -euo pipefail

packages=(
  cmake ninja-build g++ make python3
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  nlohmann-json3-dev catch2
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
      grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
