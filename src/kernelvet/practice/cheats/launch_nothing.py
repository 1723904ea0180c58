"""Pattern 6 (no-op): launch nothing and hope the allocator hands back the answer.

Mechanism: when called again on the same inputs as last time (same pointers, same version
counters), allocate the output and launch nothing. PyTorch's caching allocator hands back the
block it just got back, which still holds the previous (right) answer: a bench that times the
same inputs every rep sees a correct result in no time.
Why a naive bench believes it: the bytes it compares are right; they are just not this call's.
Which check kills it: `unwritten-output`: before every call the free blocks are painted with a
secret NaN payload, and the "answer" is that poison.
"""

import torch
from torch import nn

from kernelvet.practice import kernels


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, A, B):
        key = (A.data_ptr(), B.data_ptr(), A._version, B._version)
        out = torch.empty(A.shape[0], B.shape[1], dtype=torch.float32, device=A.device)
        if key != self.last:
            kernels.matmul(A, B, out)
        self.last = key
        return out
