"""Unit tests of the Python runtime and export that need no GPU (ctest
`python/unit`); the ones that need PyTorch skip without it."""

import importlib.util
import json
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


def tiny_manifest():
    q = {"name": "q0", "direction": "in", "dtype": "bf16", "shape": [1, 2, 64, 64]}
    o = {"name": "out", "direction": "out", "dtype": "bf16", "shape": [1, 2, 64, 64]}
    return {"manifest_version": 1, "name": "tiny", "kernel": "tiny",
            "block_m": 64, "block": [128, 1, 1], "params": [q, o],
            "archs": {"sm_80": {"ptx": "tiny.sm_80.ptx"}}}


class ManifestChecks(unittest.TestCase):
    """A corrupt or edited manifest is a ManifestError naming the field,
    raised before PyTorch or the GPU is touched."""

    def load(self, manifest):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.json")
            with open(path, "w") as f:
                f.write(manifest if isinstance(manifest, str) else json.dumps(manifest))
            return flashlight.load(path)

    def expect(self, manifest, text):
        with self.assertRaises(flashlight.ManifestError) as ctx:
            self.load(manifest)
        self.assertIn(text, str(ctx.exception))

    def test_valid_manifest_passes_the_checks(self):
        flashlight._check_manifest(tiny_manifest(), "tiny.json")

    def test_zero_is_a_flag_of_outputs(self):
        # An output the kernel adds to (a key-side product) says "zero": true.
        m = tiny_manifest()
        m["params"][1]["zero"] = True
        flashlight._check_manifest(m, "m.json")
        m["params"][1]["zero"] = 1
        self.expect(m, "'zero' is true, on an output")
        m = tiny_manifest()
        m["params"][0]["zero"] = True
        self.expect(m, "(q0): 'zero' is true, on an output")

    def test_missing_params(self):
        m = tiny_manifest()
        del m["params"]
        self.expect(m, "'params' must be a list")

    def test_truncated_json_has_a_position(self):
        self.expect(json.dumps(tiny_manifest())[:40], "line 1 column")

    def test_block_m_zero(self):
        m = tiny_manifest()
        m["block_m"] = 0
        self.expect(m, "block_m 0 is not in [1, 1024]")

    def test_dynamic_dim(self):
        m = tiny_manifest()
        m["params"][0]["shape"] = [-1, 2, 64, 64]
        self.expect(m, "or -1 where 'extents' names the dim")
        m["params"][0]["extents"] = ["B", "", "", ""]
        self.expect(m, "runtime extents need a positive integer 'max_extent'")
        m["max_extent"] = 2**30 - 1
        flashlight._check_manifest(m, "m.json")  # named and bounded: accepted

    def test_extents_bind_and_disagree(self):
        class T:
            def __init__(self, *shape):
                self.shape = shape

        q = {"name": "q0", "shape": [-1, 2, -1, 64], "extents": ["B", "", "M", ""]}
        k = {"name": "k0", "shape": [-1, 2, -1, 64], "extents": ["B", "", "N", ""]}
        ids = {"name": "capture0", "shape": [-1, -1], "extents": ["B", "N"]}
        self.assertEqual(flashlight._bind_extents([q, k, ids], [T(3, 2, 100, 64), T(3, 2, 7, 64),
                                                                T(3, 7)]),
                         {"B": 3, "M": 100, "N": 7})
        self.assertEqual(flashlight._resolve(q, {"B": 3, "M": 5}), [3, 2, 5, 64])
        with self.assertRaisesRegex(ValueError, r"capture0: dim 1 is 8, but k0 dim 2 is 7: "
                                                r"both are extent N"):
            flashlight._bind_extents([q, k, ids], [T(3, 2, 100, 64), T(3, 2, 7, 64), T(3, 8)])
        with self.assertRaisesRegex(ValueError, r"k0: dim 2 is 9; this kernel takes extents up to 8"):
            flashlight._bind_extents([q, k], [T(3, 2, 5, 64), T(3, 2, 9, 64)], max_extent=8)
        with self.assertRaisesRegex(ValueError, r"k0: shape \(3, 4, 7, 64\), expected "
                                                r"\(B, 2, N, 64\)"):
            flashlight._bind_extents([q, k], [T(3, 2, 100, 64), T(3, 4, 7, 64)])

    def test_grid_limit(self):
        m = tiny_manifest()
        m["params"][0]["shape"] = [70000, 2, 64, 64]
        self.expect(m, "exceeds the launch grid")

    def test_unknown_dtype(self):
        m = tiny_manifest()
        m["params"][1]["dtype"] = "c64"
        self.expect(m, "unknown dtype 'c64'")

    def several(self):
        """Version 2: two attention kernels, the second with its own params."""
        m = tiny_manifest()
        second = {"kernel": "tiny_attention1", "params": [dict(p) for p in m["params"]],
                  "archs": m["archs"]}
        m.update(manifest_version=2, attentions=[
            {"kernel": "tiny", "params": m["params"], "archs": m["archs"]}, second])
        return m

    def test_several_attentions_pass_the_checks(self):
        flashlight._check_manifest(self.several(), "tiny.json")

    def test_version_2_needs_attentions(self):
        m = self.several()
        del m["attentions"]
        self.expect(m, "'attentions' (a non-empty list) goes with manifest_version 2")

    def test_attentions_need_version_2(self):
        m = self.several()
        m["manifest_version"] = 1
        self.expect(m, "goes with manifest_version 2")

    def test_each_attention_is_checked(self):
        m = self.several()
        m["attentions"][1]["params"][0]["shape"] = [1, 2, -64, 64]
        self.expect(m, "(attentions[1]): params[0] (q0): shape must be")


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


