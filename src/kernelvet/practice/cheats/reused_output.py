"""Harness contract (aliasing): hand every caller the same output storage.

Mechanism: one buffer, allocated once, is computed into and returned by every call, so the
output the caller got from the previous call is overwritten by this one. Honest under the
default contract (KernelBench accepts a static output); under a contract that says outputs are
the caller's (`--reused-output reject`: a caller that keeps outputs across calls, as a training
loop collecting them or a bench that checks every timed output after the run), it is a breach.
Why a naive bench believes it: it checks one output at a time, right after its call.
Which check kills it: `aliasing` under `reused_output = "reject"`: the worker keeps the earlier
outputs alive, and the call returns one of their storages anyway. Nothing else sees it: every
output is right when it returns.
"""

import torch
from torch import nn

_out = {}


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = (A.shape[0], B.shape[1], A.dtype, A.device)
        out = _out.get(key)
        if out is None:
            out = _out[key] = torch.empty(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        out.zero_()
        for k in range(0, A.shape[1], 32):
            out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        return out
