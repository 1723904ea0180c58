"""Level 1, batched matmul: C[b] = A[b] @ B[b]."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(4, 24, 32), torch.randn(4, 32, 16)]


def get_init_inputs():
    return []
