#!/usr/bin/env bash
# The GPU check of every example over a shape matrix.
#
#   scripts/gpu-check.sh prepare <dir>   # here (needs the build): compile
#   scripts/gpu-check.sh run <dir>       # on the GPU machine (driver only)
#
# `prepare` compiles each example (EXAMPLES: a space-separated subset), with
# each code generator (reference and tensor cores), as written and re-shaped
# (attn-specialize)
# to N = M in {1, 17, 128, 1000, 4096}, D in {64, 128}, bf16 and fp16, B = 2,
# 8 query heads over 2 KV heads (GQA 4:1), for sm_80 and sm_90a, and copies
# flashlight-run beside the kernels. `run` checks every kernel against the
# fp64 reference (flashlight-run --check; tolerance: relative error 2e-2 for
# bf16, 5e-3 for fp16, no NaN, every output element written), prints a table
# and exits non-zero on any failure; where PyTorch is importable it also
# cross-checks the as-written examples against PyTorch (scripts/torch_check.py).
#
# Imported programs: `prepare` also compiles every JAX fixture
# (test/Import/StableHLO/Inputs/jax) and PyTorch fixture
# (test/Import/JSON/Inputs/torch, and torch-mlir's output of the same
# programs as `torch` dialect text, linalg and TOSA,
# test/Import/TorchMLIR/Inputs) into <dir>/jax,
# <dir>/torch and <dir>/torch-mlir-{torch,linalg,tosa}; `run`
# checks each against the framework's own f32 result of the same function
# on the same inputs (scripts/jax_check.py, scripts/torch_import_check.py),
# where JAX / PyTorch are importable.
#
# The real-world corpus (test/Corpus: HF transformers, attention-gym, flax,
# equinox, haiku, Gemma, AlphaFold): with CORPUS=1, `prepare` also runs
# scripts/corpus/prepare_gpu.sh into <dir>/corpus (kernels, and reference
# inputs and outputs computed here by the libraries themselves in f32), and
# `run` checks every program with scripts/corpus/gpu_check.py.
set -euo pipefail
mode=${1:?usage: gpu-check.sh prepare|run <dir>}
dir=${2:?usage: gpu-check.sh prepare|run <dir>}
root=$(cd "$(dirname "$0")/.." && pwd)

if [ "$mode" = prepare ]; then
  build=${BUILD:-$root/build}
  # flashlight-compile finds ptxas and libdevice through CUDA_HOME; default to
  # the toolkit the build found (possibly the PyPI one in .deps/cuda).
  if [ -z "${CUDA_HOME:-}" ] && [ -s "$build/cuda-path.txt" ]; then
    export CUDA_HOME=$(cat "$build/cuda-path.txt")
  fi
  rm -rf "$dir" && mkdir -p "$dir/bin"
  cp "$build/bin/flashlight-run" "$dir/bin/"
  # Both code generators: the reference one, and tensor cores (programs the
  # latter cannot take fall back to the reference kernel, with a remark).
  # reference: no tensor cores; mma: mma.sync on every arch; wgmma: the
  # default (wgmma on sm_90a where it applies, mma.sync elsewhere);
  # consumers, rows192 (not in the default set): wgmma without the
  # producer warpgroup (and its turns), or on 192 x 128 tiles (three
  # consumer warpgroups) at every shape.
  for codegen in ${CODEGENS:-reference mma wgmma}; do
    case "$codegen" in
      reference) flags=(--tensor-cores=false) ;;
      mma) flags=(--tensor-cores --wgmma=false) ;;
      consumers) flags=(--tensor-cores --producer-warpgroup=false) ;;
      rows192) flags=(--tensor-cores --block-m=192 --block-n=128) ;;
      *) flags=(--tensor-cores) ;;
    esac
    # 192 x 128 tiles: wgmma (sm_90a) only, and they fit in shared memory
    # at D = 64 only; a program they cannot serve (no KV loop, a block
    # mask) is a compile error, and skipped.
    # DIMS: the matrix's head dims (default 64 and 128).
    dims="${DIMS:-64 128}" archs=sm_80,sm_90a skip=false
    [ "$codegen" = rows192 ] && dims=64 archs=sm_90a skip=true
    mkdir -p "$dir/$codegen-examples" "$dir/$codegen-matrix"
    for example in "$root"/examples/*.mlir; do
      name=$(basename "$example" .mlir)
      case " ${EXAMPLES:-$name} " in *" $name "*) ;; *) continue ;; esac
      "$build/bin/flashlight-compile" "$example" -o "$dir/$codegen-examples" \
        --arch=$archs "${flags[@]}" 2>/dev/null || $skip
      for n in 1 17 128 1000 4096; do
        for d in $dims; do
          for dtype in bf16 f16; do
            "$build/bin/flashlight-compile" "$example" -o "$dir/$codegen-matrix" \
              --arch=sm_90a --name="$name.n$n.d$d.$dtype" --batch=2 \
              --q-heads=8 --kv-heads=2 --q-len=$n --kv-len=$n --head-dim=$d \
              --dtype=$dtype "${flags[@]}" 2>/dev/null || $skip
          done
        done
      done
    done
    # The matrix runs on Hopper only; drop what the run does not need.
    rm -f "$dir/$codegen-matrix"/*.mlir "$dir/$codegen-matrix"/*.ptx
  done
  # Imported programs: one kernel each, called with the user's arguments.
  mkdir -p "$dir/jax" "$dir/torch"
  for program in "$root"/test/Import/StableHLO/Inputs/jax/*.stablehlo.mlir; do
    "$build/bin/flashlight-compile" "$program" -o "$dir/jax" --arch=sm_80,sm_90a
  done
  for program in "$root"/test/Import/JSON/Inputs/torch/*.json; do
    [ "$(basename "$program")" = index.json ] && continue
    "$build/bin/flashlight-compile" "$program" -o "$dir/torch" --arch=sm_80,sm_90a
  done
  cp "$root"/test/Import/JSON/Inputs/torch/*.bin "$dir/torch/"
  # torch-mlir's torch, linalg-on-tensors and TOSA output of the same programs.
  for kind in torch linalg tosa; do
    mkdir -p "$dir/torch-mlir-$kind"
    for program in "$root"/test/Import/TorchMLIR/Inputs/*.$kind.mlir; do
      "$build/bin/flashlight-compile" "$program" -o "$dir/torch-mlir-$kind" \
        --arch=sm_80,sm_90a
    done
  done
  if [ "${CORPUS:-0}" = 1 ]; then
    BUILD="$build" "$root/scripts/corpus/prepare_gpu.sh" "$dir/corpus"
  fi
  echo "gpu-check: prepared $(ls "$dir"/*/*.json | wc -l) kernels in $dir"
  exit 0
