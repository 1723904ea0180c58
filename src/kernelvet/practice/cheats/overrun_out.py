"""Harness integrity (unwritten-output, guard bands): write past the end of the output buffer.
For `problems/matmul_out.py`.

Mechanism: a tiled kernel that rounds the tile count up and does not mask the last tile, so it
writes a few hundred elements beyond the buffer it was given (here, through the buffer's storage).
The answer inside the buffer is right.
Why a naive bench believes it: it only reads the elements it asked for.
Which check kills it: `unwritten-output`: the guard bands painted around the buffer lost their
poison.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B, C):
        C.zero_()
        for k in range(0, A.shape[1], 32):
            C += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        spill = torch.empty(0, dtype=C.dtype, device=C.device).set_(
            C.untyped_storage(), C.storage_offset() + C.numel(), (256,))
        spill.zero_()
        return C
