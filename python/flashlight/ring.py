"""Context parallelism: ring attention over torch.distributed with
Flashlight kernels (forward).

    import flashlight.ring as ring

    q, k, v = (ring.zigzag_shard(x, dim=2, group=group) for x in (q, k, v))
    out = ring.attention(q, k, v, causal=True, group=group)   # local shard

Each rank holds a shard of the sequence of q, k and v (`[B, H, N / W, D]`,
W ranks). The sequence is split zigzag: 2W chunks, rank r holding chunks r
and 2W - 1 - r, so that every rank has as many causal pairs as the others.
The K/V shards travel around the ring (each step sends this rank's current
K/V to the next rank and receives the previous rank's, `batch_isend_irecv`
overlapped with the step's kernels). A step computes the pairs of this
rank's two query chunks and the two visiting key chunks that a causal mask
keeps: the first step (its own chunks) is one causal call over both; later
steps the whole pairs (the keys precede the queries), which always form
one rectangle, in one call of the plain kernel; none where the keys all
follow. Each call is one Flashlight kernel returning its output and
log-sum-exp (every query keeps a key, so no row is empty), and the partial
outputs are merged by their log-sum-exps in f32.
"""

import torch
import torch.distributed as dist

from ._jit import jit

_steps = {}


def _step_program(causal, scale):
    """The attention of one query chunk against one key chunk of the same
    length: (output, log-sum-exp). Causal: the two chunks are the same
    positions (the diagonal); other pairs are all kept or all skipped."""
    def step(q, k, v):
        s = (q @ k.transpose(-1, -2)).float()
        s = s * (scale if scale is not None else q.shape[-1] ** -0.5)
        if causal:
            n = q.shape[2]
            keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
            s = s.masked_fill(~keep, float("-inf"))
        # The log-sum-exp as max + log(sum(exp(s - max))), the form Flashlight
        # takes as the kernel's own.
        m = s.amax(-1, keepdim=True)
        lse = m.squeeze(-1) + torch.log(torch.exp(s - m).sum(-1))
        return torch.softmax(s, -1).to(v.dtype) @ v, lse

    step.__qualname__ = f"ring_step(causal={causal}, scale={scale})"
    return step


def step_function(causal, scale=None):
    """The jit step function (cached per causal and scale)."""
    key = (bool(causal), None if scale is None else float(scale))
    if key not in _steps:
        _steps[key] = jit(_step_program(*key))
    return _steps[key]


def zigzag_positions(n, world, rank, device=None):
    """The global positions of rank `rank`'s shard of a length-`n`
    sequence split zigzag over `world` ranks (2 * world chunks)."""
    if n % (2 * world):
        raise ValueError(f"sequence length {n} is not a multiple of 2 * world = {2 * world}")
    c = n // (2 * world)
    first = torch.arange(rank * c, (rank + 1) * c, device=device)
    last = torch.arange((2 * world - 1 - rank) * c, (2 * world - rank) * c, device=device)
    return torch.cat([first, last])


def zigzag_shard(x, dim=2, group=None, world=None, rank=None):
    """This rank's zigzag shard of the full tensor `x` along `dim`."""
    world = world if world is not None else dist.get_world_size(group)
    rank = rank if rank is not None else dist.get_rank(group)
    return x.index_select(dim, zigzag_positions(x.shape[dim], world, rank, x.device))


def zigzag_unshard(shards, dim=2):
    """The full tensor from every rank's shard (in rank order)."""
    world = len(shards)
    n = sum(s.shape[dim] for s in shards)
    order = torch.cat([zigzag_positions(n, world, r) for r in range(world)])
    out = torch.cat(shards, dim)
    return out.index_select(dim, torch.argsort(order).to(out.device))


def _merge(out, lse, o, l):
    """Two partial attentions of the same rows, by their log-sum-exps."""
    new = torch.logaddexp(lse, l)
    out = out * torch.exp(lse - new)[..., None] + o.float() * torch.exp(l - new)[..., None]
    return out, new


