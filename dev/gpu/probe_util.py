"""Helpers shared by the GPU probe scripts (perf/gpu/probe_*.py), imported from their own directory."""
import time

import torch


def timed(fn, reps=20, warmup=1):
    """Milliseconds per call of fn() on the GPU: `warmup` calls, then the mean of `reps` between two syncs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps * 1e3
