#!/usr/bin/env bash
# Prepares the GPU check of the real-world corpus (test/Corpus/{jax,torch})
# against each library's own f32 output. Runs here (the build, CPU JAX and
# PyTorch); scripts/corpus/gpu_check.py runs the result on the GPU machine
# (torch with CUDA, numpy and the repo's python/ only: no MLIR, no JAX).
#
#   scripts/corpus/prepare_gpu.sh OUTDIR [NAME...]
#
# NAME is a program name of either corpus, or CORPUS/NAME; default: every
# program of both index.json files. Writes
#
#   OUTDIR/kernels/<corpus>/  each program compiled by flashlight-compile
#                             (--arch=sm_80,sm_90a --emit=cubin), pruned to
#                             what flashlight.load() reads: the manifest
#                             <name>.json, the attention and host-step
#                             cubins of every arch (a PTX only for an arch
#                             without a cubin), and the constants the
#                             manifest names (a JSON graph's captured
#                             tensors, <name>.<constant>.bin, are copied
#                             from the corpus: the compiler only names them)
#   OUTDIR/kernels/<corpus>/compile.tsv   name, ok|error, first error line
#   OUTDIR/kernels/COMPILER   which flashlight-compile (sha256, repo commit):
#                             one copy of it compiles every program, even if
#                             the build is relinked meanwhile
#   OUTDIR/logs/<corpus>/<name>.log       the compiler's output
#   OUTDIR/ref/<corpus>/      the generators' --reference output: random
#                             inputs <name>.inputs.npz (bf16 as uint16 bit
#                             patterns), the f32 outputs <name>.expected.npy
#                             (JAX: a second result <name>.expected.1.npy)
#                             and index.json
#
# and prints the size of each of the four pieces (kernels/jax, kernels/torch,
# ref/jax, ref/torch): carry them to the GPU machine one or more at a time
# (gpu_check.py checks whatever programs have both a manifest and reference
# data). With NAMEs given, the reference is written for those only
# (a fresh OUTDIR per subset is simplest: the JAX generator rewrites
# index.json with the programs of its call).
#
# Environment: PYTHON (the generators' Python; default /work/venv/bin/python
# if present, else python3), SEED (reference inputs; default 0), BUILD
# (default <repo>/build), JOBS (parallel compiles; default nproc), ARCHS
# (default sm_80,sm_90a), CUDA_HOME (ptxas; default /usr/local/cuda),
# SKIP_COMPILE=1 / SKIP_REFERENCE=1 (do one half only), KEEP_PTX=1 (keep
# the PTX next to the cubins), PACK=1 (also write OUTDIR/<corpus>.tar.gz,
# kernels and reference data of one corpus per file).
#
# On the GPU machine:
#   PYTHONPATH=python python3 scripts/corpus/gpu_check.py OUTDIR/kernels OUTDIR/ref \
#       --out OUTDIR/results.json
set -euo pipefail