def _chunk_pairs(world, rank, source, causal):
    """The (query chunk, key chunk, diagonal) pairs a ring step computes:
    this rank's chunks 0 and 1 (global rank and 2W - 1 - rank) against the
    visiting ones of `source`; causal drops the pairs whose keys all follow
    the queries."""
    mine = (rank, 2 * world - 1 - rank)
    theirs = (source, 2 * world - 1 - source)
    pairs = []
    for i, qc in enumerate(mine):
        for j, kc in enumerate(theirs):
            if not causal or kc < qc:
                pairs.append((i, j, False))
            elif kc == qc:
                pairs.append((i, j, True))
    return pairs


def schedule(world, rank, causal):
    """Per ring step, the kernel calls of rank `rank`: (query chunks [i0,
    i1), key chunks [j0, j1), causal). The first step is one call over
    this rank's own two chunks (causal attention over them in order is
    exactly the causal pairs among them). A later step's whole pairs always
    form one rectangle of this rank's two query chunks and the visiting two
    key chunks (one query chunk against both, or both against one): one
    call of the plain kernel."""
    # This rank's own chunks: the first precedes the second, so the three
    # causal pairs (both diagonals, the second against the first) are
    # causal attention over the two chunks in order, one call.
    steps = [[((0, 2), (0, 2), causal)]]
    for s in range(1, world):
        pairs = _chunk_pairs(world, rank, (rank - s) % world, causal)
        calls = [((i, i + 1), (j, j + 1), True) for i, j, diagonal in pairs if diagonal]
        whole = [(i, j) for i, j, diagonal in pairs if not diagonal]
        rows = sorted({i for i, _ in whole})
        cols = sorted({j for _, j in whole})
        if whole and len(whole) == len(rows) * len(cols):
            calls.append(((rows[0], rows[-1] + 1), (cols[0], cols[-1] + 1), False))
        else:
            calls += [((i, i + 1), (j, j + 1), False) for i, j in whole]
        steps.append(calls)
    return steps


def attention(q, k, v, *, causal=True, scale=None, group=None, step=None):
    """Ring attention of this rank's zigzag shards q, k, v (`[B, H, N / W,
    D]`): this rank's shard of the output. `step(causal, scale)` gives the
    chunk step (default: the Flashlight kernels, `step_function`; tests
    pass PyTorch's `_step_program`)."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    step = step or step_function
    if q.shape[2] % 2:
        raise ValueError(f"local length {q.shape[2]} is not two equal zigzag chunks")
    c = q.shape[2] // 2

    def peer(r):
        return dist.get_global_rank(group, r % world) if group is not None else r % world

    kv = torch.stack([k, v]).contiguous()
    out = [None, None]  # per query chunk: (output f32, log-sum-exp)
    for s, calls in enumerate(schedule(world, rank, causal)):
        pending = []
        if s < world - 1:
            incoming = torch.empty_like(kv)
            pending = dist.batch_isend_irecv([
                dist.P2POp(dist.isend, kv, peer(rank + 1), group),
                dist.P2POp(dist.irecv, incoming, peer(rank - 1), group)])
        for (i0, i1), (j0, j1), diagonal in calls:
            o, lse = step(diagonal, scale)(q[:, :, i0 * c:i1 * c],
                                           kv[0][:, :, j0 * c:j1 * c],
                                           kv[1][:, :, j0 * c:j1 * c])
            for i in range(i0, i1):
                part = (o[:, :, (i - i0) * c:(i - i0 + 1) * c],
                        lse[:, :, (i - i0) * c:(i - i0 + 1) * c])
                out[i] = ((part[0].float(), part[1]) if out[i] is None
                          else _merge(*out[i], *part))
        for request in pending:
            request.wait()
        if s < world - 1:
            kv = incoming
    return torch.cat([out[0][0], out[1][0]], 2).to(q.dtype)
