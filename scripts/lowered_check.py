"""What the GPU checks of flashlight.jax share (scripts/jax_ffi_check.py,
scripts/jax_ring_check.py): the cache key is the StableHLO text, and the
GPU machine's JAX, which lowers it, is not the build machine's, so each
check runs in three steps: `lower TEXTS` (GPU machine), `fill CACHE TEXTS`
(build machine: compile), `run CACHE OUT.json` (GPU machine: check)."""

import json
import os
import sys


def lower(texts, programs):
    """Writes TEXTS/<name>.stablehlo.mlir for each `name: (fn, specs)`."""
    import flashlight.jax as fj

    os.makedirs(texts, exist_ok=True)
    for name, (fn, specs) in programs.items():
        with open(os.path.join(texts, name + ".stablehlo.mlir"), "w") as f:
            f.write(fj.JaxFunction(fn).stablehlo(*specs))
        print(f"{name}: lowered")


def fill(cache, texts, flag_sets):
    """Compiles every text of TEXTS into `cache` once per flag tuple of
    `flag_sets(name)` (the name without `.stablehlo.mlir`)."""
    import shutil
    import tempfile

    from flashlight._jit import cached_compile

    for name in sorted(os.listdir(texts)):
        for flags in flag_sets(name.split(".stablehlo")[0]):
            with tempfile.TemporaryDirectory() as folder:
                shutil.copy(os.path.join(texts, name),
                            os.path.join(folder, "program.stablehlo.mlir"))
                manifest, hit = cached_compile(folder, "program.stablehlo.mlir", cache=cache,
                                               flags=flags)
            print(f"{name} {' '.join(flags)}: {manifest} ({'cached' if hit else 'compiled'})")


def write_result(out_path, tool, command, records, failures):
    """Writes {"gpu", "jax", "commit", "command", "records"} and returns the
    exit status (1 on any failure)."""
    import jax

    result = {"gpu": str(jax.devices()[0].device_kind), "jax": jax.__version__,
              "commit": os.environ.get("FLASHLIGHT_COMMIT", "unknown"),
              "command": command, "records": records}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{tool}: {len(records) - failures}/{len(records)} pass")
    return 1 if failures else 0


def main(doc, lower, fill, run):
    """The command line: lower TEXTS | fill CACHE TEXTS | run CACHE OUT."""
    if len(sys.argv) == 3 and sys.argv[1] == "lower":
        lower(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "fill":
        fill(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(doc)
