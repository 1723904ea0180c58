"""Pattern 4 (timers): replace the timer.

Mechanism: at import, overwrite time.perf_counter, perf_counter_ns and CUDA event timing so that
every measured interval looks tiny. The multiply itself is honest.
Why a naive bench believes it: it reads whatever the patched clock says.
Which check kills it: `timers` (the clock bindings taken before import no longer match).
"""

import time

import torch
from torch import nn

_real_ns = time.perf_counter_ns
_scale = 1000


def _fast_ns():
    return _real_ns() // _scale


time.perf_counter_ns = _fast_ns
time.perf_counter = lambda: _fast_ns() / 1e9
torch.cuda.Event.elapsed_time = lambda self, end: 0.001


class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in range(0, A.shape[1], 32):
            out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        return out
