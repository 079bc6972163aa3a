"""Context parallelism: ring attention over torch.distributed with
Flashlight kernels, forward and backward.

    import flashlight.ring as ring

    q, k, v = (ring.zigzag_shard(x, dim=2, group=group) for x in (q, k, v))
    out = ring.attention(q, k, v, causal=True, group=group)   # local shard
    out.sum().backward()                                       # dq, dk, dv

Each rank holds a shard of the sequence of q, k and v (`[B, H, N / W, D]`,
W ranks). The sequence is split zigzag: 2W chunks, rank r holding chunks r
and 2W - 1 - r, so that every rank has as many causal pairs as the others.
The K/V shards travel around the ring (each step sends this rank's current
K/V to the next rank and receives the previous rank's, `batch_isend_irecv`
overlapped with the step's kernels).

Masks: `causal`, a causal sliding `window` (a query sees itself and the
`window - 1` keys before it) and `document` ids (the whole sequence's, one
per position; a query sees the keys of its own document). A step computes
the chunk pairs whose mask keeps some pair of positions; the steps after
the last one any rank needs (documents that all fit in a rank's chunks)
are not run at all. Plain causal and full attention keep their
lean kernels: the first step is one causal call over this rank's own two
chunks, each later step one call of the plain kernel on the rectangle of
whole pairs. Masked programs call a kernel per kept chunk pair, its mask
reading the pair's global positions (and documents). Each call is one
Flashlight kernel returning its output and log-sum-exp; partial outputs
merge by their log-sum-exps in f32, a row that a call's mask empties
(output 0, log-sum-exp -inf) adding nothing.

Backward: the K/V travel the ring again, with the f32 sums of their dK and
dV beside them; each call runs its step's gradient program with the merged
output and log-sum-exp (`gradient_from_statistics`: the call's share of
the whole attention's gradient, no forward computed again); after the last
step each dK/dV sum goes to its owner.
"""

import collections

import torch
import torch.distributed as dist

from ._jit import jit

_steps = {}

Mask = collections.namedtuple("Mask", "causal window document")


def _keep(mask, q, k, positions):
    """The [M, N] pairs a step keeps: causal on the diagonal for the plain
    steps (no positions), else by the blocks' global positions (qpos,
    kpos) and documents (qdoc, kdoc)."""
    if not positions:
        m, n = q.shape[2], k.shape[2]
        return torch.ones(m, n, dtype=torch.bool, device=q.device).tril()
    behind = positions[0][:, None] - positions[1][None, :]
    keep = []
    if mask.causal:
        keep.append(behind >= 0)
    if mask.window is not None:
        keep.append(behind < mask.window)
    if mask.document:
        keep.append(positions[2][:, None] == positions[3][None, :])
    kept = keep[0]
    for term in keep[1:]:
        kept = kept & term
    return kept


def _scale(scale, q):
    return scale if scale is not None else q.shape[-1] ** -0.5


def _step_program(causal, scale, window=None, document=False):
    """The attention of a query block against a key block: (output,
    log-sum-exp). Plain (no `window`, no `document`): (q, k, v), causal
    meaning the blocks are the same positions (the diagonal). Otherwise
    (q, k, v, qpos, kpos[, qdoc, kdoc]): the blocks' global positions and
    document ids."""
    mask = Mask(bool(causal), window, bool(document))
    masked = window is not None or document

    def step(q, k, v, *positions):
        s = (q @ k.transpose(-1, -2)).float() * _scale(scale, q)
        if masked or causal:
            s = s.masked_fill(~_keep(mask, q, k, positions), float("-inf"))
        # The log-sum-exp as max + log(sum(exp(s - max))), the form
        # Flashlight takes as the kernel's own.
        m = s.amax(-1, keepdim=True)
        lse = m.squeeze(-1) + torch.log(torch.exp(s - m).sum(-1))
        return torch.softmax(s, -1).to(v.dtype) @ v, lse

    step.__qualname__ = (f"ring_step(causal={causal}, scale={scale}, window={window}, "
                         f"document={document})")
    return step


