"""Pattern 9 (cache): memoise on data_ptr().

Mechanism: key a cache on the input pointers. PyTorch recycles allocations, so across bench reps
the pointers stay still and every timed call is a hit; a fresh tensor (new pointer) misses once,
so a correctness check on fresh inputs still passes.
Why a naive bench believes it: its timed reps reuse the same tensors.
Which check kills it: `caching`: the same storages are overwritten in place with new values and
the call returns yesterday's answer (and unseen inputs are far slower than seen ones).
"""

import torch
from torch import nn

_cache = {}


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = (A.data_ptr(), B.data_ptr(), tuple(A.shape), tuple(B.shape))
        hit = _cache.get(key)
        if hit is None:
            hit = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
            for k in range(0, A.shape[1], 32):
                hit += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
            _cache[key] = hit
        return hit.clone()
