#!/usr/bin/env python3
"""The GPU check and benchmark of flashlight.ring (context parallelism).

    scripts/ring_check.py fill CACHE                  # build machine
    python3 -m torch.distributed.run --nproc-per-node W \\
        scripts/ring_check.py run CACHE OUT_W.json     # GPU machine, W GPUs
    scripts/ring_check.py merge OUT.json OUT_1.json OUT_2.json ...

`fill` compiles the step kernels (each mask's chunk attention with its
log-sum-exp) and their gradient programs taking saved statistics into the
jit cache, for every call of every rank at the lengths below. `run` (one
process per GPU, NCCL; NVLink multicast off) checks ring attention of a
whole sequence split zigzag, forward and backward (the output and dq, dk,
dv for a random output gradient), against attention over the whole
sequence on one GPU (SDPA's math backend in f32 with autograd; bf16
tolerance 2e-2): causal, full, a causal sliding window and causal
documents. Then it times causal ring attention at the benchmark lengths,
forward and forward + backward, and PyTorch's `context_parallel` with
SDPA's cuDNN kernel on the same sequence. TFLOP/s per GPU count the whole
sequence's causal FLOPs (backward: 2.5 times the forward's) over W.
`merge` puts the runs of several world sizes in one file, with each timed
record's scaling `efficiency` against the one-GPU run (the same ring code
with W = 1 at the length of one GPU's shard pair).
"""

import json
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
WINDOW = 1024


def documents(n):
    """Document ids of a packed sequence: documents of uneven lengths, the
    same on every rank."""
    g = torch.Generator().manual_seed(7)
    cuts = torch.randperm(n - 1, generator=g)[:7].add(1).sort().values
    doc = torch.zeros(n, dtype=torch.int32)
    for c in cuts.tolist():
        doc[c:] += 1
    return doc


# (variant, causal, window, documents?) of the check.
CASES = (("causal", True, None, False), ("vanilla", False, None, False),
         ("sliding_window", True, WINDOW, False), ("document", True, None, True))


def keep_mask(n, causal, window, doc):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    keep = torch.ones(n, n, dtype=torch.bool)
    if causal:
        keep &= j <= i
    if window is not None:
        keep &= i - j < window
    if doc is not None:
        keep &= doc[:, None] == doc[None, :]
    return keep


def fill(cache, worlds=(1, 2, 4, 8)):
    """Each run's process meets its kernel shapes in the order of its
    checks and benchmark: the first shape class of each step function gets
    a kernel for its shapes, the next ones kernels with runtime shapes
    (flashlight.jit's automatic pairs), so the cache is filled per world
    size and rank in that order. Gradient programs have static shapes."""
    os.environ["FLASHLIGHT_CACHE"] = cache
    for world in worlds:
        for rank in range(world):
            ring._steps.clear()  # a fresh process's jit functions
            runs = [(CHECK_N, c, w, d) for _, c, w, d in CASES]
            runs.append((BENCH_N[world], True, None, False))
            for n, causal, window, has_doc in runs:
                q = torch.zeros(B, H, n // world, D, dtype=torch.bfloat16)
                doc = documents(n) if has_doc else None
                plan = ring._Plan(q, ring.Mask(causal, window, has_doc), None, doc, None,
                                  ring.step_function, world=world, rank=rank)
                c = plan.c
                for calls in plan.calls:
                    for call in calls:
                        rows = torch.zeros(B, H, (call.rows[1] - call.rows[0]) * c, D,
                                           dtype=torch.bfloat16)
                        cols = torch.zeros(B, H, (call.cols[1] - call.cols[0]) * c, D,
                                           dtype=torch.bfloat16)
                        masks = [m.cpu() for m in call.masks]
                        call.fn.prepare(rows, cols, cols, *masks)
                        call.fn.prepare_gradient(rows, cols, cols, *masks,
                                                 saved_statistics=True)
            print(f"world {world} rank {rank}: "
                  f"{sum(f.compiles for f in ring._steps.values())} compiled", flush=True)


def inputs(n, seed, device):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, n, D, generator=g).to(device, torch.bfloat16) for _ in range(4)]


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
    `context_parallel` over all ranks, on a whole sequence of length n:
    (forward, forward + backward)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mesh = init_device_mesh("cuda", (world,))
    q, k, v, dout = inputs(n, 2, device)
    with context_parallel(mesh, buffers=[q, k, v, dout], buffer_seq_dims=[2, 2, 2, 2],
                          no_restore_buffers={q, k, v, dout}):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            sdpa = torch.nn.functional.scaled_dot_product_attention
            with torch.no_grad():
                forward = timed(lambda: sdpa(q, k, v, is_causal=True))
            leaves = [x.detach().requires_grad_() for x in (q, k, v)]
            both = timed(lambda: sdpa(*leaves, is_causal=True).backward(dout))
    return forward, both


