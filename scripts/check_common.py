"""What the two-step GPU checks (scripts/jit_check.py, scripts/hf_check.py)
share: the results file and the command line (`fill CACHE` where the
compiler is, `run CACHE OUT.json` on the GPU machine)."""

import json
import os
import sys


def write_result(out_path, name, records, failures, **meta):
    """Writes OUT.json ({"gpu", "torch", "commit", "command", "records"}),
    prints the count and returns the exit status."""
    import torch

    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "commit": os.environ.get("FLASHLIGHT_COMMIT", "unknown"),
              "command": f"scripts/{name}.py fill CACHE (build machine); "
                         f"scripts/{name}.py run CACHE OUT (GPU)",
              **meta, "records": records}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"{name}: {len(records) - failures}/{len(records)} pass")
    return 1 if failures else 0


def main(doc, fill, run):
    """`fill CACHE` or `run CACHE OUT.json`; else the usage (`doc`)."""
    if len(sys.argv) >= 3 and sys.argv[1] == "fill":
        fill(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(doc)
