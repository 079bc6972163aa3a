#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-22 in build-fuzz/ and runs each
# for N executions (default 100000), seeded with the importer's fixtures and
# the real-world corpus (test/Corpus), and flashlight-compile's manifests
# (tools/fuzz/seeds) for the runtime's manifest loader. `make fuzz` installs
# clang-22 first (scripts/install-deps.sh --fuzz). The pipeline behind the
# importers is fuzzed by scripts/fuzz/attn_programs.py (random attn programs
# through flashlight-compile; ctest fuzz/attn-programs runs a short one):
#   scripts/fuzz.sh [N]
# Crashing inputs land in build-fuzz/crashes/<target>/ and make this fail;
# each one found becomes a regression test under test/Import.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-100000}
build="$root/build-fuzz"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release -DFLASHLIGHT_FUZZERS=ON \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$build" stablehlo-import-fuzzer json-import-fuzzer torch-import-fuzzer \
  manifest-fuzzer

# Seeds: every JAX fixture (both forms) and each case of the importer tests.
corpus="$build/corpus/stablehlo"
mkdir -p "$corpus" "$build/crashes/stablehlo"
cp "$root"/test/Import/StableHLO/Inputs/jax/*.mlir "$corpus/"
cp "$root"/test/Corpus/jax/*.stablehlo.mlir "$corpus/"  # the real-world corpus
for test in "$root"/test/Import/StableHLO/*.mlir; do
  awk -v dir="$corpus" -v base="$(basename "$test" .mlir)" \
    '/^\/\/ -----/ { n++; next } { print > (dir "/" base "-" n ".mlir") }' "$test"
done
# JSON graphs: the PyTorch fixtures.
mkdir -p "$build/corpus/json" "$build/crashes/json"
cp "$root"/test/Import/JSON/Inputs/torch/*.json "$build/corpus/json/"
for f in "$root"/test/Corpus/torch/*.json; do  # the real-world corpus
  [ "$(basename "$f")" = index.json ] || cp "$f" "$build/corpus/json/"
done
cp "$root"/test/Import/JSON/*.json "$build/corpus/json/" 2>/dev/null || true
# torch-mlir text: the `torch` dialect fixtures and the importer tests.
corpus="$build/corpus/torch"
mkdir -p "$corpus" "$build/crashes/torch"
cp "$root"/test/Import/TorchMLIR/Inputs/*.torch.mlir "$corpus/"
for test in "$root"/test/Import/TorchMLIR/*.mlir; do
  awk -v dir="$corpus" -v base="$(basename "$test" .mlir)" \
    '/^\/\/ -----/ { n++; next } { print > (dir "/" base "-" n ".mlir") }' "$test"
done

# Manifests: flashlight-compile's, with and without an entry and a block mask.
mkdir -p "$build/corpus/manifest" "$build/crashes/manifest"
cp "$root"/tools/fuzz/seeds/manifest/*.json "$build/corpus/manifest/"

status=0
for target in stablehlo json torch manifest; do
  binary=$target-import-fuzzer
  [ "$target" = manifest ] && binary=manifest-fuzzer
  echo "fuzz.sh: $binary, $runs runs"
  # allow_user_poisoning=0: LLVM's BumpPtrAllocator poisons fresh slabs
  # when its inline code is compiled with ASan (ours), but Debian's
  # libMLIR.so allocates from the same slabs uninstrumented, never
  # unpoisoning: a false "use-after-poison" in the context's uniquer.
  ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0 \
    "$build/bin/$binary" \
    "$build/corpus/$target" -runs="$runs" -max_len=16384 -timeout=20 \
    -rss_limit_mb=4096 -artifact_prefix="$build/crashes/$target/" \
    -print_final_stats=1 || status=1
done
exit $status
