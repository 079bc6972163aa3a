"""set-q-shape.py IN OUT B H M D: a copy of manifest IN whose q0 has shape
[B, H, M, D] (tests of flashlight-run's manifest validation)."""
import json
import sys

manifest = json.load(open(sys.argv[1]))
for param in manifest["params"]:
    if param["name"] == "q0":
        param["shape"] = [int(x) for x in sys.argv[3:7]]
json.dump(manifest, open(sys.argv[2], "w"))