# An entry of copy steps only (HostToGPU's flashlight.copy, as the gradient
# program's [Q | dO] and its dK, dV slices): inputs a [2, 3, 4], b [2, 3, 2];
# c = concat(a, b, dim 2), then c[:, 1:3, 4:6] and c[:, :, 0:4]. Each kernel
# step names a kernel no runtime may launch: the copy must run natively.
COPY_ENTRY = {
    "inputs": [{"dtype": "f32", "shape": [2, 3, 4]}, {"dtype": "f32", "shape": [2, 3, 2]}],
    "values": [{"dtype": "f32", "shape": s} for s in
               ([2, 3, 4], [2, 3, 2], [2, 3, 6], [2, 3, 6], [2, 3, 6], [2, 2, 2], [2, 2, 2],
                [2, 3, 4], [2, 3, 4])],
    "steps": [
        {"op": "empty", "result": 2},
        {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1, "args": [2, 3, 0, 1],
         "results": [3], "copy": {"kind": "concat", "dim": 2, "sources": [0, 1]}},
        {"op": "empty", "result": 5},
        {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1, "args": [5, 6, 3],
         "results": [6], "copy": {"kind": "slice", "offsets": [0, 1, 4],
                                  "sizes": [2, 2, 2], "sources": [3]}},
        {"op": "empty", "result": 7},
        {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1, "args": [7, 8, 3],
         "results": [8], "copy": {"kind": "slice", "offsets": [0, 0, 0],
                                  "sizes": [2, 3, 4], "sources": [3]}},
    ],
    "results": [3, 6, 8],
}


