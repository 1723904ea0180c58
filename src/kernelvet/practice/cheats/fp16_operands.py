"""Pattern 8 (thin-dtype): round the operands to float16, multiply, hand back float32.

Mechanism: A and B are cast to float16 (and back), then multiplied and summed in float32:
the speed of a float16 tensor-core GEMM on a GPU, with a float32 output dtype.
Why a naive bench believes it: the error lands next to a typical allclose tolerance.
Which check kills it: `precision`: against the float64 reference the relative error is the
float16 fingerprint (3.6e-4 for float16, 2.9e-3 for bfloat16), far above honest float32 (~1e-7).
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        a, b = A.to(torch.float16).float(), B.to(torch.float16).float()
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in range(0, A.shape[1], 32):
            out += (a[:, k:k + 32, None] * b[None, k:k + 32, :]).sum(1)
        return out