def step_function(causal, scale=None, window=None, document=False):
    """The jit step function (cached per mask and scale): a Flashlight
    kernel per shape class, with `gradient_from_statistics`."""
    key = (bool(causal), None if scale is None else float(scale),
           None if window is None else int(window), bool(document))
    if key not in _steps:
        _steps[key] = jit(_step_program(*key))
    return _steps[key]


class reference_step:
    """The step in PyTorch, for tests without a GPU: the step program, and
    its gradient given the whole attention's statistics written out
    (P = exp(s - L), dS = P (dP - Delta))."""

    def __init__(self, causal, scale=None, window=None, document=False):
        self.program = _step_program(causal, scale, window, document)
        self.mask = Mask(bool(causal), window, bool(document))
        self.masked = causal or window is not None or document
        self.scale = scale

    def __call__(self, *args):
        return self.program(*args)

    def gradient_from_statistics(self, q, k, v, *positions, dout, out, lse):
        scale = _scale(self.scale, q)
        s = (q @ k.transpose(-1, -2)).float() * scale
        p = torch.exp(s - lse.float()[..., None])
        if self.masked:
            p = p.masked_fill(~_keep(self.mask, q, k, positions), 0)
        dp = dout.float() @ v.float().transpose(-1, -2)
        ds = p * (dp - (dout.float() * out.float()).sum(-1, keepdim=True))
        return {0: (scale * ds @ k.float()).to(q.dtype),
                1: (scale * ds.transpose(-1, -2) @ q.float()).to(k.dtype),
                2: (p.transpose(-1, -2) @ dout.float()).to(v.dtype)}


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
    """Two partial attentions of the same rows, by their log-sum-exps; a
    part whose row kept no key (log-sum-exp -inf, or NaN where a reference
    step computed it as -inf - -inf) adds nothing."""
    empty = ~torch.isfinite(l)
    l = l.masked_fill(empty, float("-inf"))
    o = o.float().masked_fill(empty[..., None], 0)
    if out is None:
        return o, l
    new = torch.logaddexp(lse, l)
    # Rows no part has kept yet stay empty (never NaN).
    ok = torch.isfinite(new)
    safe = torch.where(ok, new, 0)
    a = torch.where(ok, torch.exp(lse - safe), 0)[..., None]
    b = torch.where(ok, torch.exp(l - safe), 0)[..., None]
    return out * a + o * b, new


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
    """Per ring step, the kernel calls of rank `rank` for plain causal or
    full attention: (query chunks [i0, i1), key chunks [j0, j1), causal).
    The first step is one call over this rank's own two chunks (causal
    attention over them in order is exactly the causal pairs among them).
    A later step's whole pairs always form one rectangle of this rank's two
    query chunks and the visiting two key chunks (one query chunk against
    both, or both against one): one call of the plain kernel."""
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


def masked_schedule(world, rank, n, mask, document=None):
    """Per ring step, the (query chunk, key chunk) pairs of rank `rank`
    whose mask keeps some pair of positions (`document`: the whole
    sequence's ids on the CPU; pairs are skipped by document only where the
    ids never decrease, as in packed sequences)."""
    c = n // (2 * world)
    ordered = document is None or bool((document[1:] >= document[:-1]).all())

    def kept(qc, kc):
        q0, q1, k0, k1 = qc * c, (qc + 1) * c - 1, kc * c, (kc + 1) * c - 1
        if mask.causal and k0 > q1:
            return False
        if mask.window is not None and q0 - k1 >= mask.window:
            return False
        if document is not None and ordered and (
                document[k1] < document[q0] or document[k0] > document[q1]):
            return False
        return True

    steps = []
    for s in range(world):
        source = (rank - s) % world
        mine = (rank, 2 * world - 1 - rank)
        theirs = (source, 2 * world - 1 - source)
        steps.append([(i, j) for i, qc in enumerate(mine) for j, kc in enumerate(theirs)
                      if kept(qc, kc)])
    return steps


