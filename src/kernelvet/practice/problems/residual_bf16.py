"""Practice problem (KernelBench format): a small bfloat16 residual update, out = x + s * (a @ b).

The update is about one bfloat16 ulp of x, so a copy of x lands inside a bfloat16 tolerance:
exactly the case where only the `identity` check tells a copy from the answer.
"""

import torch
from torch import nn

M, N, K = 256, 256, 64
SCALE = 5e-4


class Model(nn.Module):
    def forward(self, x, a, b):
        return x + SCALE * torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, N, dtype=torch.bfloat16), torch.randn(M, K, dtype=torch.bfloat16),
            torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
