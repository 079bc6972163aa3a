#!/usr/bin/env bash
# Runs Flashlight on every shipped example: parse, verify, canonicalize and
# print it, explain its structure, then show the pass pipeline and a summary.
# Usage: scripts/demo.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
opt="$build/bin/flashlight-opt"
pipeline="builtin.module(canonicalize,attn-explain)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

summary=()
for example in examples/*.mlir; do
  name=$(basename "$example" .mlir)
  echo "=== $name ($example)"
  # stdout: the verified, canonicalized IR; stderr: the explain remark.
  if ! "$opt" "$example" --verify-roundtrip --pass-pipeline="$pipeline" \
        --mlir-print-op-on-diagnostic=false \
        >"$tmp/ir" 2>"$tmp/remarks"; then
    cat "$tmp/remarks"
    echo "FAILED: $example"
    exit 1
  fi
  cat "$tmp/ir"
  remark=$(grep -o 'remark: .*' "$tmp/remarks" | head -1)
  echo "$remark"
  summary+=("$(printf '%-18s %s' "$name" "${remark#remark: attn.attention: }")")
  echo
done

echo "=== pass pipeline"
"$opt" examples/vanilla.mlir --pass-pipeline="$pipeline" \
  --dump-pass-pipeline --mlir-print-op-on-diagnostic=false -o /dev/null 2>&1 |
  grep -v remark || true
echo
echo "=== summary: ${#summary[@]} examples parsed, verified and round-tripped"
printf '%s\n' "${summary[@]}"