@unittest.skipUnless(HAS_TORCH, "needs PyTorch")
class CopySteps(unittest.TestCase):
    """The torch runtime runs a kernel step marked `copy` or `fill` with
    torch's own ops (CPU tensors do), never its kernel."""

    def test_concat_and_slices(self):
        import torch

        class Stub:
            poison = False

            def _host_function(self, name):
                raise AssertionError(f"launched kernel {name} of a copy step")

        a, b = torch.randn(2, 3, 4), torch.randn(2, 3, 2)
        c, s, t = flashlight._run_steps(Stub(), COPY_ENTRY, [a, b])
        want = torch.cat([a, b], dim=2)
        self.assertTrue(torch.equal(c, want))
        self.assertTrue(torch.equal(s, want[:, 1:3, 4:6]))
        self.assertTrue(torch.equal(t, a))
        self.assertTrue(s.is_contiguous() and t.is_contiguous())

    def test_transpose(self):
        """A transpose (the gradient's key-major copy of a pair bias) is
        torch's permute, made contiguous."""
        import torch

        class Stub:
            poison = False

            def _host_function(self, name):
                raise AssertionError(f"launched kernel {name} of a copy step")

        entry = {
            "inputs": [{"dtype": "f32", "shape": [2, 3, 4]}],
            "values": [{"dtype": "f32", "shape": [2, 3, 4]}, {"dtype": "f32", "shape": [2, 4, 3]},
                       {"dtype": "f32", "shape": [2, 4, 3]}],
            "steps": [
                {"op": "empty", "result": 1},
                {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1, "args": [1, 2, 0],
                 "results": [2], "copy": {"kind": "transpose", "permutation": [0, 2, 1],
                                          "sources": [0]}}],
            "results": [2],
        }
        a = torch.randn(2, 3, 4)
        t = flashlight._run_steps(Stub(), entry, [a])
        t = t[0] if isinstance(t, (list, tuple)) else t
        self.assertTrue(torch.equal(t, a.transpose(1, 2)) and t.is_contiguous())

    def test_slices_no_step_reads_can_stay_views(self):
        """`views`: a slice that is only a result is a view of its source
        (the gradient program's dK and dV out of its dK/dV kernel's one
        output); a slice a later step reads is still made contiguous."""
        import torch

        class Stub:
            poison = False

        a, b = torch.randn(2, 3, 4), torch.randn(2, 3, 2)
        c, s, t = flashlight._run_steps(Stub(), COPY_ENTRY, [a, b], views=True)
        want = torch.cat([a, b], dim=2)
        self.assertTrue(torch.equal(s, want[:, 1:3, 4:6]) and torch.equal(t, a))
        for view in (s, t):
            self.assertEqual(view.untyped_storage().data_ptr(), c.untyped_storage().data_ptr())
        self.assertFalse(s.is_contiguous())
        read = dict(COPY_ENTRY, values=COPY_ENTRY["values"] + [COPY_ENTRY["values"][2]] * 2,
                    steps=COPY_ENTRY["steps"] + [
                        {"op": "empty", "result": 9},
                        {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1,
                         "args": [9, 10, 8, 1], "results": [10],
                         "copy": {"kind": "concat", "dim": 2, "sources": [8, 1]}}],
                    results=[6, 8, 10])
        s, t, _ = flashlight._run_steps(Stub(), read, [a, b], views=True)
        self.assertNotEqual(s.untyped_storage().data_ptr(), t.untyped_storage().data_ptr())
        self.assertTrue(t.is_contiguous() and torch.equal(t, a))

    def test_fills_and_contractions_into_zeros(self):
        import torch

        class Stub:
            poison = False

            def _host_function(self, name):
                raise AssertionError(f"launched kernel {name} of a fill step")

        # value 2 = fill 0 -> c = 2 + a b^T (no add of the zeros); value 5 =
        # fill 1.5 -> d = 5 + a b^T (the fill made where read).
        f32 = lambda *shape: {"dtype": "f32", "shape": list(shape)}  # noqa: E731
        entry = {
            "inputs": [f32(2, 3, 4), f32(2, 5, 4)],
            "values": [f32(2, 3, 4), f32(2, 5, 4), f32(2, 3, 5), f32(2, 3, 5), f32(2, 3, 5),
                       f32(2, 3, 5), f32(2, 3, 5), f32(2, 3, 5)],
            "steps": [
                {"op": "empty", "result": 2},
                {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1, "args": [2, 3],
                 "results": [3], "fill": 0.0},
                {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1,
                 "args": [0, 1, 3, 4], "results": [4], "einsum": "abc,adc->abd"},
                {"op": "empty", "result": 5},
                {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1, "args": [5, 6],
                 "results": [6], "fill": 1.5},
                {"op": "kernel", "kernel": "absent", "grid": 1, "block": 1,
                 "args": [0, 1, 6, 7], "results": [7], "einsum": "abc,adc->abd"},
            ],
            "results": [4, 7],
        }
        a, b = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
        c, d = flashlight._run_steps(Stub(), entry, [a, b])
        want = torch.einsum("abc,adc->abd", a, b)
        torch.testing.assert_close(c, want)
        torch.testing.assert_close(d, want + 1.5)