# One kernel call of a ring step: this rank's query chunks [i0, i1), the
# visiting key chunks [j0, j1), the step function and its mask operands.
Call = collections.namedtuple("Call", "rows cols fn masks")


class _Plan:
    """Every rank's calls per step, for one sequence length and mask; the
    ring runs `steps` steps (after the last one any rank needs, none)."""

    def __init__(self, q, mask, scale, document, group, step, world=None, rank=None):
        explicit = world is not None
        self.world = world if world is not None else dist.get_world_size(group)
        self.rank = rank if rank is not None else dist.get_rank(group)
        self.group = group
        if q.shape[2] % 2:
            raise ValueError(f"local length {q.shape[2]} is not two equal zigzag chunks")
        self.c = c = q.shape[2] // 2
        n = q.shape[2] * self.world
        world, rank = self.world, self.rank
        if mask.window is None and document is None:
            self.calls = [[Call(rows, cols, step(diagonal, scale), ())
                           for rows, cols, diagonal in calls]
                          for calls in schedule(world, rank, mask.causal)]
            self.steps = world
            return
        doc = None if document is None else document.detach().cpu()
        if doc is not None and doc.shape != (n,):
            raise ValueError(f"document ids have shape {tuple(doc.shape)}, expected ({n},): "
                             "one per position of the whole sequence")
        fn = step(mask.causal, scale, mask.window, document is not None)
        device = q.device
        plans = [masked_schedule(world, r, n, mask, doc) for r in range(world)]
        self.steps = 1 + max(s for p in plans for s, pairs in enumerate(p) if pairs)
        # (A plan for a given world and rank, as a cache fill makes, runs
        # no collective.)
        if doc is not None and world > 1 and not explicit:
            self._agree(device)

        def operands(chunk):
            pos = torch.arange(chunk * c, (chunk + 1) * c, dtype=torch.int32)
            ops = [pos]
            if doc is not None:
                ops.append(doc[chunk * c:(chunk + 1) * c].to(torch.int32))
            return ops

        self.calls = []
        for s, pairs in enumerate(plans[rank][:self.steps]):
            source = (rank - s) % world
            mine = (rank, 2 * world - 1 - rank)
            theirs = (source, 2 * world - 1 - source)
            calls = []
            for i, j in pairs:
                qo, ko = operands(mine[i]), operands(theirs[j])
                ops = [qo[0], ko[0]] + ([qo[1], ko[1]] if doc is not None else [])
                calls.append(Call((i, i + 1), (j, j + 1), fn,
                                  tuple(x.to(device) for x in ops)))
            self.calls.append(calls)

    def _agree(self, device):
        """Raises where the ranks' document ids give different ring lengths
        (the ring would hang): one all-reduce of the step count."""
        steps = torch.tensor([self.steps, -self.steps], device=device)
        dist.all_reduce(steps, dist.ReduceOp.MAX, group=self.group)
        if steps[0].item() != self.steps or -steps[1].item() != self.steps:
            raise ValueError("ring.attention: the ranks' document ids differ (each rank "
                             "must pass the whole sequence's, the same everywhere)")

    def peer(self, r):
        r %= self.world
        return dist.get_global_rank(self.group, r) if self.group is not None else r

    def exchange(self, send, to, receive_from):
        """Sends `send` to rank `to` and receives a tensor like it from
        `receive_from`, asynchronously: (received, requests)."""
        received = torch.empty_like(send)
        requests = dist.batch_isend_irecv([
            dist.P2POp(dist.isend, send, self.peer(to), self.group),
            dist.P2POp(dist.irecv, received, self.peer(receive_from), self.group)])
        return received, requests

    def rows(self, x, call):
        return x[:, :, call.rows[0] * self.c:call.rows[1] * self.c]

    def cols(self, x, call):
        return x[:, :, call.cols[0] * self.c:call.cols[1] * self.c]


