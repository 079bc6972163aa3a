"""flashlight.jax without a GPU (ctest `python/jax`): lowering, the compile
cache, the layouts around the kernel, and a program with reference-path
steps lowered to XLA ops and custom calls. Skips without JAX; the GPU calls
are scripts/jax_ffi_check.py."""

import importlib.util
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

HAS_JAX = importlib.util.find_spec("jax") is not None


@unittest.skipUnless(HAS_JAX, "needs JAX")
class JaxJit(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.TemporaryDirectory()
        self.addCleanup(self.cache.cleanup)

    def test_lowered_compiled_once_and_cached(self):
        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj

        def attention(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                implementation="xla")

        spec = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
        fn = fj.jit(attention, cache=self.cache.name)
        manifest = fn.prepare(spec, spec, spec)
        self.assertEqual(fn.compiles, 1)
        other = fj.jit(attention, cache=self.cache.name)
        self.assertEqual(other.prepare(spec, spec, spec), manifest)
        self.assertEqual(other.compiles, 0)

    def test_the_second_shape_class_gets_runtime_shapes(self):
        import json

        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj

        def attention(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                implementation="xla")

        def spec(b, n):
            return [jax.ShapeDtypeStruct((b, n, 4, 64), jnp.bfloat16)] * 3

        fn = fj.jit(attention, cache=self.cache.name, runtime_shapes=True)
        first = fn.prepare(*spec(2, 128))
        second = fn.prepare(*spec(2, 192))
        self.assertNotEqual(first, second)
        with open(second) as f:
            m = json.load(f)
        self.assertEqual(m["entry"]["inputs"][0]["extents"], ["", "M", "", ""])
        self.assertIn("aligned", m["archs"]["sm_90a"])
        self.assertEqual(fn.prepare(*spec(2, 1000)), second)  # no lowering
        self.assertEqual(fn.compiles, 2)

    def test_layouts_round_trip(self):
        import numpy as np

        from flashlight.jax import _to_kernel_layout, _to_user_layout

        x = np.arange(2 * 128 * 4 * 64, dtype=np.float32).reshape(2, 128, 4, 64)
        index = [{"dim": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        kernel = _to_kernel_layout(x, index, [2, 4, 128, 64])
        np.testing.assert_array_equal(np.asarray(kernel), x.transpose(0, 2, 1, 3))
        back = _to_user_layout(kernel, index, [2, 128, 4, 64])
        np.testing.assert_array_equal(np.asarray(back), x)
        # Not its own inverse: user dim p is kernel dim cycle[p], so user
        # [N, B, H, D] is kernel [B, H, N, D].
        y = np.arange(128 * 2 * 4 * 64, dtype=np.float32).reshape(128, 2, 4, 64)
        cycle = [{"dim": 2}, {"dim": 0}, {"dim": 1}, {"dim": 3}]
        kernel = _to_kernel_layout(y, cycle, [2, 4, 128, 64])
        np.testing.assert_array_equal(np.asarray(kernel), y.transpose(1, 2, 0, 3))
        # A constant (a unit head dim read at 0) and a broadcast kernel dim.
        z = x[:, :, :1]  # [B, N, 1, D]
        fixed = [{"dim": 0}, {"dim": 2}, {"const": 0}, {"dim": 3}]
        kernel = _to_kernel_layout(z, fixed, [2, 4, 128, 64])
        np.testing.assert_array_equal(np.asarray(kernel)[:, 3], x[:, :, 0])

    def test_permuted_arrays_reach_the_kernel_in_place(self):
        """[B, N, H, D] arrays are the kernel's [B, H, N, D] operands and
        output through its runtime strides: the custom call takes and
        returns the user's arrays (no transposes around it), its `layouts`
        saying which buffer dim each kernel dim is; the permutations are
        the ones XLA's copies would apply."""
        import re

        import jax
        import jax.numpy as jnp
        import numpy as np

        import flashlight.jax as fj

        def attention(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                implementation="xla")

        s = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
        fn = fj.jit(attention, cache=self.cache.name)
        text = jax.jit(fn).lower(s, s, s).as_text()
        self.assertNotIn("stablehlo.transpose", text)
        layouts = re.findall(r"layouts = dense<\[([0-9, ]+)\]>", text)
        self.assertEqual(layouts, [", ".join(["0, 2, 1, 3"] * 4)], text)
        # What the permutations mean: the kernel's tensor is the buffer
        # transposed by them, as the copies in the kernel's layout make it.
        y = np.arange(128 * 2 * 4 * 64, dtype=np.float32).reshape(128, 2, 4, 64)
        cycle = [{"dim": 2}, {"dim": 0}, {"dim": 1}, {"dim": 3}]
        manifest = {"runtime_strides": True, "pointer_alignment": 16}
        shape, perm = fj._source_layout(cycle, y, [2, 4, 128, 64], manifest)
        self.assertEqual(shape, list(y.shape))
        np.testing.assert_array_equal(
            y.transpose(perm), np.asarray(fj._to_kernel_layout(y, cycle, [2, 4, 128, 64])))
        result = [{"dim": 1}, {"dim": 2}, {"dim": 0}, {"dim": 3}]
        shape, perm = fj._result_layout(result, [128, 2, 4, 64], [2, 4, 128, 64], manifest, 4)
        kernel = y.reshape(shape).transpose(perm)
        np.testing.assert_array_equal(
            np.asarray(fj._to_user_layout(kernel, result, [128, 2, 4, 64])), y)
        # A batch of 1 as the layouts drop it: the user's unit dim fixed at
        # 0, the kernel's unit batch dim inserted; both by a reshape.
        one = np.ascontiguousarray(y[:, :1].transpose(1, 0, 2, 3))  # [1, N, H, D]
        dropped = [{"const": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        shape, perm = fj._source_layout(dropped, one, [1, 4, 128, 64], manifest)
        np.testing.assert_array_equal(
            one.reshape(shape).transpose(perm),
            np.asarray(fj._to_kernel_layout(one, dropped, [1, 4, 128, 64])))
        unit = [{"const": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]  # kernel [1, H, N, D]
        shape, perm = fj._result_layout(unit, [1, 128, 4, 64], [1, 4, 128, 64], manifest, 4)
        kernel = one.reshape(shape).transpose(perm)
        np.testing.assert_array_equal(
            np.asarray(fj._to_user_layout(kernel, unit, [1, 128, 4, 64])), one)
        # A broadcast kernel dim and a fixed dim past its first element:
        # copies.
        self.assertIsNone(fj._source_layout(dropped, one, [2, 4, 128, 64], manifest))
        self.assertIsNone(fj._source_layout(dropped, y, [1, 4, 2, 64], manifest))
        # Strides the kernel cannot take: copies. A head dim of 2 f32 (8-byte
        # rows) is off the kernel's 16-byte alignment; a static-strides
        # kernel takes its own layout only.
        narrow = np.zeros((2, 128, 4, 2), np.float32)
        bnhd = [{"dim": 0}, {"dim": 2}, {"dim": 1}, {"dim": 3}]
        self.assertIsNone(fj._source_layout(bnhd, narrow, [2, 4, 128, 2], manifest))
        self.assertFalse(fj._reads_strides({"runtime_strides": False}))
        self.assertFalse(fj._reads_strides({"runtime_strides": True, "archs": {
            "sm_80": {}, "sm_90a": {"runtime_strides": False}}}))

    def test_steps_lower_to_xla_ops_and_custom_calls(self):
        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj

        def projected(q, k, v, w):
            o = jax.nn.dot_product_attention(q, k, v, implementation="xla")
            return o.reshape(2, 128, 256) @ w

        s = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
        w = jax.ShapeDtypeStruct((256, 64), jnp.bfloat16)
        fn = fj.jit(projected, cache=self.cache.name)
        out = jax.eval_shape(fn, s, s, s, w)
        self.assertEqual((out.shape, out.dtype), ((2, 128, 64), jnp.bfloat16))
        # The attention a custom call, the projection XLA's own dot; the
        # layout kernels of the reference path custom calls too.
        text = jax.jit(fn).lower(s, s, s, w).as_text()
        self.assertEqual(text.count(f'@{fj.TARGET}('), 1)
        self.assertGreater(text.count(f'@{fj.HOST_TARGET}('), 0)
        self.assertEqual(text.count("stablehlo.dot_general"), 1)

    def test_two_attentions_call_their_own_kernels(self):
        import re

        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj

        def two_layers(x, w):  # self-attention, a projection, causal attention
            h = jax.nn.dot_product_attention(x, x, x, implementation="xla")
            h = (h.reshape(2, 128, 256) @ w).reshape(2, 128, 4, 64)
            return jax.nn.dot_product_attention(h, h, h, is_causal=True,
                                                implementation="xla")

        s = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
        w = jax.ShapeDtypeStruct((256, 256), jnp.bfloat16)
        fn = fj.jit(two_layers, cache=self.cache.name)
        out = jax.eval_shape(fn, s, w)
        self.assertEqual((out.shape, out.dtype), ((2, 128, 4, 64), jnp.bfloat16))
        text = jax.jit(fn).lower(s, w).as_text()
        # One custom call per attention, each naming its kernel.
        calls = re.findall(rf"@{fj.TARGET}\(.*?attention = (\d+)", text)
        self.assertEqual(sorted(calls), ["0", "1"], text)

    def test_the_gradient_is_the_gradient_program(self):
        import re

        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj

        def attention(q, k, v):
            return jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                implementation="xla")

        s = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
        fn = fj.jit(attention, cache=self.cache.name)

        def loss(q, k, v):
            return fn(q, k, v).astype(jnp.float32).sum()

        grads = jax.eval_shape(jax.grad(loss, argnums=(0, 1, 2)), s, s, s)
        self.assertEqual([(g.shape, g.dtype) for g in grads], [(s.shape, s.dtype)] * 3)
        text = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(s, s, s).as_text()
        # The training forward (one kernel that also returns the
        # log-sum-exp, [2, 4, 128] f32), then the gradient program with
        # saved statistics (dQ, dK, dV; not the forward again, which the
        # gradient program without them has as a fourth kernel).
        calls = re.findall(rf"@{fj.TARGET}\(.*?attention = (\d+) : i64, .*?manifest = \"([^\"]+)\""
                           r".*?-> (.*)", text)
        by_manifest = {}
        for k, manifest, results in calls:
            by_manifest.setdefault(manifest, []).append((int(k), results))
        self.assertEqual(sorted(len(c) for c in by_manifest.values()), [1, 3], text[-2000:])
        (training,) = [c for c in by_manifest.values() if len(c) == 1]
        self.assertEqual(training[0][0], 0)
        self.assertIn("tensor<2x4x128xf32>", training[0][1])
        (gradient,) = [m for m, c in by_manifest.items() if len(c) == 3]
        with open(gradient) as f:
            self.assertEqual(len(json.load(f)["attentions"]), 3)
        # The plain forward is not needed under grad.
        self.assertEqual(fn.compiles, 0)

    def test_without_a_training_forward_the_gradient_computes_it_again(self):
        """Sigmoid attention has no log-sum-exp to save (--return-lse
        refuses it): the backward is the gradient program that computes the
        forward's values again, after the plain forward."""
        import re

        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj

        def sigmoid_attention(q, k, v):
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * 0.125
            return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.sigmoid(s - 4.0), v)

        s = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
        fn = fj.jit(sigmoid_attention, cache=self.cache.name)

        def loss(q, k, v):
            return fn(q, k, v).astype(jnp.float32).sum()

        text = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(s, s, s).as_text()
        self.assertEqual(list(fn._training.values()), [None])
        self.assertEqual(fn.compiles, 1)  # the forward the backward's residuals come from
        manifests = set(re.findall(rf"@{fj.TARGET}\(.*?manifest = \"([^\"]+)\"", text))
        self.assertEqual(len(manifests), 1, text[-2000:])  # the gradient program alone

    def test_a_pair_bias_gets_its_gradient(self):
        """A bias argument the score reads is differentiated too: the
        gradient program with --score-capture-gradients (before, such an
        argument was refused)."""
        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj

        def biased(q, k, v, bias):
            return jax.nn.dot_product_attention(q, k, v, bias=bias, implementation="xla")

        s = jax.ShapeDtypeStruct((2, 128, 4, 64), jnp.bfloat16)
        b = jax.ShapeDtypeStruct((1, 4, 128, 128), jnp.bfloat16)
        fn = fj.jit(biased, cache=self.cache.name)

        def loss(q, k, v, bias):
            return fn(q, k, v, bias).astype(jnp.float32).sum()

        with self.assertWarnsRegex(UserWarning, "S and dP"):
            grads = jax.eval_shape(jax.grad(loss, argnums=(0, 3)), s, s, s, b)
        self.assertEqual([(g.shape, g.dtype) for g in grads],
                         [(s.shape, s.dtype), (b.shape, b.dtype)])

    def test_the_ring_steps_gradient_takes_saved_statistics(self):
        """gradient_from_statistics lowers to the gradient program with
        saved statistics: three kernels (dQ, dK, dV), no forward again."""
        import re

        import jax
        import jax.numpy as jnp

        import flashlight.jax as fj
        import flashlight.jax_ring as ring

        s = jax.ShapeDtypeStruct((1, 4, 256, 64), jnp.bfloat16)
        rows = jax.ShapeDtypeStruct((1, 4, 256), jnp.float32)
        fn = fj.jit(ring.step_program(True), cache=self.cache.name)

        def grads(q, k, v, dout, out, lse):
            g = fn.gradient_from_statistics(q, k, v, dout=dout, out=out, lse=lse)
            return g[0], g[1], g[2]

        text = jax.jit(grads).lower(s, s, s, s, s, rows).as_text()
        calls = re.findall(rf"@{fj.TARGET}\(.*?attention = (\d+)", text)
        self.assertEqual(sorted(calls), ["0", "1", "2"], text[-2000:])


@unittest.skipUnless(HAS_JAX, "needs JAX")
class CopySteps(unittest.TestCase):
    """flashlight.jax runs a kernel step marked `copy` as XLA's concatenate
    and slice (on the CPU too), never as its kernel's custom call."""

    def test_concat_and_slices(self):
        import jax
        import numpy as np

        sys.path.insert(0, os.path.dirname(__file__))
        from test_runtime import COPY_ENTRY

        import flashlight.jax as fj

        rng = np.random.default_rng(0)
        a = rng.standard_normal((2, 3, 4)).astype(np.float32)
        b = rng.standard_normal((2, 3, 2)).astype(np.float32)
        c, s, t = jax.jit(lambda x, y: fj._run_steps({"entry": COPY_ENTRY}, ".", "copies.json",
                                                     [x, y]))(a, b)
        want = np.concatenate([a, b], axis=2)
        np.testing.assert_array_equal(np.asarray(c), want)
        np.testing.assert_array_equal(np.asarray(s), want[:, 1:3, 4:6])
        np.testing.assert_array_equal(np.asarray(t), a)


if __name__ == "__main__":
    unittest.main()
