#!/usr/bin/env python3
"""Redraws a benchmark's PNG from its JSON: bench/plot.py <results.json>."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from bench import plot  # noqa: E402

if __name__ == "__main__":
    path = sys.argv[1]
    plot(json.load(open(path))["records"], os.path.splitext(path)[0] + ".png")
