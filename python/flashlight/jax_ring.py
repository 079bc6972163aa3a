"""Context parallelism in JAX: ring attention inside `shard_map` with
`ppermute`, forward and backward, the schedule of `flashlight.ring`.

    from jax.sharding import PartitionSpec as P
    import flashlight.jax_ring as ring

    spec = P(None, None, "seq", None)
    attend = jax.shard_map(lambda q, k, v: ring.attention(q, k, v, "seq"),
                           mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)
    out = attend(*(ring.zigzag(x, n_devices) for x in (q, k, v)))
    out = ring.unzigzag(out, n_devices)

The sequence (dim 2) is laid out zigzag (`zigzag`): device r holds chunks
r and 2W - 1 - r of 2W. Every device runs the same program: the first step
one causal call over its own two chunks (in order, their causal pairs);
each later step one call of the plain kernel on the rectangle of whole
pairs, which is both query chunks against the visiting first chunk when
it precedes this device's first chunk, else the second query chunk
against both (a `lax.cond` on the device index). The steps are Flashlight
kernels (`flashlight.jax.jit` of the step program, returning the output
and its log-sum-exp); partial outputs merge by their log-sum-exps in f32.
The backward (a `jax.custom_vjp`) sends the K/V around again with the f32
sums of their dK/dV; each call is its step's gradient program given the
merged output and log-sum-exp (`gradient_from_statistics`, the gradient
program with saved statistics). Needs no PyTorch.
"""

_steps = {}


def step_program(causal, scale=None):
    """The attention of a query block against a key block, causal on the
    diagonal (the same positions): (output, log-sum-exp)."""
    import jax
    import jax.numpy as jnp

    def step(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32)
        s = s * (scale if scale is not None else q.shape[-1] ** -0.5)
        if causal:
            n = q.shape[2]
            s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
        m = s.max(-1, keepdims=True)
        lse = m[..., 0] + jnp.log(jnp.exp(s - m).sum(-1))
        p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
        return jnp.einsum("bhqk,bhkd->bhqd", p, v), lse

    return step


class reference_step:
    """The step in JAX, for tests without a GPU: the step program, and its
    gradient given the whole attention's statistics written out (P =
    exp(s - L), dS = P (dP - Delta))."""

    def __init__(self, causal, scale=None):
        self.program = step_program(causal, scale)
        self.causal, self.scale = causal, scale

    def __call__(self, q, k, v):
        return self.program(q, k, v)

    def gradient_from_statistics(self, q, k, v, *, dout, out, lse):
        import jax.numpy as jnp

        scale = self.scale if self.scale is not None else q.shape[-1] ** -0.5
        f32 = jnp.float32
        s = jnp.einsum("bhqd,bhkd->bhqk", q.astype(f32), k.astype(f32)) * scale
        p = jnp.exp(s - lse[..., None])
        if self.causal:
            n = q.shape[2]
            p = jnp.where(jnp.tril(jnp.ones((n, n), bool)), p, 0)
        dp = jnp.einsum("bhqd,bhkd->bhqk", dout.astype(f32), v.astype(f32))
        ds = p * (dp - (dout.astype(f32) * out.astype(f32)).sum(-1, keepdims=True))
        return {0: (scale * jnp.einsum("bhqk,bhkd->bhqd", ds, k.astype(f32))).astype(q.dtype),
                1: (scale * jnp.einsum("bhqk,bhqd->bhkd", ds, q.astype(f32))).astype(k.dtype),
                2: jnp.einsum("bhqk,bhqd->bhkd", p, dout.astype(f32)).astype(v.dtype)}


def step_function(causal, scale=None):
    """The Flashlight step (flashlight.jax.jit of step_program), cached."""
    key = (bool(causal), None if scale is None else float(scale))
    if key not in _steps:
        from .jax import jit

        _steps[key] = jit(step_program(*key))
    return _steps[key]


def _order(n, world):
    import numpy as np

    c = n // (2 * world)
    return np.concatenate([np.r_[r * c:(r + 1) * c, (2 * world - 1 - r) * c:(2 * world - r) * c]
                           for r in range(world)])


def zigzag(x, world, axis=2):
    """x with its `axis` reordered so that contiguous shards over `world`
    devices are their zigzag chunk pairs."""
    import jax.numpy as jnp

    if x.shape[axis] % (2 * world):
        raise ValueError(f"length {x.shape[axis]} is not a multiple of 2 * {world}")
    return jnp.take(x, _order(x.shape[axis], world), axis=axis)


def unzigzag(x, world, axis=2):
    """The inverse of zigzag."""
    import jax.numpy as jnp
    import numpy as np

    return jnp.take(x, np.argsort(_order(x.shape[axis], world)), axis=axis)


def _merge(acc, o, lse):
    import jax.numpy as jnp

    out, old = acc
    new = jnp.logaddexp(old, lse)
    return (out * jnp.exp(old - new)[..., None] + o.astype(jnp.float32)
            * jnp.exp(lse - new)[..., None], new)


