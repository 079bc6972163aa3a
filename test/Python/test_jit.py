"""flashlight.jit without a GPU (ctest `python/jit`): export, compile and
the disk cache on CPU tensors, the fake implementation torch.compile traces
with, and the errors. Skips without PyTorch; the GPU calls (eager,
torch.compile, CUDA graphs) are scripts/jit_check.py."""

import importlib.util
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import flashlight  # noqa: E402

HAS_TORCH = importlib.util.find_spec("torch") is not None


def attention(q, k, v):
    import torch

    s = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    return torch.softmax(s, -1) @ v


def _stub_load(path):
    """A Kernel of the manifest at `path` that loads no module (tests
    replace its call_entry)."""
    import json

    kernel = flashlight.Kernel.__new__(flashlight.Kernel)
    with open(path) as f:
        kernel.manifest = json.load(f)
    kernel.directory = os.path.dirname(path)
    params = kernel.manifest["params"]
    kernel.inputs = [p for p in params if p["direction"] == "in"]
    kernel.outputs = [p for p in params if p["direction"] == "out"]
    return kernel


def _stand_in_entries(fn, arity):
    """A call_entry stand-in: the forward (training or not) is `fn` on the
    first `arity` arguments (a log-sum-exp of zeros where asked); the
    gradient program's result r is filled with r + 1, in the shape of the
    operand its `gradient_of` names."""
    import torch

    def call_entry(kernel, *args, views=False):
        entry = kernel.manifest["entry"]
        if entry["function"] == "gradient":
            return tuple(torch.full(args[i].shape, float(r + 1), dtype=args[i].dtype)
                         for r, i in enumerate(entry["gradient_of"]))
        out = fn(*args[:arity])
        return (out, torch.zeros(out.shape[:3])) if "lse_result" in entry else out
    return call_entry