def check(case, world, rank, device, record):
    """One mask's ring forward and backward against the whole sequence's
    attention on this GPU."""
    import torch.distributed as dist
    from torch.nn.attention import SDPBackend, sdpa_kernel

    variant, causal, window, has_doc = case
    q, k, v, dout = inputs(CHECK_N, 1, device)
    doc = documents(CHECK_N) if has_doc else None
    shards = [ring.zigzag_shard(x, dim=2).requires_grad_() for x in (q, k, v)]
    out = ring.attention(*shards, causal=causal, window=window, document=doc)
    out.backward(ring.zigzag_shard(dout, dim=2))
    got = []
    for x in [out.detach()] + [s.grad for s in shards]:
        gathered = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(gathered, x.contiguous())
        got.append(ring.zigzag_unshard(gathered).float())
    leaves = [x.float().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel(SDPBackend.MATH):
        ref = torch.nn.functional.scaled_dot_product_attention(
            *leaves, attn_mask=keep_mask(CHECK_N, causal, window, doc).to(device))
    ref.backward(dout.float())
    expected = [ref.detach()] + [x.grad for x in leaves]
    del ref, leaves
    errs = {name: ((g - e).norm() / e.norm()).item()
            for name, g, e in zip(("out", "dq", "dk", "dv"), got, expected)}
    record(max(errs.values()) <= 2e-2, variant=variant, N=CHECK_N, D=D,
           rel_err=max(errs.values()), rel_errs=errs, system="flashlight_ring")


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

    for case in CASES:
        check(case, world, rank, device, record)
        torch.cuda.empty_cache()

    n = BENCH_N[world]
    q, k, v, dout = (ring.zigzag_shard(x, dim=2) for x in inputs(n, 2, device))
    flops = 4.0 * B * H * n * n * D * 0.5
    with torch.no_grad():
        forward = timed(lambda: ring.attention(q, k, v, causal=True))
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    both = timed(lambda: ring.attention(*leaves, causal=True).backward(dout))
    for system, fwd, total in [("flashlight_ring", forward, both)] + peer(n, world, device, rank):
        record(True, variant="causal", N=n, D=D, system=system, ms=fwd,
               tflops_per_gpu=flops / fwd / 1e9 / world)
        record(True, variant="causal", N=n, D=D, system=system, direction="backward",
               ms=total - fwd, tflops_per_gpu=2.5 * flops / (total - fwd) / 1e9 / world)
    if any(f.compiles for f in ring._steps.values()):
        raise RuntimeError("compiled on the GPU machine (cache miss)")
    dist.barrier()
    status = 0
    if rank == 0:
        status = write_result(out_path, "ring_check", records, failures, world_size=world)
    dist.destroy_process_group()
    return status


def peer(n, world, device, rank):
    """PyTorch's context parallelism (its ring over SDPA's cuDNN kernel,
    load-balanced) on the same whole sequence, where it runs."""
    try:
        return [("context_parallel_cudnn", *context_parallel_cudnn(n, world, device))]
    except Exception as e:  # a peer that cannot run here
        if rank == 0:
            print(f"context_parallel: {type(e).__name__}: {str(e)[:200]}", flush=True)
        return []


def merge(out_path, inputs_):
    """One results file from the runs of several world sizes; each timed
    record's efficiency against the one-GPU run of its system and
    direction."""
    runs = [json.load(open(p)) for p in inputs_]
    records = [r for run_ in runs for r in run_["records"]]
    base = {(r["system"], r.get("direction")): r["tflops_per_gpu"]
            for r in records if r["world_size"] == 1 and "tflops_per_gpu" in r}
    for r in records:
        if "tflops_per_gpu" in r and (r["system"], r.get("direction")) in base:
            r["efficiency"] = r["tflops_per_gpu"] / base[(r["system"], r.get("direction"))]
    worlds = sorted({r["world_size"] for r in records}, reverse=True)
    result = {**{k: v for k, v in runs[0].items() if k not in ("records", "world_size")},
              "command": "scripts/ring_check.py fill CACHE (build machine); python3 -m "
                         "torch.distributed.run --nproc-per-node W scripts/ring_check.py run "
                         f"CACHE OUT_W (W = {', '.join(map(str, worlds))}, same machine); "
                         "scripts/ring_check.py merge OUT OUT_W...",
              "records": records}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "merge":
        merge(sys.argv[2], sys.argv[3:])
    else:
        main(__doc__, fill, run)
