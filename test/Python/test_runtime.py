"""Unit tests of the Python runtime and export that need no GPU (ctest
`python/unit`); the ones that need PyTorch skip without it."""

import importlib.util
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import flashlight  # noqa: E402
from flashlight import _choose_artifact  # noqa: E402

HAS_TORCH = importlib.util.find_spec("torch") is not None


class ChooseArtifact(unittest.TestCase):
    archs = {"sm_80": {"ptx": "k.sm_80.ptx", "cubin": "k.sm_80.cubin"},
             "sm_90a": {"ptx": "k.sm_90a.ptx", "cubin": "k.sm_90a.cubin"}}

    def test_own_arch_cubin(self):
        self.assertEqual(_choose_artifact(self.archs, 90), "k.sm_90a.cubin")
        self.assertEqual(_choose_artifact(self.archs, 80), "k.sm_80.cubin")

    def test_newer_gpus_jit_sm80_ptx(self):
        # sm_90a PTX (wgmma) cannot be JIT-compiled on a newer GPU.
        for cc in (89, 100, 120):
            self.assertEqual(_choose_artifact(self.archs, cc), "k.sm_80.ptx")

    def test_older_gpu_is_an_error(self):
        with self.assertRaises(RuntimeError):
            _choose_artifact(self.archs, 75)


@unittest.skipUnless(HAS_TORCH, "needs PyTorch")
class ExportAliasing(unittest.TestCase):
    def test_aliased_inputs_stay_distinct(self):
        import torch

        def attention(q, k, v):
            s = q @ k.transpose(-1, -2) * 0.125
            return torch.softmax(s, -1) @ v

        q = k = v = torch.zeros(1, 2, 16, 8)
        with tempfile.TemporaryDirectory() as tmp:
            graph = flashlight.export(attention, q, k, v,
                                      path=os.path.join(tmp, "a.json"))
        names = [i["name"] for i in graph["inputs"]]
        self.assertEqual(names, ["q", "k", "v"])
        refs = {a["ref"] for n in graph["nodes"] for a in n["args"]
                if isinstance(a, dict) and "ref" in a}
        # Every input is read: q and k by the product, v by the PV product.
        self.assertTrue({"q", "k", "v"} <= refs, refs)


if __name__ == "__main__":
    unittest.main()
