"""flashlight.ring without a GPU (ctest `python/ring`): the zigzag split and
the ring's steps and merges, in 2 and 3 processes over gloo on the CPU,
with PyTorch's step program in place of the kernels; the output shards put
together equal attention over the whole sequence. Skips without PyTorch.
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


def _worker(rank, world, port, causal, folder):
    import torch
    import torch.distributed as dist

    import flashlight.ring as ring

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 12 * world, 16, generator=g, dtype=torch.float64)
               for _ in range(3))
    shards = [ring.zigzag_shard(x, dim=2) for x in (q, k, v)]
    out = ring.attention(*shards, causal=causal, step=ring._step_program)
    torch.save(out, os.path.join(folder, f"out{rank}.pt"))
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
        import torch
        import torch.multiprocessing as mp

        import flashlight.ring as ring

        for world, causal in ((2, True), (3, True), (2, False)):
            with tempfile.TemporaryDirectory() as folder:
                mp.spawn(_worker, args=(world, _free_port(), causal, folder), nprocs=world)
                shards = [torch.load(os.path.join(folder, f"out{r}.pt")) for r in range(world)]
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(2, 3, 12 * world, 16, generator=g, dtype=torch.float64)
                       for _ in range(3))
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            got = ring.zigzag_unshard(shards)
            # (The step computes scores in f32, as the kernels do.)
            self.assertLess((got - ref).abs().max().item(), 1e-5, (world, causal))


if __name__ == "__main__":
    unittest.main()