def _forward(q, k, v, plan):
    """This rank's output shard and its log-sum-exp (f32)."""
    kv = torch.stack([k, v]).contiguous()
    c = plan.c
    out = [None, None]  # per query chunk: (output f32, log-sum-exp)
    for s, calls in enumerate(plan.calls):
        pending = []
        if s < plan.steps - 1:
            incoming, pending = plan.exchange(kv, plan.rank + 1, plan.rank - 1)
        for call in calls:
            o, lse = call.fn(plan.rows(q, call), plan.cols(kv[0], call),
                             plan.cols(kv[1], call), *call.masks)
            i0, i1 = call.rows
            for i in range(i0, i1):
                part = (o[:, :, (i - i0) * c:(i - i0 + 1) * c],
                        lse[:, :, (i - i0) * c:(i - i0 + 1) * c])
                out[i] = _merge(*(out[i] or (None, None)), *part)
        for request in pending:
            request.wait()
        if pending:
            kv = incoming
    return (torch.cat([out[0][0], out[1][0]], 2).to(q.dtype),
            torch.cat([out[0][1], out[1][1]], 2))


def _backward(q, k, v, out, lse, dout, plan):
    """dq, dk, dv of this rank's shards given the output's gradient."""
    kv = torch.stack([k, v]).contiguous()
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    arriving, sums = None, []
    last = plan.steps - 1
    for s, calls in enumerate(plan.calls):
        pending = []
        if s < last:
            incoming, pending = plan.exchange(kv, plan.rank + 1, plan.rank - 1)
        dkv = torch.zeros(kv.shape, dtype=torch.float32, device=kv.device)
        for call in calls:
            grads = call.fn.gradient_from_statistics(
                plan.rows(q, call).contiguous(), plan.cols(kv[0], call).contiguous(),
                plan.cols(kv[1], call).contiguous(), *call.masks,
                dout=plan.rows(dout, call).contiguous(),
                out=plan.rows(out, call).contiguous(), lse=plan.rows(lse, call).contiguous())
            plan.rows(dq, call).add_(grads[0])
            plan.cols(dkv[0], call).add_(grads[1])
            plan.cols(dkv[1], call).add_(grads[2])
        # The sums so far of the visiting block's dK/dV arrive from the
        # rank it came from; they go on with the block, and after the last
        # step to its owner, `last` ranks back.
        for request in sums:
            request.wait()
        if arriving is not None:
            dkv += arriving
        if last == 0:
            arriving = dkv
        else:
            ahead = plan.rank + 1 if s < last else plan.rank - last
            behind = plan.rank - 1 if s < last else plan.rank + last
            arriving, sums = plan.exchange(dkv, ahead, behind)
        for request in pending:
            request.wait()
        if pending:
            kv = incoming
    for request in sums:
        request.wait()
    return dq.to(q.dtype), arriving[0].to(k.dtype), arriving[1].to(v.dtype)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, plan):
        out, lse = _forward(q, k, v, plan)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.plan = plan
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        return (*_backward(q, k, v, out, lse, dout.contiguous(), ctx.plan), None)


def attention(q, k, v, *, causal=True, window=None, document=None, scale=None,
              group=None, step=None):
    """Ring attention of this rank's zigzag shards q, k, v (`[B, H, N / W,
    D]`): this rank's shard of the output, differentiable. `window`: a
    causal sliding window of that many keys (the query's own included);
    `document`: the whole sequence's document ids (`[N]`, the same on every
    rank). `step(causal, scale, window, document)` gives the step function
    (default: the Flashlight kernels, `step_function`; tests pass
    `reference_step`)."""
    if window is not None and (not causal or window < 1):
        raise ValueError("window: a causal sliding window of at least 1 key")
    plan = _Plan(q, Mask(bool(causal), window, document is not None), scale, document,
                 group, step or step_function)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)):
        return _RingAttention.apply(q, k, v, plan)
    return _forward(q, k, v, plan)[0]
