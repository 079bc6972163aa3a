#!/usr/bin/env python3
"""The GPU check and benchmark of flashlight.ring (context parallelism).

    scripts/ring_check.py fill CACHE                  # build machine
    python3 -m torch.distributed.run --nproc-per-node W \\
        scripts/ring_check.py run CACHE OUT.json       # GPU machine, W GPUs

`fill` compiles the two step kernels (the plain and the causal chunk
attention, with their log-sum-exps) into the jit cache for the chunk
lengths below. `run` (one process per GPU, NCCL; NVLink multicast off)
checks causal and full ring attention of a whole sequence split zigzag
against attention over the whole sequence on one GPU (SDPA's math backend
in f32; bf16 tolerance 2e-2), then times causal ring attention at the
benchmark lengths: TFLOP/s per GPU (causal FLOPs of the whole sequence /
time / W) against the one-GPU baseline, the same ring code with W = 1 at
the length of one GPU's shard pair (the scaling `efficiency`), and PyTorch's
`context_parallel` with SDPA's cuDNN kernel on the same sequence.
"""

import os
import statistics
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
import flashlight.ring as ring  # noqa: E402
from check_common import main, write_result  # noqa: E402

B, H, D = 1, 16, 128
CHECK_N = 8192  # per world size: the whole sequence checked
BENCH_N = {1: 16384, 2: 32768, 4: 65536, 8: 131072}  # the whole sequence timed


def fill(cache, worlds=(1, 2, 4, 8)):
    """Each run's process meets its kernel shapes in its schedule's order
    (the causal check's, the full check's, then the benchmark's): the first
    shape class of each step function gets a kernel for its shapes, the
    next ones kernels with runtime shapes (flashlight.jit's automatic
    pairs), so the cache is filled per world size and rank in that order."""
    os.environ["FLASHLIGHT_CACHE"] = cache
    for world in worlds:
        for rank in range(world):
            ring._steps.clear()  # a fresh process's jit functions
            for causal, n in ((True, CHECK_N), (False, CHECK_N), (True, BENCH_N[world])):
                c = n // (2 * world)
                for calls in ring.schedule(world, rank, causal):
                    for (i0, i1), (j0, j1), diagonal in calls:
                        q = torch.zeros(B, H, (i1 - i0) * c, D, dtype=torch.bfloat16)
                        kv = torch.zeros(B, H, (j1 - j0) * c, D, dtype=torch.bfloat16)
                        ring.step_function(diagonal).prepare(q, kv, kv)
            print(f"world {world} rank {rank}: {ring.step_function(True).compiles} + "
                  f"{ring.step_function(False).compiles} compiled", flush=True)


def inputs(n, seed, device):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, n, D, generator=g).to(device, torch.bfloat16) for _ in range(3)]


def timed(fn, rounds=10):
    import torch.distributed as dist

    for _ in range(3):
        fn()
    times = []
    for _ in range(rounds):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def context_parallel_cudnn(n, world, device):
    """Milliseconds of causal SDPA (cuDNN) under PyTorch's
    `context_parallel` over all ranks, on a whole sequence of length n."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mesh = init_device_mesh("cuda", (world,))
    q, k, v = inputs(n, 2, device)
    with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2],
                          no_restore_buffers={q, k, v}):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return timed(lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True))


def run(cache, out_path):
    import torch.distributed as dist

    os.environ["FLASHLIGHT_CACHE"] = cache
    os.environ["FLASHLIGHT_COMPILE"] = "/nonexistent"  # the cache must serve
    rank = int(os.environ.get("RANK", 0))
    world = int(os.environ.get("WORLD_SIZE", 1))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    device = torch.device("cuda")
    records, failures = [], 0

    def record(ok, **fields):
        nonlocal failures
        failures += not ok
        records.append({**fields, "world_size": world, "pass": ok})
        if rank == 0:
            print(fields, "pass" if ok else "FAIL", flush=True)

    with torch.no_grad():
        for causal in (True, False):
            q, k, v = inputs(CHECK_N, 1, device)
            shards = [ring.zigzag_shard(x, dim=2) for x in (q, k, v)]
            out = ring.attention(*shards, causal=causal)
            gathered = [torch.empty_like(out) for _ in range(world)]
            dist.all_gather(gathered, out)
            got = ring.zigzag_unshard(gathered).float()
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.MATH):
                ref = torch.nn.functional.scaled_dot_product_attention(
                    q.float(), k.float(), v.float(), is_causal=causal)
            err = ((got - ref).norm() / ref.norm()).item()
            del ref
            record(err <= 2e-2, variant="causal" if causal else "vanilla", N=CHECK_N, D=D,
                   rel_err=err, system="flashlight_ring")

        n = BENCH_N[world]
        q, k, v = (ring.zigzag_shard(x, dim=2) for x in inputs(n, 2, device))
        ms = timed(lambda: ring.attention(q, k, v, causal=True))
        flops = 4.0 * B * H * n * n * D * 0.5
        tflops = flops / ms / 1e9 / world
        record(True, variant="causal", N=n, D=D, system="flashlight_ring", ms=ms,
               tflops_per_gpu=tflops)
        if rank == 0 and world == 1:
            print(f"one-GPU baseline at N={n}: {tflops:.1f} TFLOP/s", flush=True)
        # PyTorch's context parallelism (its ring over SDPA's cuDNN kernel,
        # load-balanced) on the same whole sequence.
        try:
            peer_ms = context_parallel_cudnn(n, world, device)
            record(True, variant="causal", N=n, D=D, system="context_parallel_cudnn",
                   ms=peer_ms, tflops_per_gpu=flops / peer_ms / 1e9 / world)
        except Exception as e:  # a peer that cannot run here
            if rank == 0:
                print(f"context_parallel: {type(e).__name__}: {str(e)[:200]}", flush=True)
    if ring.step_function(True).compiles or ring.step_function(False).compiles:
        raise RuntimeError("compiled on the GPU machine (cache miss)")
    dist.barrier()
    status = 0
    if rank == 0:
        status = write_result(out_path, "ring_check", records, failures, world_size=world)
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    main(__doc__, fill, run)