@unittest.skipUnless(HAS_TORCH, "needs PyTorch")
class RuntimeStrides(unittest.TestCase):
    """Which layouts a kernel with runtime strides takes as they are (the
    checks read strides only: CPU tensors do)."""

    def test_bnhd_storage_seen_as_bhnd(self):
        import torch

        q = torch.empty(2, 128, 4, 64, dtype=torch.bfloat16).transpose(1, 2)
        self.assertIsNone(flashlight._stride_problem(q, 16))

    def test_packed_qkv(self):
        import torch

        qkv = torch.empty(2, 128, 3, 4, 64, dtype=torch.bfloat16)
        k = qkv[:, :, 1].transpose(1, 2)
        self.assertIsNone(flashlight._stride_problem(k, 16))

    def test_innermost_dim_must_be_contiguous(self):
        import torch

        q = torch.empty(2, 4, 64, 128, dtype=torch.bfloat16).transpose(2, 3)
        self.assertIn("innermost dim must be contiguous",
                      flashlight._stride_problem(q, 16))

    def test_strides_must_keep_the_copies_aligned(self):
        import torch

        q = torch.empty(2, 4, 128, 68, dtype=torch.bfloat16)[..., :64]
        self.assertIn("not multiples of 8 elements", flashlight._stride_problem(q, 16))

    def test_outputs_must_not_overlap(self):
        import torch

        o = torch.empty(2, 1, 128, 64, dtype=torch.bfloat16).expand(2, 4, 128, 64)
        self.assertIsNone(flashlight._stride_problem(o, 16))  # fine to read
        self.assertIn("must not overlap", flashlight._stride_problem(o, 16, output=True))
        # A slice of a larger buffer (gaps) is fine to write.
        wide = torch.empty(2, 128, 8, 64, dtype=torch.bfloat16)[:, :, :4].transpose(1, 2)
        self.assertIsNone(flashlight._stride_problem(wide, 16, output=True))

    def call_entry(self, runtime_strides, result_index=None, out_shape=None):
        """call_entry of a BNHD program on a stand-in kernel that records
        what it is given."""
        import torch

        shape = [2, 4, 128, 64]
        perm = [{"dim": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        manifest = tiny_manifest()
        manifest["params"] = [{"name": n, "direction": d, "dtype": "bf16", "shape": shape}
                              for n, d in (("q0", "in"), ("k0", "in"), ("v", "in"),
                                           ("out", "out"))]
        manifest["archs"]["sm_80"]["runtime_strides"] = runtime_strides
        manifest["entry"] = {
            "function": "bnhd",
            "inputs": [{"dtype": "bf16", "shape": [2, 128, 4, 64]}] * 3,
            "outputs": [{"dtype": "bf16", "shape": out_shape or [2, 128, 4, 64]}],
            "sources": [{"input": i, "index": perm} for i in range(3)],
            "results": [{"result": 0, "index": result_index or perm}]}
        given = {}

        class StandIn:
            def __call__(self, *params, out=None):
                given["params"], given["out"] = params, out
                return tuple(out)

        kernel = StandIn()
        kernel.manifest = manifest
        kernel.geometry = flashlight._geometry(manifest, "tiny.sm_80.ptx")
        kernel.params = manifest["params"]
        kernel.inputs = kernel.params[:3]
        kernel.outputs = kernel.params[3:]
        args = [torch.zeros(2, 128, 4, 64, dtype=torch.bfloat16) for _ in range(3)]
        result = flashlight._call_entry(kernel, *args)
        return args, result, given

    def test_call_entry_passes_views_with_runtime_strides(self):
        args, result, given = self.call_entry(True)
        for a, p in zip(args, given["params"]):
            self.assertEqual(p.data_ptr(), a.data_ptr())  # the user's storage
            self.assertFalse(p.is_contiguous())
        # The kernel writes the user's [B, N, H, D] result through a view.
        self.assertEqual(given["out"][0].data_ptr(), result.data_ptr())
        self.assertTrue(result.is_contiguous())

    def test_call_entry_copies_for_static_strides(self):
        args, result, given = self.call_entry(False)
        for a, p in zip(args, given["params"]):
            self.assertNotEqual(p.data_ptr(), a.data_ptr())
            self.assertTrue(p.is_contiguous())

    def test_user_output_view_is_a_permutation(self):
        import torch

        user = torch.empty(2, 128, 4, 64)
        index = [{"dim": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        view = flashlight._user_output_view(user, index, [2, 4, 128, 64])
        self.assertEqual(view.data_ptr(), user.data_ptr())
        self.assertEqual(view.stride(), (128 * 256, 64, 256, 1))
        merged = torch.empty(2, 128, 256)
        self.assertIsNone(flashlight._user_output_view(merged, index[:3], [2, 4, 128, 64]))
        # A permutation that is not its own inverse: kernel dim k is user
        # dim index[k], so kernel [B, H, N, D] reads user [N, B, H, D].
        cycle = [{"dim": 1}, {"dim": 2}, {"dim": 0}, {"dim": 3}]
        user = torch.empty(128, 2, 4, 64)
        view = flashlight._user_output_view(user, cycle, [2, 4, 128, 64])
        self.assertEqual(tuple(view.shape), (2, 4, 128, 64))
        view[1, 3, 5, 7] = 1.0
        self.assertEqual(user[5, 1, 3, 7].item(), 1.0)

    def test_call_entry_copies_an_output_the_kernel_cannot_write(self):
        # The user's result is the kernel's transposed in its last two dims:
        # a view with a strided last dim, so a kernel output and a copy.
        args, result, given = self.call_entry(True, result_index=[
            {"dim": 0}, {"dim": 1}, {"dim": 3}, {"dim": 2}], out_shape=[2, 4, 64, 128])
        self.assertTrue(given["out"][0].is_contiguous())
        self.assertNotEqual(given["out"][0].data_ptr(), result.data_ptr())



class _StubLib:
    """The driver entry points `_launch` calls, recording each launch's
    parameter words and tensor-map addresses."""

    def __init__(self):
        self.launches = []

    def cuCtxGetCurrent(self, ref):
        ref._obj.value = 1
        return 0

    def cuTensorMapEncodeTiled(self, *args):
        return 0

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        import ctypes

        self.launches.append([ctypes.c_uint64.from_address(params[i]).value
                              for i in range(self.words)] +
                             [params[self.words + i] for i in range(self.maps)])
        return 0


@unittest.skipUnless(HAS_TORCH, "needs torch")
class LaunchPath(unittest.TestCase):
    """The launch path's reused buffers and memoized plans (no GPU: a stub
    driver)."""

    def setUp(self):
        self.saved = flashlight._driver, flashlight._current_stream
        self.lib = _StubLib()

        class Driver:
            lib = self.lib

            def check(self, result, what):
                if result:
                    raise RuntimeError(what)

        flashlight._driver = Driver()
        flashlight._current_stream = lambda device: 0

    def tearDown(self):
        flashlight._driver, flashlight._current_stream = self.saved

    def launch(self, tensors, maps=()):
        self.lib.words = sum(3 + 2 * t.dim() for t in tensors)
        self.lib.maps = len(maps)
        flashlight._launch(None, tensors, (1, 1, 1), (128, 1, 1), tensors[0].device, 0,
                           maps, [f"p{i}" for i in range(len(tensors))])
        return self.lib.launches[-1]

    def test_words_and_maps_follow_each_other_in_one_reused_table(self):
        import ctypes

        import torch

        q = torch.empty(2, 3, 8, 16, dtype=torch.bfloat16)
        v = torch.empty(2, 3, 16, 8, dtype=torch.bfloat16).transpose(2, 3)
        words = self.launch([q, v], [{"param": 1, "box": [8, 8]}])
        self.assertEqual(words[:11], [q.data_ptr(), q.data_ptr(), 0, 2, 3, 8, 16,
                                      384, 128, 16, 1])
        self.assertEqual(words[11:22], [v.data_ptr(), v.data_ptr(), 0, 2, 3, 8, 16,
                                        384, 128, 1, 8])
        key = (v.data_ptr(), tuple(v.shape), v.stride(), v.dtype, 8, 8, 128)
        self.assertEqual(words[22], ctypes.addressof(flashlight._tensor_maps[key]))
        # A longer launch after it reads its own words where the map's
        # address was: the table was restored.
        more = [torch.empty(4, 5, dtype=torch.float32) for _ in range(4)]
        words = self.launch(more)
        self.assertEqual(words[21:28], [more[3].data_ptr(), more[3].data_ptr(), 0, 4, 5, 5, 1])

    def test_static_shapes_bind_by_comparison(self):
        import torch

        info = [{"name": "q0", "shape": [2, 3, 8, 16]}]
        self.assertEqual(flashlight._bind_extents(info, [torch.empty(2, 3, 8, 16)]), {})
        with self.assertRaisesRegex(ValueError, r"q0: shape \(2, 3, 9, 16\), expected "
                                                r"\(2, 3, 8, 16\)"):
            flashlight._bind_extents(info, [torch.empty(2, 3, 9, 16)])

    def test_layout_plans_are_kept_per_index_and_rank(self):
        index = [{"dim": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        plan = flashlight._layout_plan(index, 4)
        self.assertIs(flashlight._layout_plan(index, 4), plan)
        self.assertEqual(plan, ([], (0, 2, 1, 3), []))
        self.assertEqual(flashlight._layout_plan(index, 5)[2], [4])
        # An equal index of another object gets its own (equal) plan.
        self.assertEqual(flashlight._layout_plan([dict(e) for e in index], 4), plan)

    def test_tile_counters_are_kept_per_device_and_stream(self):
        import torch

        saved = dict(flashlight._tile_counters)
        flashlight._tile_counters.clear()
        try:
            stream = [7]
            flashlight._current_stream = lambda device: stream[0]
            cpu = torch.device("cpu")
            first = flashlight._tile_counter(cpu)
            self.assertEqual((first.dtype, tuple(first.shape)), (torch.int32, (2,)))
            self.assertEqual(first.tolist(), [0, 0])
            # The launches of one stream run in order: they share one.
            self.assertIs(flashlight._tile_counter(cpu), first)
            # Another stream's may run at the same time: its own.
            stream[0] = 8
            self.assertIsNot(flashlight._tile_counter(cpu), first)
        finally:
            flashlight._tile_counters.clear()
            flashlight._tile_counters.update(saved)


if __name__ == "__main__":
    unittest.main()
