"""flashlight.jax_ring without a GPU (ctest `python/jax-ring`): ring
attention inside shard_map with ppermute over 2 to 4 CPU devices, with the
JAX step (`reference_step`) in place of the kernels; the shards put
together, and their gradients through jax.grad, equal attention over the
whole sequence. With the compiler (FLASHLIGHT_COMPILE), the ring with
Flashlight's kernels traces under jax.grad. Skips without JAX; the GPU runs
are scripts/jax_ring_check.py."""

import importlib.util
import os
import sys
import tempfile
import unittest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

HAS_JAX = importlib.util.find_spec("jax") is not None


@unittest.skipUnless(HAS_JAX, "needs JAX")
class JaxRing(unittest.TestCase):
    def test_ring_equals_whole_attention(self):
        """Outputs and, through jax.grad, dq, dk and dv against attention
        over the whole sequence (f64 on the CPU)."""
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.sharding import Mesh, PartitionSpec as P

        import flashlight.jax_ring as ring

        jax.config.update("jax_enable_x64", True)
        for world, causal in ((2, True), (4, True), (2, False), (3, True)):
            mesh = Mesh(np.array(jax.devices()[:world]), ("seq",))
            keys = jax.random.split(jax.random.PRNGKey(world), 4)
            q, k, v, dout = (jax.random.normal(key, (2, 3, 8 * world, 16), jnp.float32)
                             for key in keys)
            spec = P(None, None, "seq", None)
            attend = jax.shard_map(
                lambda q, k, v: ring.attention(q, k, v, "seq", causal=causal,
                                               step=ring.reference_step),
                mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)

            def ours(q, k, v):
                out = attend(*(ring.zigzag(x, world) for x in (q, k, v)))
                return ring.unzigzag(out, world)

            # (jax.nn.dot_product_attention takes [B, N, H, D].)
            t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731

            def theirs(q, k, v):
                return t(jax.nn.dot_product_attention(t(q), t(k), t(v), is_causal=causal))

            ours, theirs = jax.jit(ours), jax.jit(theirs)
            self.assertLess(float(jnp.abs(ours(q, k, v) - theirs(q, k, v)).max()), 1e-5,
                            (world, causal))
            got = jax.jit(jax.grad(lambda *x: (ours(*x) * dout).sum(), argnums=(0, 1, 2)))(
                q, k, v)
            ref = jax.grad(lambda *x: (theirs(*x) * dout).sum(), argnums=(0, 1, 2))(q, k, v)
            for name, g, r in zip(("dq", "dk", "dv"), got, ref):
                self.assertLess(float(jnp.abs(g - r).max()), 1e-5, (world, causal, name))

    def test_masked_ring_equals_whole_attention(self):
        """Causal sliding windows and document ids: outputs and gradients
        against attention over the whole sequence with the same mask (f64
        on the CPU), for windows that empty whole chunk pairs and rows of
        kept pairs, and packed documents (nondecreasing ids, pairs skipped)
        and shuffled ones (no pair skipped)."""
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.sharding import Mesh, PartitionSpec as P

        import flashlight.jax_ring as ring

        jax.config.update("jax_enable_x64", True)
        n_per = 8
        for world, window, docs in ((2, 5, None), (4, 3, None), (3, 20, None),
                                    (4, None, "packed"), (2, 6, "packed"),
                                    (3, None, "shuffled")):
            n = n_per * world
            mesh = Mesh(np.array(jax.devices()[:world]), ("seq",))
            keys = jax.random.split(jax.random.PRNGKey(10 * world + (window or 0)), 4)
            q, k, v, dout = (jax.random.normal(key, (2, 3, n, 16), jnp.float32)
                             for key in keys)
            document = None
            if docs == "packed":
                document = jnp.asarray(np.repeat(np.arange(4), [3, n - 9, 2, 4]), jnp.int32)
            elif docs == "shuffled":
                document = jnp.asarray(np.random.RandomState(world).randint(0, 3, n), jnp.int32)
            spec = P(None, None, "seq", None)
            attend = jax.shard_map(
                lambda q, k, v: ring.attention(q, k, v, "seq", window=window,
                                               document=document,
                                               step=ring.reference_step),
                mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)

            def ours(q, k, v):
                out = attend(*(ring.zigzag(x, world) for x in (q, k, v)))
                return ring.unzigzag(out, world)

            i, j = np.arange(n)[:, None], np.arange(n)[None, :]
            keep = j <= i
            if window is not None:
                keep &= i - j < window
            if document is not None:
                d = np.asarray(document)
                keep &= d[:, None] == d[None, :]
            t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731

            def theirs(q, k, v):
                return t(jax.nn.dot_product_attention(t(q), t(k), t(v),
                                                      mask=jnp.asarray(keep)))

            case = (world, window, docs)
            # Jitted: op by op, shard_map compiles each step's conds apart.
            ours, theirs = jax.jit(ours), jax.jit(theirs)
            self.assertLess(float(jnp.abs(ours(q, k, v) - theirs(q, k, v)).max()), 1e-5, case)
            got = jax.jit(jax.grad(lambda *x: (ours(*x) * dout).sum(), argnums=(0, 1, 2)))(
                q, k, v)
            ref = jax.grad(lambda *x: (theirs(*x) * dout).sum(), argnums=(0, 1, 2))(q, k, v)
            for name, g, r in zip(("dq", "dk", "dv"), got, ref):
                self.assertLess(float(jnp.abs(g - r).max()), 1e-5, (case, name))

    @unittest.skipUnless(os.environ.get("FLASHLIGHT_COMPILE"), "needs the compiler")
    def test_kernels_trace_under_grad(self):
        """The FFI calls' results vary over the mesh axis as their operands
        do: jax.grad of the ring with Flashlight's kernels traces inside
        shard_map (custom_vjp checks the types of its cotangents)."""
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.sharding import Mesh, PartitionSpec as P

        import flashlight.jax_ring as ring

        with tempfile.TemporaryDirectory() as cache:
            os.environ["FLASHLIGHT_CACHE"] = cache
            self.addCleanup(os.environ.pop, "FLASHLIGHT_CACHE", None)
            mesh = Mesh(np.array(jax.devices()[:2]), ("seq",))
            spec = P(None, None, "seq", None)
            document = jnp.asarray(np.repeat(np.arange(3), [150, 250, 112]), jnp.int32)
            # Plain causal, a sliding window and documents (the masked
            # steps' kernels read the pair's positions and ids).
            for options in ({}, {"window": 300}, {"document": document}):
                attend = jax.shard_map(
                    lambda q, k, v: ring.attention(q, k, v, "seq", **options),
                    mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)
                s = jax.ShapeDtypeStruct((1, 2, 512, 64), jnp.bfloat16)
                loss = lambda *a: attend(*a).astype(jnp.float32).sum()  # noqa: E731
                traced = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).trace(s, s, s)
                self.assertEqual([(o.shape, o.dtype) for o in traced.out_info],
                                 [(s.shape, s.dtype)] * 3, options)
            # Document ids of another length: an error naming them.
            attend = jax.shard_map(
                lambda q, k, v: ring.attention(q, k, v, "seq", document=document[:500]),
                mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)
            with self.assertRaisesRegex(ValueError, r"document ids have shape \(500,\), "
                                                    r"expected \(512,\)"):
                jax.jit(attend).trace(s, s, s)


if __name__ == "__main__":
    unittest.main()