fi

[ "$mode" = run ] || { echo "unknown mode $mode" >&2; exit 2; }
run=$dir/bin/flashlight-run
results=$dir/results.jsonl
: > "$results"
export run
# (A set may have no examples: rows192 refuses where it does not apply.)
{ ls "$dir"/*-examples/*.json "$dir"/*-matrix/*.json 2>/dev/null || true; } |
  xargs -P "$(nproc)" -I{} sh -c '
    m={}; rows=""; codegen=$(basename "$(dirname "$m")")
    # Long shapes check a sample of rows, the others every row up to 256.
    case "$m" in *.n1000.*) rows=--check-rows=32 ;; *.n4096.*) rows=--check-rows=16 ;; esac
    # The exit status joins the error: a run that died with no output (a
    # signal: 128 + its number) says how.
    out=$("$run" "$m" --check --seed=1 $rows 2>&1); rc=$?
    if [ $rc -ne 0 ]; then
      case "$out" in "{"*) ;; *) out="{\"name\": \"$m\", \"pass\": false, \"error\": \"exit $rc: $(echo "$out" | tr "\"\n" "  ")\"}" ;; esac
    fi
    echo "$out" | sed "s|^{|{\"set\": \"$codegen\", |"' >> "$results"

status=0
python3 - "$results" <<'PY' || status=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows.sort(key=lambda r: (r.get("set", ""), r["name"]))
fails = [r for r in rows if not r.get("pass")]
print(f"{'set':<20} {'kernel':<36} {'out rel_err':>11} {'max_abs':>9}  status")
for r in rows:
    c = r.get("check", {}).get("out", {})
    print(f"{r.get('set', ''):<20} {r['name']:<36} {c.get('rel_err', float('nan')):11.2e} "
          f"{c.get('max_abs', float('nan')):9.2e}  {'ok' if r.get('pass') else 'FAIL ' + r.get('error', '')}")
worst = max((r["check"]["out"]["rel_err"] for r in rows if "check" in r), default=0)
print(f"gpu-check: {len(rows) - len(fails)}/{len(rows)} kernels pass; "
      f"worst relative error {worst:.2e}; device {rows[0].get('device', '?') if rows else '?'}")
sys.exit(1 if fails else 0)
PY
if python3 -c "import torch" 2>/dev/null; then
  for examples in "$dir"/*-examples; do
    python3 "$root/scripts/torch_check.py" "$examples" || status=1
  done
  if [ -d "$dir/torch" ]; then
    python3 "$root/scripts/torch_import_check.py" "$dir/torch" \
      --out "$dir/torch-import.jsonl" || status=1
  fi
  for kind in torch linalg tosa; do
    if [ -d "$dir/torch-mlir-$kind" ]; then
      python3 "$root/scripts/torch_import_check.py" "$dir/torch-mlir-$kind" \
        --fixtures "$root/test/Import/TorchMLIR/Inputs/*.$kind.mlir" \
        --out "$dir/torch-mlir-$kind-import.jsonl" || status=1
    fi
  done
fi
if [ -d "$dir/jax" ] && python3 -c "import jax, torch" 2>/dev/null; then
  python3 "$root/scripts/jax_check.py" "$dir/jax" --require-all \
    --out "$dir/jax-import.jsonl" || status=1
fi
if [ -d "$dir/corpus/kernels" ]; then
  python3 "$root/scripts/corpus/gpu_check.py" "$dir/corpus/kernels" \
    "$dir/corpus/ref" --out "$dir/corpus-check.json" || status=1
fi
exit $status
