#!/usr/bin/env python3
"""Regenerates the corpus programs whose libraries are importable here and
compares them with the committed ones (they are generated, never edited):

    python3 scripts/corpus/regenerate.py [jax|torch ...]

A program is regenerated when its library (index.json's `library`, the
import name below) and the exporting framework import; the others are
listed as skipped. Exits 1 on any difference, 77 when nothing could be
regenerated (no JAX / PyTorch here), 0 otherwise. CI runs it with the
pinned JAX that scripts/install-deps.sh installs (jax.nn programs); with
flax, equinox, haiku or torch + transformers installed it covers more.
"""

import filecmp
import importlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPORA = {
    "jax": ("jax", "jax_corpus.py", ".stablehlo.mlir"),
    "torch": ("torch", "torch_corpus.py", ".json"),
}
# The module that must import for a program of each library.
MODULES = {
    "jax": "jax", "flax": "flax", "flax.nnx": "flax", "equinox": "equinox",
    "dm-haiku": "haiku", "gemma": "gemma", "recurrentgemma": "recurrentgemma",
    "alphafold-colabfold": "alphafold", "transformers": "transformers",
    "attn-gym": "attn_gym",
}


def importable(module):
    try:
        importlib.import_module(module)
        return True
    except Exception:
        return False


def main():
    corpora = sys.argv[1:] or list(CORPORA)
    regenerated = differ = 0
    for corpus in corpora:
        framework, script, suffix = CORPORA[corpus]
        folder = os.path.join(ROOT, "test", "Corpus", corpus)
        with open(os.path.join(folder, "index.json")) as f:
            index = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
        if not importable(framework):
            print(f"regenerate: {corpus}: {framework} is not installed, skipped")
            continue
        names = []
        for name, info in sorted(index.items()):
            library = info.get("library", corpus)
            module = MODULES.get(library, library.replace("-", "_"))
            if importable(module):
                names.append(name)
            else:
                print(f"regenerate: {corpus}/{name}: {library} is not installed, skipped")
        if not names:
            continue
        with tempfile.TemporaryDirectory() as out:
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "corpus", script),
                            out] + names, check=True, stdout=subprocess.DEVNULL)
            for name in names:
                regenerated += 1
                ours = os.path.join(folder, name + suffix)
                if not filecmp.cmp(ours, os.path.join(out, name + suffix), shallow=False):
                    differ += 1
                    print(f"regenerate: {corpus}/{name}: differs from the committed program")
    print(f"regenerate: {regenerated} programs regenerated, {differ} differ")
    if regenerated == 0:
        return 77
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
