"""Pattern 2 (threads): return now, compute on a worker thread.

Mechanism: allocate the output, start a thread that fills it, return the empty tensor at once.
Why a naive bench believes it: its clock stops at return, and if its correctness check is slow
enough the thread has finished by then. Which check kills it: `threads` sees the thread working
after the call returned, and an output that changed after return.
"""

import threading

import torch
from torch import nn


def _matmul_into(out, A, B):
    out.zero_()
    for k in range(0, A.shape[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)


class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.empty(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        threading.Thread(target=_matmul_into, args=(out, A, B), daemon=True).start()
        return out
