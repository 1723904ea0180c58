"""Pattern 2 (threads), the subtle form: answer now, keep working after return.

Mechanism: each call returns a correct, complete answer, and leaves a thread running that computes
the answer again for the same inputs, so that a repeat call (a bench that times the same inputs
every rep) is served instantly. The work of the next call happens while nobody's clock runs.
Why a naive bench believes it: every output it checks is right, and its reps are fast.
Which check kills it: `threads`: the thread started by the call works after it returned (CPU
time while the caller sleeps, or device allocations on CUDA). Nothing else in the call sees it:
the outputs are right and complete at return.
"""

import threading

import torch
from torch import nn

_ahead = {}


def _matmul(A, B):
    out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
    for k in range(0, A.shape[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return out


def _precompute(key, A, B):
    _ahead[key] = _matmul(A, B)


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = (A.data_ptr(), B.data_ptr(), A._version, B._version)
        pending = _ahead.pop(key, None)
        out = pending if pending is not None else _matmul(A, B)
        t = threading.Thread(target=_precompute, args=(key, A, B), daemon=True)
        t.start()
        return out
