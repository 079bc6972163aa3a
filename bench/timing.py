"""The benchmarks' timer: triton.testing.do_bench with Python's garbage
collector run before each timing and kept off during it.

A collection inside a timing (earlier rounds' autograd graphs and tensors
freed while the GPU runs the timed calls) made every third or fourth round
of a `bench/backward.py --compare` cell 3-8 % slower, which biased A B B A
comparisons toward the build timed in the middle rounds; with collections
kept out, eight alternating rounds of identical kernels agreed within 1 %
(docs/benchmarks, the --compare caveat).
"""

import gc

import torch


def timed(call, warmup, rep, return_mode="mean"):
    """do_bench's time of `call` in ms, no garbage collection inside."""
    from triton.testing import do_bench

    gc.collect()
    torch.cuda.synchronize()
    gc.disable()
    try:
        return do_bench(call, warmup=warmup, rep=rep, return_mode=return_mode)
    finally:
        gc.enable()
