"""Pattern 8 (thin-dtype): TF32, the float32 that is not (Triton's default dot on a GPU).

Mechanism: keep 10 mantissa bits of each operand, as TF32 tensor cores do, and accumulate in
float32. On the CPU the rounding is emulated by masking the low 13 mantissa bits.
Why a naive bench believes it: output dtype float32, error ~8e-4 inside atol=1e-3.
Which check kills it: `precision` (TF32's fingerprint, ~7.7e-4 relative, against 1e-7 honest).
"""

import torch
from torch import nn


def _tf32(x):
    return (x.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


class ModelNew(nn.Module):
    def forward(self, A, B):
        a, b = _tf32(A), _tf32(B)
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in range(0, A.shape[1], 32):
            out += (a[:, k:k + 32, None] * b[None, k:k + 32, :]).sum(1)
        return out
