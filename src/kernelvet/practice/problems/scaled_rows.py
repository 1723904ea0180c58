"""Practice problem (KernelBench format): a float32 matmul whose rows span eight decades of scale.

Row i of A is scaled by 10**(-8 u), u uniform: the output's norm is carried by its largest rows,
and its smallest rows weigh nothing in a norm-wise error. Honest float32 work is as accurate,
row for row, at every scale; only a bound per row sees what is done to the small ones.
"""

import torch
from torch import nn

M, N, K = 256, 256, 256


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    scale = 10.0 ** (-8.0 * torch.rand(M, 1))
    return [torch.randn(M, K) * scale, torch.randn(K, N)]


def get_init_inputs():
    return []
