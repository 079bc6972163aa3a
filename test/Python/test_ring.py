"""flashlight.ring without a GPU (ctest `python/ring`): the zigzag split and
the ring's steps, merges and backward, in 2 to 4 processes over gloo on the
CPU, with PyTorch's step (`reference_step`) in place of the kernels; the
output and gradient shards put together equal attention over the whole
sequence (causal, full, sliding windows, documents). Skips without PyTorch.
The GPU run (NCCL, Flashlight kernels) is scripts/ring_check.py."""

import importlib.util
import os
import socket
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _masks(n, window, documents):
    """The window and the document ids of a test case (ids
    nondecreasing)."""
    import torch

    doc = None
    if documents:
        # A count (random cuts) or the cuts themselves.
        cuts = documents if isinstance(documents, tuple) else sorted(
            torch.randperm(n - 1, generator=torch.Generator().manual_seed(5))[
                :documents - 1].add(1).tolist())
        doc = torch.zeros(n, dtype=torch.int64)
        for c in cuts:
            doc[c:] += 1
    return window, doc


def _inputs(world):
    import torch

    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, 12 * world, 16, generator=g, dtype=torch.float64)
            for _ in range(4)]


def _worker(rank, world, port, causal, window, documents, folder):
    import torch
    import torch.distributed as dist

    import flashlight.ring as ring

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    q, k, v, dout = _inputs(world)
    window, doc = _masks(q.shape[2], window, documents)
    shards = [ring.zigzag_shard(x, dim=2).requires_grad_() for x in (q, k, v)]
    out = ring.attention(*shards, causal=causal, window=window, document=doc,
                         step=ring.reference_step)
    out.backward(ring.zigzag_shard(dout, dim=2))
    torch.save([out.detach()] + [x.grad for x in shards], os.path.join(folder, f"out{rank}.pt"))
    dist.destroy_process_group()


@unittest.skipUnless(HAS_TORCH, "needs PyTorch")
class Ring(unittest.TestCase):
    def test_zigzag_round_trip(self):
        import torch

        import flashlight.ring as ring

        x = torch.arange(24).reshape(1, 1, 24, 1)
        shards = [ring.zigzag_shard(x, 2, world=3, rank=r) for r in range(3)]
        self.assertEqual(shards[0].flatten().tolist(), [0, 1, 2, 3, 20, 21, 22, 23])
        self.assertTrue(torch.equal(ring.zigzag_unshard(shards), x))

    def test_chunk_pairs_cover_the_causal_pairs_once(self):
        import flashlight.ring as ring

        for world in (1, 2, 3, 4):
            seen = set()
            for rank in range(world):
                for s in range(world):
                    source = (rank - s) % world
                    mine = (rank, 2 * world - 1 - rank)
                    theirs = (source, 2 * world - 1 - source)
                    for i, j, diagonal in ring._chunk_pairs(world, rank, source, True):
                        self.assertEqual(diagonal, mine[i] == theirs[j])
                        seen.add((mine[i], theirs[j]))
            self.assertEqual(seen, {(a, b) for a in range(2 * world) for b in range(a + 1)})

    def test_schedule_makes_one_whole_call_per_step(self):
        import flashlight.ring as ring

        for world in (1, 2, 3, 4, 8):
            for rank in range(world):
                steps = ring.schedule(world, rank, True)
                self.assertEqual(len(steps), world)
                self.assertEqual(steps[0], [((0, 2), (0, 2), True)])  # own chunks
                for calls in steps[1:]:
                    self.assertLessEqual(len(calls), 1)
                    self.assertTrue(all(not causal for _, _, causal in calls))
            self.assertEqual(ring.schedule(world, 0, False)[0], [((0, 2), (0, 2), False)])

    def test_ring_equals_whole_attention(self):
        """Outputs and gradients of q, k and v, against autograd of
        attention over the whole sequence (f64)."""
        import torch
        import torch.multiprocessing as mp

        import flashlight.ring as ring

        cases = ((2, True, None, 0), (3, True, None, 0), (2, False, None, 0),
                 (3, True, 7, 0), (4, True, 3, 0), (3, True, None, 3), (2, False, None, 4),
                 (3, True, 10, 2),
                 # A document per chunk: the ring ends after its first step.
                 (2, True, None, (6, 12, 18)))
        for world, causal, window, documents in cases:
            with tempfile.TemporaryDirectory() as folder:
                mp.spawn(_worker, args=(world, _free_port(), causal, window, documents, folder),
                         nprocs=world)
                shards = [torch.load(os.path.join(folder, f"out{r}.pt")) for r in range(world)]
            q, k, v, dout = _inputs(world)
            n = q.shape[2]
            window, doc = _masks(n, window, documents)
            i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
            keep = torch.ones(n, n, dtype=torch.bool)
            if causal:
                keep &= j <= i
            if window is not None:
                keep &= i - j < window
            if doc is not None:
                keep &= doc[:, None] == doc[None, :]
            q, k, v = (x.requires_grad_() for x in (q, k, v))
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            ref.backward(dout)
            expected = [ref.detach(), q.grad, k.grad, v.grad]
            for t, name in enumerate(("out", "dq", "dk", "dv")):
                got = ring.zigzag_unshard([s[t] for s in shards])
                # (The step computes scores in f32, as the kernels do.)
                self.assertLess((got - expected[t]).abs().max().item(), 1e-5,
                                (world, causal, window, documents, name))

    def test_merge_of_rows_a_part_leaves_empty(self):
        """A part whose row kept no key (log-sum-exp -inf, or NaN with a
        NaN output as a reference step gives it) adds nothing; a row no
        part has kept stays empty, not NaN."""
        import torch

        import flashlight.ring as ring

        nan, inf = float("nan"), float("inf")
        o1, l1 = torch.tensor([[[1.0], [nan], [nan]]]), torch.tensor([[0.5, nan, -inf]])
        o2, l2 = torch.tensor([[[3.0], [2.0], [nan]]]), torch.tensor([[0.5, 1.0, nan]])
        out, lse = ring._merge(*ring._merge(None, None, o1, l1), o2, l2)
        self.assertTrue(torch.allclose(out[0, :2, 0], torch.tensor([2.0, 2.0])))
        self.assertEqual(out[0, 2, 0].item(), 0.0)
        self.assertAlmostEqual(lse[0, 0].item(), 0.5 + torch.log(torch.tensor(2.0)).item(), 6)
        self.assertEqual(lse[0, 1].item(), 1.0)
        self.assertEqual(lse[0, 2].item(), -inf)

    def test_masked_schedule_skips_what_the_mask_drops(self):
        import torch

        import flashlight.ring as ring

        # A window of one chunk's length reaches one chunk back: rank 0's
        # chunks (0 and 7 of 8) meet only themselves and chunk 6 (rank 1's
        # second, visiting last).
        mask = ring.Mask(True, 4, False)
        steps = ring.masked_schedule(4, 0, 32, mask)
        self.assertEqual(steps, [[(0, 0), (1, 1)], [], [], [(1, 1)]])
        # Documents: chunks of different documents are skipped.
        doc = torch.tensor([0] * 16 + [1] * 16)
        steps = ring.masked_schedule(2, 0, 32, ring.Mask(False, None, True), doc)
        self.assertEqual(steps[0], [(0, 0), (1, 1)])  # chunks 0 and 3: docs 0 and 1
        self.assertEqual(steps[1], [(0, 0), (1, 1)])  # against chunks 1 (doc 0) and 2 (doc 1)


if __name__ == "__main__":
    unittest.main()
