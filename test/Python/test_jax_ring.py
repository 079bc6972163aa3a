"""flashlight.jax_ring without a GPU (ctest `python/jax-ring`): ring
attention inside shard_map with ppermute over 2 and 4 CPU devices, with the
JAX step program in place of the kernels; the shards put together equal
attention over the whole sequence. Skips without JAX."""

import importlib.util
import os
import sys
import unittest

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

HAS_JAX = importlib.util.find_spec("jax") is not None


@unittest.skipUnless(HAS_JAX, "needs JAX")
class JaxRing(unittest.TestCase):
    def test_ring_equals_whole_attention(self):
        import jax
        import jax.numpy as jnp
        import numpy as np
        from jax.sharding import Mesh, PartitionSpec as P

        import flashlight.jax_ring as ring

        jax.config.update("jax_enable_x64", True)
        for world, causal in ((2, True), (4, True), (2, False)):
            mesh = Mesh(np.array(jax.devices()[:world]), ("seq",))
            keys = jax.random.split(jax.random.PRNGKey(world), 3)
            q, k, v = (jax.random.normal(key, (2, 3, 8 * world, 16), jnp.float32)
                       for key in keys)
            spec = P(None, None, "seq", None)
            attend = jax.shard_map(
                lambda q, k, v: ring.attention(q, k, v, "seq", causal=causal,
                                               step=ring.step_program),
                mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)
            got = ring.unzigzag(attend(*(ring.zigzag(x, world) for x in (q, k, v))), world)
            # (jax.nn.dot_product_attention takes [B, N, H, D].)
            t = lambda x: x.transpose(0, 2, 1, 3)  # noqa: E731
            ref = t(jax.nn.dot_product_attention(t(q), t(k), t(v), is_causal=causal))
            self.assertLess(float(jnp.abs(got - ref).max()), 1e-5, (world, causal))


if __name__ == "__main__":
    unittest.main()