@unittest.skipUnless(HAS_TORCH, "needs PyTorch")
class Jit(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.TemporaryDirectory()
        self.addCleanup(self.cache.cleanup)

    def inputs(self, n=128):
        import torch

        g = torch.Generator().manual_seed(0)
        return [torch.randn(2, 4, n, 64, generator=g).to(torch.bfloat16) for _ in range(3)]

    def test_a_miss_compiles_once_and_the_cache_serves_the_next(self):
        fn = flashlight.jit(attention, cache=self.cache.name)
        manifest = fn.prepare(*self.inputs())
        self.assertTrue(os.path.exists(manifest))
        self.assertEqual(fn.compiles, 1)
        self.assertEqual(fn.prepare(*self.inputs()), manifest)
        # Another function object (another process) finds it on disk.
        other = flashlight.jit(attention, cache=self.cache.name)
        self.assertEqual(other.prepare(*self.inputs()), manifest)
        self.assertEqual(other.compiles, 0)

    def test_without_a_compiler_the_latest_compiled_entry_serves(self):
        """A cache filled by two compilers and copied (mtimes not kept): a
        machine without the compiler takes the entry compiled last, by the
        time written into it."""
        import shutil
        import time
        from unittest import mock

        import flashlight._jit as jit

        fn = flashlight.jit(attention, cache=self.cache.name)
        first = os.path.dirname(fn.prepare(*self.inputs()))
        # A later compiler's entry for the same key, whose files a copy
        # left older than the first's.
        later = os.path.join(os.path.dirname(first), "0" * 64)
        shutil.copytree(first, later)
        with open(os.path.join(later, jit._COMPILED_AT), "w") as f:
            f.write(repr(time.time() + 60))
        os.utime(later, (time.time() - 3600,) * 2)
        with mock.patch.dict(os.environ, {"FLASHLIGHT_COMPILE": "/nonexistent"}):
            other = flashlight.jit(attention, cache=self.cache.name)
            self.assertEqual(os.path.dirname(other.prepare(*self.inputs())), later)

    def test_each_shape_class_has_its_kernel(self):
        fn = flashlight.jit(attention, cache=self.cache.name)
        a = fn.prepare(*self.inputs(128))
        b = fn.prepare(*self.inputs(256))
        self.assertNotEqual(a, b)
        self.assertEqual(fn.compiles, 2)

    def test_the_second_shape_class_gets_runtime_shapes(self):
        import json

        import torch

        def bnhd(q, k, v):  # the caller's [B, N, H, D] layout
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return o.transpose(1, 2)

        def x(b, n):
            return [torch.randn(b, n, 4, 64).to(torch.bfloat16) for _ in range(3)]

        fn = flashlight.jit(bnhd, cache=self.cache.name)
        first = fn.prepare(*x(2, 128))
        second = fn.prepare(*x(2, 192))
        self.assertNotEqual(first, second)
        with open(second) as f:
            m = json.load(f)
        self.assertEqual(m["params"][0]["extents"], ["", "", "M", ""])
        self.assertEqual(m["entry"]["inputs"][0]["shape"], [2, -1, 4, 64])
        # Another length: the same kernel, no export, no compile.
        self.assertEqual(fn.prepare(*x(2, 1000)), second)
        self.assertEqual(fn.compiles, 2)
        # Another batch differs where the two did not: a new pair.
        self.assertNotEqual(fn.prepare(*x(3, 1000)), second)
        self.assertEqual(fn.compiles, 3)
        # A batch of 1, which torch.export specializes: refused once, then
        # the next shape class pairs with the probe again.
        batch_one = flashlight.jit(bnhd, cache=self.cache.name)
        batch_one.prepare(*x(2, 128))
        batch_one.prepare(*x(1, 320))
        third = batch_one.prepare(*x(3, 256))
        with open(third) as f:
            self.assertEqual(json.load(f)["params"][0]["extents"], ["B", "", "M", ""])
        self.assertEqual(batch_one.prepare(*x(1, 64)), third)
        # Per shape class, on request.
        static = flashlight.jit(bnhd, cache=self.cache.name, runtime_shapes=False)
        for n in (128, 192, 256):
            static.prepare(*x(2, n))
        self.assertEqual(static.compiles, 2)  # 128 was cached
        with open(static.prepare(*x(2, 192))) as f:
            self.assertNotIn("extents", json.load(f)["params"][0])

    def test_a_program_that_depends_on_its_length_gets_one_kernel_per_shape(self):
        import torch

        def half_window(q, k, v):  # the window is half the length
            n = q.shape[2]
            i = torch.arange(n)
            s = (q @ k.transpose(-1, -2)).float()
            s = s.masked_fill((i[:, None] - i[None, :]).abs() > n // 2, float("-inf"))
            return torch.softmax(s, -1).to(v.dtype) @ v

        fn = flashlight.jit(half_window, cache=self.cache.name)
        manifests = {fn.prepare(*self.inputs(n)) for n in (128, 192, 256)}
        self.assertEqual(len(manifests), 3)
        self.assertEqual(fn.compiles, 3)

    def test_a_guard_on_the_length_keeps_kernels_per_shape(self):
        import torch

        def long_context(q, k, v):  # Qwen-style: scale queries past 4096 keys
            if q.shape[2] > 4096:
                q = q * 1.5
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

        fn = flashlight.jit(long_context, cache=self.cache.name)
        fn.prepare(*self.inputs(128))
        second = fn.prepare(*self.inputs(192))
        self.assertIn("bounded by a guard", fn.last_guard_problem)
        with open(second) as f:
            self.assertNotIn("extents", f.read())
        fn.prepare(*self.inputs(256))
        self.assertEqual(fn.compiles, 3)

    def test_tracing_compiles_and_gives_fake_outputs(self):
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        from flashlight._jit import _register_op

        fn = flashlight.jit(attention, cache=self.cache.name)
        op = _register_op()
        # The op's fake implementation, as torch.compile traces it: the
        # output shapes, and the shape class's kernel compiled then (from
        # zero CPU tensors, outside the fake mode), once.
        with FakeTensorMode() as mode:
            q, k, v = (mode.from_tensor(x) for x in self.inputs())
            (out,) = op(fn.key, [q, k, v])
            op(fn.key, [q, k, v])
            # Further shape classes, exported from inside the op: the
            # second compiles a kernel with runtime shapes, which the
            # third takes.
            for n in (64, 192):
                op(fn.key, [mode.from_tensor(x) for x in self.inputs(n)])
        self.assertEqual(tuple(out.shape), (2, 4, 128, 64))
        self.assertEqual(out.dtype, torch.bfloat16)
        self.assertEqual(fn.compiles, 2)
        self.assertEqual(fn.prepare(*self.inputs()), fn._manifests[fn.shape_class(self.inputs())])

    def test_varlen_is_one_kernel_with_a_block_mask(self):
        import json

        import torch

        g = torch.Generator().manual_seed(0)
        q = torch.randn(300, 8, 64, generator=g).to(torch.bfloat16)
        k = torch.randn(300, 2, 64, generator=g).to(torch.bfloat16)
        cu = torch.tensor([0, 100, 180, 300], dtype=torch.int32)
        os.environ["FLASHLIGHT_CACHE"] = self.cache.name
        try:
            out = flashlight.varlen_attention(q, k, k, cu)  # compiles, runs as PyTorch
        finally:
            del os.environ["FLASHLIGHT_CACHE"]
        self.assertEqual(tuple(out.shape), (300, 8, 64))
        manifests = [os.path.join(d, f) for d, _, files in os.walk(self.cache.name)
                     for f in files if f == "program.json"]
        self.assertEqual(len(manifests), 1)
        with open(manifests[0]) as f:
            m = json.load(f)
        self.assertEqual({a["codegen"] for a in m["archs"].values()}, {"mma.sync", "wgmma"})
        self.assertIsNotNone(m["block_mask"])  # the tiles between sequences are skipped
        self.assertNotIn("steps", m["entry"])  # only layouts around the kernel
        self.assertEqual(m["params"][1]["shape"], [1, 2, 300, 64])  # GQA, not repeated

    def test_inputs_that_require_grad_compile_the_gradient_program(self):
        import json

        q, k, v = self.inputs()
        q.requires_grad_(True)
        fn = flashlight.jit(attention, cache=self.cache.name)
        fn(q, k, v).float().sum().backward()  # on the CPU: PyTorch's own
        self.assertIsNotNone(q.grad)
        manifests = sorted(os.path.join(d, f) for d, _, files in os.walk(self.cache.name)
                           for f in files if f == "program.json")
        # On the CPU, for a GPU machine's eager and torch.compile calls: the
        # training forward (it also returns the log-sum-exp) and the
        # gradient program taking it and the output after dO; the forward
        # and the gradient program that computes it again.
        self.assertEqual(len(manifests), 4)
        entries = []
        for path in manifests:
            with open(path) as f:
                entry = json.load(f)["entry"]
            entries.append((entry["function"] == "gradient", len(entry["inputs"]),
                            entry.get("lse_result")))
        self.assertEqual(sorted(entries, key=str),
                         sorted([(False, 3, 1), (True, 3 + 1 + 2, None), (False, 3, None),
                                 (True, 3 + 1, None)], key=str))

    def test_backward_maps_the_gradient_program_through_the_layouts(self):
        """The custom op's backward on the CPU, with the kernels replaced
        by stand-ins (the forward: the function itself; the gradient
        program: dQ = 1, dK = 2, dV = 3 in the kernel's layout): one tensor
        read as q, k and v gets their sum in its own layout; a GQA caller's
        K and V gradients keep their head count."""
        from unittest import mock

        import torch

        import flashlight._jit as jit

        def self_bnhd(x):  # [B, N, H, D] in and out
            y = x.transpose(1, 2)
            return (torch.softmax(y @ y.transpose(-1, -2) * 0.125, -1) @ y).transpose(1, 2)

        def gqa(q, k, v):
            k, v = (t.repeat_interleave(2, dim=1) for t in (k, v))
            return torch.softmax(q @ k.transpose(-1, -2) * 0.125, -1) @ v

        def call_entry(kernel, *args, views=False):
            if kernel.manifest["entry"]["function"] == "gradient":
                return tuple(torch.full(a.shape, float(i + 1), dtype=a.dtype)
                             for i, a in enumerate(args[:3]))
            return current(*args)

        g = torch.Generator().manual_seed(0)
        x = torch.randn(2, 128, 4, 64, generator=g).to(torch.bfloat16).requires_grad_()
        q = torch.randn(2, 4, 128, 64, generator=g).to(torch.bfloat16).requires_grad_()
        kv = [torch.randn(2, 2, 128, 64, generator=g).to(torch.bfloat16).requires_grad_()
              for _ in range(2)]
        with mock.patch.object(flashlight, "load", _stub_load), \
                mock.patch.object(flashlight.Kernel, "call_entry", call_entry):
            for current, args in ((self_bnhd, [x]), (gqa, [q, *kv])):
                fn = flashlight.jit(current, cache=self.cache.name)
                fn(*args)  # on the CPU: compiles both programs
                out = jit._register_op()(fn.key, list(args))[0]
                out.float().sum().backward()
        self.assertTrue(torch.equal(x.grad, torch.full_like(x, 6.0)))
        self.assertTrue(torch.equal(q.grad, torch.full_like(q, 1.0)))
        self.assertTrue(torch.equal(kv[0].grad, torch.full_like(kv[0], 2.0)))
        self.assertTrue(torch.equal(kv[1].grad, torch.full_like(kv[1], 3.0)))

    def test_permuted_layouts_skip_torch_func_with_the_same_gradients(self):
        """The backward of permuted layouts (BNHD self-attention, also with a
        batch of 1; a BHND query, NBHD keys, BNHD values) takes the inverse
        views directly, never torch.func; with stand-in gradients that
        differ per element (dQ, dK, dV: ramps in the kernel's layout, plus
        dO) it gives what the vector-Jacobian products of torch.func give."""
        from unittest import mock

        import torch

        import flashlight._jit as jit

        def self_bnhd(x):
            y = x.transpose(1, 2)
            return (torch.softmax(y @ y.transpose(-1, -2) * 0.125, -1) @ y).transpose(1, 2)

        def mixed(q, k, v):  # q [B, H, N, D]; k [N, B, H, D]; v [B, N, H, D]
            return attention(q, k.permute(1, 2, 0, 3), v.transpose(1, 2)).transpose(1, 2)

        def call_entry(kernel, *args, views=False):
            if kernel.manifest["entry"]["function"] == "gradient":
                dout = args[3].float()
                return tuple((torch.arange(a.numel()).reshape(a.shape) * (i + 1) % 251
                              + dout).to(a.dtype) for i, a in enumerate(args[:3]))
            return current(*args)

        g = torch.Generator().manual_seed(0)
        cases = ((self_bnhd, [torch.randn(2, 128, 4, 64, generator=g)]),
                 (self_bnhd, [torch.randn(1, 128, 4, 64, generator=g)]),
                 (mixed, [torch.randn(2, 4, 128, 64, generator=g),
                          torch.randn(128, 2, 4, 64, generator=g),
                          torch.randn(2, 128, 4, 64, generator=g)]))
        for current, inputs in cases:
            got = []
            for fast in (True, False):
                args = [x.to(torch.bfloat16).requires_grad_() for x in inputs]
                layout = jit._UnitLayout.of if fast else (lambda *a: None)

                def no_vjp(*a, **k):
                    raise AssertionError("the direct path called torch.func.vjp")
                vjp = no_vjp if fast else torch.func.vjp
                with mock.patch.object(flashlight, "load", _stub_load), \
                        mock.patch.object(flashlight.Kernel, "call_entry", call_entry), \
                        mock.patch.object(jit._UnitLayout, "of", layout), \
                        mock.patch.object(torch.func, "vjp", vjp):
                    fn = flashlight.jit(current, cache=self.cache.name)
                    fn(*args)
                    out = jit._register_op()(fn.key, list(args))[0]
                    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
                    out.backward(dout.to(out.dtype))
                got.append([a.grad for a in args])
            for a, b in zip(*got):
                # Equal up to bf16 rounding: a tensor read as q, k and v
                # sums its gradients in f32 on the direct path.
                torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=1.0)
                self.assertGreater(a.float().std().item(), 1.0)

    def test_a_training_call_keeps_the_output_and_log_sum_exp(self):
        """The training op on the CPU with stand-in kernels (the forward:
        the function and a log-sum-exp of 7; the gradient program: dQ = 1,
        dK = 2, dV = 3, checking what it is given): the gradient program
        gets dO, the output in the kernel's layout and the log-sum-exp."""
        from unittest import mock

        import torch

        import flashlight._jit as jit

        def bnhd(q, k, v):  # [B, N, H, D] in and out
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            return attention(q, k, v).transpose(1, 2)

        seen = {}

        def call_entry(kernel, *args, views=False):
            if kernel.manifest["entry"]["function"] == "gradient":
                seen["args"], seen["views"] = args, views
                return tuple(torch.full(a.shape, float(i + 1), dtype=a.dtype)
                             for i, a in enumerate(args[:3]))
            out = bnhd(*args)
            return out, torch.full(out.transpose(1, 2).shape[:3], 7.0)

        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 128, 4, 64, generator=g).to(torch.bfloat16).requires_grad_()
                   for _ in range(3))
        dout = torch.randn(2, 128, 4, 64, generator=g).to(torch.bfloat16)
        with mock.patch.object(flashlight, "load", _stub_load), \
                mock.patch.object(flashlight.Kernel, "call_entry", call_entry):
            fn = flashlight.jit(bnhd, cache=self.cache.name)
            fn(q, k, v)  # on the CPU: compiles the training programs
            self.assertIsNotNone(fn._training[fn.shape_class([q, k, v])])
            jit._register_op()
            out = jit._ops["train"](fn.key, [q, k, v])[0]
            out.backward(dout)
        *operands, d, o, lse = seen["args"]
        self.assertTrue(torch.equal(d, dout.transpose(1, 2)))
        self.assertTrue(torch.equal(o, out.detach().transpose(1, 2)))
        self.assertTrue(torch.equal(lse, torch.full((2, 4, 128), 7.0)))
        self.assertTrue(torch.equal(q.grad, torch.full_like(q, 1.0)))
        self.assertTrue(torch.equal(v.grad, torch.full_like(v, 3.0)))
        # Eager: the gradient program called directly, dK and dV as views;
        # differentiated again (create_graph): through the op, no views.
        self.assertTrue(seen["views"])
        # The eager training call (a torch.autograd.Function instead of the
        # op's autograd wrapper) keeps and passes the same.
        args = [t.detach().requires_grad_() for t in (q, k, v)]
        seen.clear()
        with mock.patch.object(flashlight, "load", _stub_load), \
                mock.patch.object(flashlight.Kernel, "call_entry", call_entry):
            eager, lse = jit._eager_training().apply(fn.key, *args)
            self.assertFalse(lse.requires_grad)
            eager.backward(dout)
        *_, d, o, lse = seen["args"]
        self.assertTrue(torch.equal(d, dout.transpose(1, 2)) and seen["views"])
        self.assertTrue(torch.equal(o, eager.detach().transpose(1, 2)))
        self.assertTrue(torch.equal(lse, torch.full((2, 4, 128), 7.0)))
        for a, want in zip(args, (1.0, 2.0, 3.0)):
            self.assertTrue(torch.equal(a.grad, torch.full_like(a, want)))
        with mock.patch.object(flashlight, "load", _stub_load), \
                mock.patch.object(flashlight.Kernel, "call_entry", call_entry):
            out = jit._ops["train"](fn.key, [q, k, v])[0]
            torch.autograd.grad(out, [q, k, v], dout, create_graph=True)
        # (Through the op too: its sliced results leave as the kernel output
        # they slice, test_sliced_gradients_leave_the_op_whole.)
        self.assertTrue(seen["views"])

    def test_sliced_gradients_leave_the_op_whole(self):
        """flashlight::jit_grad's outputs may not alias each other: dK and
        dV, slices of the one dK/dV kernel's output, leave the op as that
        output (once) and are sliced after it, so that a traced backward
        holds views, not copies (stand-in kernels: the gradient program's
        values filled with their value numbers, the [dK | dV] output with
        its column index)."""
        from unittest import mock

        import torch

        import flashlight._jit as jit

        seen = {}

        def call_entry(kernel, *args, views=False):
            entry = kernel.manifest["entry"]
            if entry["function"] != "gradient":
                out = attention(*args[:3])
                return (out, torch.zeros(out.shape[:3])) if "lse_result" in entry else out
            viewed = flashlight._slice_views(entry)
            seen["viewed"] = viewed
            results = []
            for r, i in zip(entry["results"], entry["gradient_of"]):
                if r not in viewed:
                    results.append(torch.full(args[i].shape, float(r), dtype=args[i].dtype))
                    continue
                source = entry["values"][viewed[r]["sources"][0]]
                base = seen.setdefault("base", torch.arange(
                    source["shape"][-1], dtype=args[i].dtype).expand(source["shape"]).clone())
                results.append(flashlight._copy(viewed[r], [base], view=views))
            return tuple(results)

        q, k, v = (t.requires_grad_() for t in self.inputs())
        dout = torch.ones_like(q)
        with mock.patch.object(flashlight, "load", _stub_load), \
                mock.patch.object(flashlight.Kernel, "call_entry", call_entry):
            fn = flashlight.jit(attention, cache=self.cache.name,
                                flags=("--fuse-key-value-from=0",))
            fn(q, k, v)  # on the CPU: compiles the programs (dK, dV fused)
            jit._register_op()
            out = jit._ops["train"](fn.key, [q, k, v])[0]
            # Differentiated again: the backward calls the op.
            dq, dk, dv = torch.autograd.grad(out, [q, k, v], dout, create_graph=True)
        self.assertEqual(len(seen["viewed"]), 2)
        self.assertTrue(torch.equal(dk[0, 0, 0], torch.arange(64.0).to(dk.dtype)))
        self.assertTrue(torch.equal(dv[0, 0, 0], torch.arange(64.0, 128.0).to(dv.dtype)))
        self.assertFalse(torch.equal(dq, dk))
        # The op returned dQ and the [dK | dV] output; the two gradients
        # are views of that one output.
        self.assertEqual(dk.untyped_storage().data_ptr(), dv.untyped_storage().data_ptr())
        self.assertNotEqual(dq.untyped_storage().data_ptr(), dk.untyped_storage().data_ptr())
        # The op's fake (torch.compile's trace) gives the same outputs'
        # shapes and types.
        operands = [t.detach() for t in (q, k, v)]
        split = fn._gradient_split(operands, dout, [out.detach(), torch.zeros(2, 4, 128)])
        fake = split.fake(operands, [0, 1, 2])
        self.assertEqual([tuple(t.shape) for t in fake], [(2, 4, 128, 64), (2, 4, 128, 128)])

    def test_gradient_split_never_returns_aliases(self):
        """`_GradientSplit.outputs`: a slice of an input (which the
        program returns as a view of that input) and a value returned twice
        leave as copies; a slice that is not a view of a whole kernel
        output fills a new one, so the re-sliced result is the same."""
        import torch

        import flashlight._jit as jit

        copy = lambda source, offset: {  # noqa: E731
            "kind": "slice", "sources": [source], "offsets": [0, offset], "sizes": [2, 2]}
        entry = {"inputs": [{}], "values": [{"shape": [2, 4]}, {"shape": [2, 4]},
                                             {"shape": [2, 2]}, {"shape": [2, 2]},
                                             {"shape": [2, 2]}],
                 "steps": [{"op": "kernel", "kernel": 0, "args": [0, 1], "results": [1]},
                           {"op": "kernel", "results": [2], "copy": copy(1, 0)},
                           {"op": "kernel", "results": [3], "copy": copy(1, 2)},
                           {"op": "kernel", "results": [4], "copy": copy(0, 2)}],
                 "results": [4, 2, 3]}
        split = jit._GradientSplit(entry)
        self.assertEqual(split.sources, [1])
        x = torch.arange(8.0).reshape(2, 4).clone()
        kernel_out = torch.arange(10.0, 18.0).reshape(2, 4).clone()
        for views, whole in (((True, True), True), ((True, False), True),
                             ((False, False), False)):
            # (The slices as views of the output or copies; the first
            # slice's view decides whether the output leaves whole.)
            found = [x[:, 2:]] + [kernel_out[:, 2 * i:2 * i + 2] if view
                                  else kernel_out[:, 2 * i:2 * i + 2].clone()
                                  for i, view in enumerate(views)]
            outs = split.outputs(found, [x])
            self.assertEqual(len(outs), 2)
            self.assertNotEqual(outs[0].untyped_storage().data_ptr(),
                                x.untyped_storage().data_ptr())
            self.assertEqual(outs[1] is kernel_out, whole)
            for got, want in zip(split.results(outs), found):
                self.assertTrue(torch.equal(got, want))
        # A slice of a view (a reshape): its `_base` is no whole output.
        reshaped = torch.arange(10.0, 18.0).reshape(2, 4)
        outs = split.outputs([x[:, 2:], reshaped[:, :2], reshaped[:, 2:]], [x])
        self.assertIsNot(outs[1], reshaped)
        self.assertTrue(torch.equal(outs[1], reshaped))

    def test_a_backward_through_projections_is_refused_at_the_call(self):
        import torch

        def projected(q, k, v, w):
            return attention(q, k, v) @ w

        q, k, v = self.inputs()
        w = torch.randn(64, 64).to(torch.bfloat16)
        fn = flashlight.jit(projected, cache=self.cache.name)
        with self.assertRaisesRegex(NotImplementedError, "decorate the attention alone"):
            fn(q, k, v, w.requires_grad_())

    def test_a_learned_pair_bias_gets_its_gradient(self):
        """A bias the score reads at its own indices that requires grad
        switches the function to gradient programs that differentiate it
        (`--score-capture-gradients`); its gradient comes back in its own
        shape (broadcast over the batch: [1, H, N, N]). The kernels are
        stand-ins (the gradient program: result r filled with r + 1; dQ, dK, dV, the
        bias)."""
        from unittest import mock

        import torch

        def biased(q, k, v, bias):
            return torch.softmax(q @ k.transpose(-1, -2) * 0.125 + bias, -1) @ v

        call_entry = _stand_in_entries(biased, 4)

        q, k, v = self.inputs()
        bias = torch.randn(1, 4, 128, 128).to(torch.bfloat16).requires_grad_()
        import flashlight._jit as jit

        args = [q.requires_grad_(), k, v, bias]
        with mock.patch.object(flashlight, "load", _stub_load), \
                mock.patch.object(flashlight.Kernel, "call_entry", call_entry):
            fn = flashlight.jit(biased, cache=self.cache.name)
            with self.assertWarnsRegex(UserWarning, "S and dP materialized"):
                fn(*args)  # on the CPU: compiles the programs
            self.assertEqual(fn._score_capture_classes, {fn.shape_class(args)})
            out = jit._register_op()(fn.key, args)[0]
            out.float().sum().backward()
        self.assertEqual(bias.grad.shape, bias.shape)
        self.assertTrue(torch.equal(bias.grad, torch.full_like(bias, 4.0)))
        self.assertTrue(torch.equal(q.grad, torch.full_like(q, 1.0)))

    @unittest.skipUnless(importlib.util.find_spec("numpy"), "exporting a constant needs NumPy")
    def test_a_captured_constant_with_a_gradient_leaves_the_fast_path(self):
        """A closure's tensor the epilogue reads (a constant of the program:
        the gradient program derives its gradient, but no argument takes
        it) sends the backward to torch.func; the arguments' gradients come
        back (stand-in kernels: result r filled with r + 1)."""
        from unittest import mock

        import torch

        import flashlight._jit as jit

        gate = torch.randn(2, 4, 128, 64).to(torch.bfloat16)

        def gated(q, k, v):
            return attention(q, k, v) * torch.sigmoid(gate)

        call_entry = _stand_in_entries(gated, 3)

        q, k, v = (x.requires_grad_() for x in self.inputs())
        with mock.patch.object(flashlight, "load", _stub_load), \
                mock.patch.object(flashlight.Kernel, "call_entry", call_entry):
            fn = flashlight.jit(gated, cache=self.cache.name)
            fn(q, k, v)  # on the CPU: compiles the programs
            gradient = fn._prepare_gradient_examples([q, k, v])
            self.assertEqual(len(fn._json(gradient)["entry"]["gradient_of"]), 4)
            out = jit._register_op()(fn.key, [q, k, v])[0]
            out.float().sum().backward()
        self.assertTrue(torch.equal(q.grad, torch.full_like(q, 1.0)))
        self.assertTrue(torch.equal(v.grad, torch.full_like(v, 3.0)))

    def test_a_bias_read_twice_is_refused(self):
        import torch

        def symmetric(q, k, v, bias):
            s = q @ k.transpose(-1, -2) * 0.125 + bias + bias.transpose(-1, -2)
            return torch.softmax(s, -1) @ v

        q, k, v = self.inputs()
        bias = torch.randn(1, 4, 128, 128).to(torch.bfloat16).requires_grad_()
        fn = flashlight.jit(symmetric, cache=self.cache.name)
        with self.assertRaisesRegex(NotImplementedError, "not those it reads twice"):
            fn(q, k, v, bias)
        # The shape class keeps its programs: detached, the bias is an
        # input and the call goes through.
        self.assertEqual(fn._score_capture_classes, set())
        fn(q.requires_grad_(), k, v, bias.detach())

    def test_a_gradient_it_cannot_derive_fails_at_the_call(self):
        import torch

        def padded(q, k, v, keep):  # a finite fill: empty rows take the mean of V
            bias = torch.where(keep[:, None, None, :], 0.0, torch.finfo(torch.float32).min)
            s = (q @ k.transpose(-1, -2) * 0.125).float() + bias
            return torch.softmax(s, -1).to(v.dtype) @ v

        q, k, v = self.inputs()
        keep = torch.ones(2, 128, dtype=torch.bool)
        fn = flashlight.jit(padded, cache=self.cache.name)
        with self.assertRaisesRegex(flashlight.CompileError, "take the mean of V"):
            fn(q, k, v.requires_grad_(True), keep)

    def test_a_compiler_error_names_the_op(self):
        import torch

        def bessel(q, k, v):
            return torch.special.bessel_j0(q.float())

        fn = flashlight.jit(bessel, cache=self.cache.name)
        with self.assertRaisesRegex(flashlight.CompileError,
                                    "node 'special_bessel_j0': ATen op"):
            fn.prepare(*self.inputs())
        # Nothing half-written is left in the cache: the refusal alone (and
        # when it was made), which a machine without the compiler reads as
        # the same error.
        leftovers = [f for _, _, files in os.walk(self.cache.name) for f in files]
        self.assertEqual(sorted(leftovers), ["compiled_at.txt", "refused.txt"])
        from unittest import mock

        with mock.patch.dict(os.environ, {"FLASHLIGHT_COMPILE": "/nonexistent"}):
            with self.assertRaisesRegex(flashlight.CompileError,
                                        "node 'special_bessel_j0': ATen op"):
                flashlight.jit(bessel, cache=self.cache.name).prepare(*self.inputs())

    def test_no_compiler_and_no_cache_entry(self):
        fn = flashlight.jit(attention, cache=self.cache.name)
        saved = os.environ.get("FLASHLIGHT_COMPILE")
        os.environ["FLASHLIGHT_COMPILE"] = os.path.join(self.cache.name, "absent")
        try:
            with self.assertRaisesRegex(flashlight.CompileError, "fill the cache"):
                fn.prepare(*self.inputs())
        finally:
            if saved is None:
                del os.environ["FLASHLIGHT_COMPILE"]
            else:
                os.environ["FLASHLIGHT_COMPILE"] = saved