def _forward(q, k, v, axis_name, causal, scale, step):
    """This device's output shard and its log-sum-exp (f32)."""
    import jax
    import jax.numpy as jnp

    world = jax.lax.axis_size(axis_name)
    rank = jax.lax.axis_index(axis_name)
    c = q.shape[2] // 2
    second = q[:, :, c:]
    plain, diagonal = step(False, scale), step(causal, scale)

    # Step 0: this device's own chunks, the first before the second: causal
    # attention over both in order is their causal pairs.
    o, lse = diagonal(q, k, v)
    a = (o[:, :, :c].astype(jnp.float32), lse[:, :, :c])
    b = (o[:, :, c:].astype(jnp.float32), lse[:, :, c:])

    perm = [(i, (i + 1) % world) for i in range(world)]
    kv = jnp.stack([k, v])
    for s in range(1, world):
        kv = jax.lax.ppermute(kv, axis_name, perm)
        if not causal:
            o, lse = plain(q, kv[0], kv[1])
            a = _merge(a, o[:, :, :c], lse[:, :, :c])
            b = _merge(b, o[:, :, c:], lse[:, :, c:])
            continue
        source = (rank - s) % world

        def both_queries(a, b, kv):
            # The visiting first chunk precedes this device's first chunk.
            o, lse = plain(q, kv[0][:, :, :c], kv[1][:, :, :c])
            return (_merge(a, o[:, :, :c], lse[:, :, :c]),
                    _merge(b, o[:, :, c:], lse[:, :, c:]))

        def second_query(a, b, kv):
            o, lse = plain(second, kv[0], kv[1])
            return a, _merge(b, o, lse)

        a, b = jax.lax.cond(source < rank, both_queries, second_query, a, b, kv)
    return (jnp.concatenate([a[0], b[0]], axis=2).astype(q.dtype),
            jnp.concatenate([a[1], b[1]], axis=2))


def _backward(q, k, v, out, lse, dout, axis_name, causal, scale, step):
    """dq, dk, dv of this device's shards: the K/V travel the ring again
    with the f32 sums of their dK/dV beside them; each call is its step's
    gradient program given the merged output and log-sum-exp; after the
    last step each sum moves on once more, to its owner."""
    import jax
    import jax.numpy as jnp

    world = jax.lax.axis_size(axis_name)
    rank = jax.lax.axis_index(axis_name)
    c = q.shape[2] // 2
    plain, diagonal = step(False, scale), step(causal, scale)
    f32 = jnp.float32

    def grads(fn, rows, kv, cols):
        g = fn.gradient_from_statistics(
            q[:, :, rows], kv[0][:, :, cols], kv[1][:, :, cols],
            dout=dout[:, :, rows], out=out[:, :, rows], lse=lse[:, :, rows])
        return g[0].astype(f32), jnp.stack([g[1], g[2]]).astype(f32)

    whole = slice(None)
    dq, dkv = grads(diagonal, whole, jnp.stack([k, v]), whole)
    perm = [(i, (i + 1) % world) for i in range(world)]
    kv = jnp.stack([k, v])
    for s in range(1, world):
        kv = jax.lax.ppermute(kv, axis_name, perm)
        dkv = jax.lax.ppermute(dkv, axis_name, perm)
        if not causal:
            gq, gkv = grads(plain, whole, kv, whole)
            dq, dkv = dq + gq, dkv + gkv
            continue
        source = (rank - s) % world

        def both_queries(dq, dkv, kv):
            gq, gkv = grads(plain, whole, kv, slice(0, c))
            return dq + gq, dkv.at[:, :, :, :c].add(gkv)

        def second_query(dq, dkv, kv):
            gq, gkv = grads(plain, slice(c, None), kv, whole)
            return dq.at[:, :, c:].add(gq), dkv + gkv

        dq, dkv = jax.lax.cond(source < rank, both_queries, second_query, dq, dkv, kv)
    if world > 1:
        dkv = jax.lax.ppermute(dkv, axis_name, perm)
    return dq.astype(q.dtype), dkv[0].astype(k.dtype), dkv[1].astype(v.dtype)


def attention(q, k, v, axis_name, *, causal=True, scale=None, step=None):
    """Inside shard_map over `axis_name`: ring attention of this device's
    zigzag shards (`[B, H, N / W, D]`); this device's shard of the output,
    differentiable (`jax.grad`: the backward ring). `step(causal, scale)`
    gives the step (default: the Flashlight kernels; tests pass
    `reference_step`)."""
    import jax

    step = step or step_function

    @jax.custom_vjp
    def ring(q, k, v):
        return _forward(q, k, v, axis_name, causal, scale, step)[0]

    def forward(q, k, v):
        out, lse = _forward(q, k, v, axis_name, causal, scale, step)
        return out, (q, k, v, out, lse)

    def backward(saved, dout):
        return _backward(*saved, dout, axis_name, causal, scale, step)

    ring.defvjp(forward, backward)
    return ring(q, k, v)
