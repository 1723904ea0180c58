"""Pattern 9 (cache): memoise on data_ptr(). For the built-in `softmax`.

Mechanism: key a cache on the input pointers. PyTorch recycles allocations, so across bench reps
the pointers stay still and every timed call is a hit; a fresh tensor (new pointer) misses once,
so a correctness check on fresh inputs still passes.
Why a naive bench believes it: its timed reps reuse the same tensors.
Which check kills it: `caching`: the same storages are overwritten in place with new values and
the call returns yesterday's answer (and inputs it has not seen are far slower than seen ones).
Where the judge holds a big problem lean, a fresh set can land in the storage a released set left,
and the cache gives it that set's answer: wrong on fresh inputs, named by `precision` first.
A hit returns `hit * 1`: a kernel runs on every call, so a profiler's trace shows device work.
"""

import torch
from torch import nn

_cache = {}


class ModelNew(nn.Module):
    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape), x.dtype)
        hit = _cache.get(key)
        if hit is None:
            m = x.max(dim=-1, keepdim=True).values
            e = torch.exp(x - m)
            hit = e / e.sum(dim=-1, keepdim=True)
            _cache[key] = hit
        return hit * 1
