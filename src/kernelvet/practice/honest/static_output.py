"""Honest: one output buffer, allocated on the first call and overwritten by every later call
(the static output of CUDA-graph style code). The caller's previous output changes when it calls
again; KernelBench accepts that, so by default `aliasing` records it and passes, and
`determinism` must not mistake the overwritten outputs for other bits."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._out = None

    def forward(self, A, B):
        shape = (A.shape[0], B.shape[1])
        if self._out is None or self._out.shape != shape or self._out.dtype != A.dtype:
            self._out = torch.empty(shape, dtype=A.dtype, device=A.device)
        out = self._out
        out.zero_()
        for k in range(0, A.shape[1], 32):
            out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        return out
