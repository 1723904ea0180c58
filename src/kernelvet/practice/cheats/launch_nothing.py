"""Pattern 6 (no-op): launch nothing and let the output buffer hold the answer.
For `problems/matmul_out.py`, whose output buffer is passed in and kept by the caller.

Mechanism: compute once per set of inputs (same pointers, same version counters), then return
the caller's output buffer untouched: it still holds the answer from the last call on those
inputs. A bench that reuses buffers between reps sees a right answer in no time at all.
Why a naive bench believes it: the bytes it compares are right; they are just not this call's.
Which check kills it: `unwritten-output`: before every call the buffer is painted with a secret
NaN payload (and fenced with guard bands), and the "answer" comes back as that poison.
"""

import torch
from torch import nn


def _matmul_into(A, B, C):
    C.zero_()
    for k in range(0, A.shape[1], 32):
        C += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return C


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.done = set()

    def forward(self, A, B, C):
        key = (A.data_ptr(), B.data_ptr(), C.data_ptr(), A._version, B._version)
        if key not in self.done:
            self.done.add(key)
            _matmul_into(A, B, C)
        return C