@unittest.skipUnless(HAS_TORCH, "needs PyTorch")
class UnitLayouts(unittest.TestCase):
    """The backward's direct path inverts a layout that permutes and drops
    or adds unit dims; anything else (a slice of a longer dim, a broadcast)
    is left to torch.func."""

    def test_permutation_with_a_dropped_batch_of_1(self):
        import torch

        import flashlight._jit as jit
        from flashlight import _to_kernel_layout

        # A [1, N, H, D] caller tensor as the kernel's [1, H, N, D] operand
        # through the export's squeezed batch (fixed at 0, inserted again).
        index = [{"const": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        x = torch.randn(1, 8, 3, 4)
        layout = jit._UnitLayout.of(index, x.shape, (1, 3, 8, 4))
        self.assertIsNotNone(layout)
        y = _to_kernel_layout(x, index, (1, 3, 8, 4))
        g = torch.randn(y.shape)
        _, vjp = torch.func.vjp(lambda t: _to_kernel_layout(t, index, (1, 3, 8, 4)), x)
        self.assertTrue(torch.equal(layout.pull(g), vjp(g)[0]))

    def test_slices_and_broadcasts_are_not_unit_layouts(self):
        import flashlight._jit as jit

        index = [{"const": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        # Fixing a dim of 2 elements reads half the tensor.
        self.assertIsNone(jit._UnitLayout.of(index, (2, 8, 3, 4), (1, 3, 8, 4)))
        # An inserted dim of 2 broadcasts.
        self.assertIsNone(jit._UnitLayout.of(index, (1, 8, 3, 4), (2, 3, 8, 4)))
        # Shapes that the permutation does not give.
        self.assertIsNone(jit._UnitLayout.of([{"dim": 1}, {"dim": 0}], (3, 4), (3, 4)))


if __name__ == "__main__":
    unittest.main()