usage() { echo "usage: $0 OUTDIR [NAME|CORPUS/NAME...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out=$1; shift
root=$(cd "$(dirname "$0")/../.." && pwd)

if [ -z "${PYTHON:-}" ]; then
  if [ -x /work/venv/bin/python ]; then PYTHON=/work/venv/bin/python; else PYTHON=python3; fi
fi
SEED=${SEED:-0}
BUILD=${BUILD:-$root/build}
JOBS=${JOBS:-$(nproc)}
ARCHS=${ARCHS:-sm_80,sm_90a}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
compiler=$BUILD/bin/flashlight-compile
[ -x "$compiler" ] || [ -n "${SKIP_COMPILE:-}" ] || {
  echo "prepare_gpu: no $compiler (BUILD=...)" >&2; exit 2; }

# The programs: "<corpus> <name> <source path>" per line, from the index
# files (the torch index's "_generator" is not a program).
programs=$(python3 - "$root" "$@" <<'EOF'
import json, os, sys
root, wanted = sys.argv[1], sys.argv[2:]
suffix = {"jax": ".stablehlo.mlir", "torch": ".json"}
found, rows = set(), []
for corpus in ("jax", "torch"):
    folder = os.path.join(root, "test", "Corpus", corpus)
    with open(os.path.join(folder, "index.json")) as f:
        index = json.load(f)
    for name in sorted(index):
        if name.startswith("_"):
            continue
        if wanted and name not in wanted and f"{corpus}/{name}" not in wanted:
            continue
        found.update((name, f"{corpus}/{name}"))
        path = os.path.join(folder, name + suffix[corpus])
        if not os.path.exists(path):
            sys.exit(f"prepare_gpu: {path} is listed in the index but missing")
        rows.append(f"{corpus} {name} {path}")
unknown = [w for w in wanted if w not in found]
if unknown:
    sys.exit(f"prepare_gpu: unknown programs: {' '.join(unknown)}")
print("\n".join(rows))
EOF
)
mkdir -p "$out"
out=$(cd "$out" && pwd)
count=$(printf '%s\n' "$programs" | grep -c . || true)
echo "prepare_gpu: $count programs into $out"

# --- Kernels -----------------------------------------------------------------
if [ -z "${SKIP_COMPILE:-}" ]; then
  stage=$out/.stage
  rm -rf "$stage"
  mkdir -p "$stage/bin"
  for corpus in jax torch; do
    mkdir -p "$out/kernels/$corpus" "$out/logs/$corpus"
  done
  # Compile every program with one snapshot of the compiler: the build may
  # be relinked meanwhile (wait until the binary is executable and its size
  # and time stay put for 2 s).
  for try in $(seq 300); do
    before=$(stat -c '%s %Y' "$compiler" 2>/dev/null || true)
    sleep 2
    after=$(stat -c '%s %Y' "$compiler" 2>/dev/null || true)
    if [ -n "$before" ] && [ "$before" = "$after" ] && [ -x "$compiler" ] &&
        cp "$compiler" "$stage/bin/flashlight-compile" &&
        "$stage/bin/flashlight-compile" --version > /dev/null 2>&1; then
      break
    fi
    [ "$try" -lt 300 ] || { echo "prepare_gpu: $compiler does not settle" >&2; exit 1; }
    echo "prepare_gpu: waiting for $compiler (being rebuilt?)" >&2
  done
  {
    echo "compiler: $compiler"
    echo "sha256: $(sha256sum "$stage/bin/flashlight-compile" | cut -d' ' -f1)"
    echo "built: $(date -u -r "$compiler" '+%Y-%m-%dT%H:%M:%SZ')"
    echo "repo: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)" \
      "($(git -C "$root" status --porcelain 2>/dev/null | wc -l) paths changed)"
    echo "archs: $ARCHS"
    echo "prepared: $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
  } > "$out/kernels/COMPILER"
  compiler=$stage/bin/flashlight-compile
  # One program per job, each into its own staging folder (so that pruning
  # sees exactly its files); the log and exit status land beside it.
  # shellcheck disable=SC2317  # run through xargs
  compile_one() {
    local corpus=$1 name=$2 path=$3
    local dir=$stage/$corpus/$name
    mkdir -p "$dir"
    if "$compiler" "$path" -o "$dir/out" --name "$name" --arch="$ARCHS" --emit=cubin \
        > "$out/logs/$corpus/$name.log" 2>&1; then
      echo 0 > "$dir/rc"
    else
      echo $? > "$dir/rc"
    fi
  }
  export -f compile_one
  export compiler stage out ARCHS
  start=$SECONDS
  printf '%s\n' "$programs" | xargs -P "$JOBS" -L 1 bash -c 'compile_one "$@"' _
  echo "prepare_gpu: compiled in $((SECONDS - start)) s"

  # Prune to what flashlight.load() reads, move it into kernels/<corpus>/,
  # and write compile.tsv.
  python3 - "$root" "$stage" "$out" "${KEEP_PTX:-}" <<'EOF'
import json, os, shutil, sys
root, stage, out, keep_ptx = sys.argv[1:5]

def needed(manifest):
    """The files beside the manifest that flashlight.load()/call_entry read:
    per arch the cubin (the loader takes the device's own cubin first, a
    PTX only where no cubin of its arch exists), for the attention kernel
    (top-level archs, if there is a kernel) and the reference path's host
    module (entry.archs); and the constants (entry inputs' "file",
    sources' "constant", steps' "file")."""
    files = set()
    def artifacts(archs):
        for info in (archs or {}).values():
            if "cubin" in info and not keep_ptx:
                files.add(info["cubin"])
            else:
                files.update(info[k] for k in ("cubin", "ptx") if k in info)
    if manifest.get("kernel"):
        artifacts(manifest.get("archs"))
    entry = manifest.get("entry") or {}
    if "steps" in entry:
        artifacts(entry.get("archs"))
    for i in entry.get("inputs", []):
        if "file" in i:
            files.add(i["file"])
    for s in entry.get("sources", []):
        if "constant" in s:
            files.add(s["constant"])
    for s in entry.get("steps", []):
        if "file" in s:
            files.add(s["file"])
    return files

ok = {"jax": 0, "torch": 0}
for corpus in ("jax", "torch"):
    cdir = os.path.join(stage, corpus)
    if not os.path.isdir(cdir):
        continue
    dest = os.path.join(out, "kernels", corpus)
    rows = {}
    tsv = os.path.join(dest, "compile.tsv")
    if os.path.exists(tsv):  # keep the rows of earlier calls
        with open(tsv) as f:
            for line in f:
                if line.strip():
                    rows[line.split("\t", 1)[0]] = line
    for name in sorted(os.listdir(cdir)):
        pdir = os.path.join(cdir, name)
        with open(os.path.join(pdir, "rc")) as f:
            rc = int(f.read())
        for stale in os.listdir(dest):  # an earlier compile of this program
            if stale == name + ".json" or stale.startswith(name + "."):
                os.remove(os.path.join(dest, stale))
        log_path = os.path.join(out, "logs", corpus, name + ".log")
        with open(log_path, errors="replace") as f:
            log = f.read()
        manifest_path = os.path.join(pdir, "out", name + ".json")
        why = ""
        if rc != 0 or not os.path.exists(manifest_path):
            lines = [l.strip() for l in log.splitlines() if "error" in l.lower()]
            why = (lines[0] if lines else (log.strip().splitlines() or [f"exit {rc}"])[-1])
            why = f"exit {rc}: {why}"
        else:
            with open(manifest_path) as f:
                manifest = json.load(f)
            src_dir = os.path.join(root, "test", "Corpus", corpus)
            missing = []
            for file in sorted(needed(manifest)):
                for base in (os.path.join(pdir, "out"), src_dir):
                    if os.path.exists(os.path.join(base, file)):
                        target = os.path.join(dest, file)
                        if os.path.exists(target):
                            sys.exit(f"prepare_gpu: {file} of {name} collides with "
                                     "another program's file")
                        shutil.copy2(os.path.join(base, file), target)
                        break
                else:
                    missing.append(file)
            if missing:
                why = "missing after compile: " + " ".join(missing)
            else:
                shutil.copy2(manifest_path, os.path.join(dest, name + ".json"))
                ok[corpus] += 1
        why = why.replace("\t", " ").replace("\n", " ")
        rows[name] = f"{name}\t{'error' if why else 'ok'}\t{why}\n"
        if why:
            print(f"prepare_gpu: {corpus}/{name}: compile FAILED: {why}", file=sys.stderr)
    with open(tsv, "w") as f:
        f.writelines(rows[n] for n in sorted(rows))
    total = len(os.listdir(cdir))
    print(f"prepare_gpu: kernels/{corpus}: {ok[corpus]}/{total} compiled")
EOF
  rm -rf "$stage"
fi

# --- Reference data ----------------------------------------------------------
ref_status=0
if [ -z "${SKIP_REFERENCE:-}" ]; then
  for corpus in jax torch; do
    names=$(printf '%s\n' "$programs" | awk -v c="$corpus" '$1 == c {print $2}')
    [ -n "$names" ] || continue
    mkdir -p "$out/ref/$corpus"
    start=$SECONDS
    # shellcheck disable=SC2086
    if [ "$corpus" = jax ]; then
      # --reference is a flag here; options before the positionals.
      "$PYTHON" "$root/scripts/corpus/jax_corpus.py" --reference --seed "$SEED" \
        "$out/ref/jax" $names > "$out/logs/reference-jax.log" 2>&1 || {
        echo "prepare_gpu: the JAX reference failed (it stops at the first failing" \
             "program; $out/logs/reference-jax.log):" >&2
        tail -5 "$out/logs/reference-jax.log" >&2
        ref_status=1; }
    else
      "$PYTHON" "$root/scripts/corpus/torch_corpus.py" --seed "$SEED" \
        --reference "$out/ref/torch" $names > "$out/logs/reference-torch.log" 2>&1 || {
        echo "prepare_gpu: the PyTorch reference failed for some programs" \
             "($out/logs/reference-torch.log):" >&2
        grep -E "reference failed|^failed:" "$out/logs/reference-torch.log" >&2 || true
        ref_status=1; }
    fi
    n=$(find "$out/ref/$corpus" -name '*.inputs.npz' | wc -l)
    echo "prepare_gpu: ref/$corpus: $n programs in $((SECONDS - start)) s"
  done
fi

# --- Sizes -------------------------------------------------------------------
echo "prepare_gpu: sizes (carry each piece to the GPU machine; keep pieces under ~60 MB):"
for piece in kernels/jax kernels/torch ref/jax ref/torch; do
  [ -d "$out/$piece" ] || continue
  kb=$(du -sk "$out/$piece" | cut -f1)
  mb=$(awk -v k="$kb" 'BEGIN {printf "%.1f", k / 1024}')
  warn=""
  [ "$kb" -le $((60 * 1024)) ] || warn="  (over 60 MB: prepare it in subsets of NAMEs)"
  printf '  %-14s %7s MB  %4d files%s\n' "$piece" "$mb" "$(find "$out/$piece" -type f | wc -l)" "$warn"
done
printf '  %-14s %7s MB  (logs/ included; the GPU run needs kernels/ and ref/ only)\n' total \
  "$(awk -v k="$(du -sk --exclude='*.tar.gz' "$out" | cut -f1)" 'BEGIN {printf "%.1f", k / 1024}')"
if [ -n "${PACK:-}" ]; then
  # One gzipped tar per corpus (cubins shrink ~4x, the data ~10%): each
  # holds kernels/COMPILER, kernels/<corpus> and ref/<corpus>.
  echo "prepare_gpu: packed (tar xzf PIECE -C DIR, then gpu_check.py DIR/kernels DIR/ref):"
  for corpus in jax torch; do
    parts=()
    for p in kernels/COMPILER "kernels/$corpus" "ref/$corpus"; do
      [ -e "$out/$p" ] && parts+=("$p")
    done
    [ ${#parts[@]} -gt 0 ] || continue
    tar czf "$out/$corpus.tar.gz" -C "$out" "${parts[@]}"
    printf '  %-14s %7s MB\n' "$corpus.tar.gz" \
      "$(awk -v b="$(stat -c %s "$out/$corpus.tar.gz")" 'BEGIN {printf "%.1f", b / 1048576}')"
  done
fi
exit $ref_status
