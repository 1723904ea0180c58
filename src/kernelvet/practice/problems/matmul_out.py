"""Practice problem (KernelBench format, with an output buffer): C = A @ B written into C.

`OUTPUT_ARG = 2` tells kernelvet that the third input is the output buffer: each input set owns
one, and it is painted with poison (and fenced by guard bands) before every call, because a
buffer that survives between calls is exactly where a kernel that launches nothing finds
yesterday's answer.
"""

import torch
from torch import nn

M = N = K = 256
OUTPUT_ARG = 2


class Model(nn.Module):
    def forward(self, A, B, C):
        return torch.matmul(A, B, out=C)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N), torch.empty(M, N)]


def get_init_inputs():
    return []
