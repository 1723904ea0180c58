"""Level 1, matrix-vector product: y = A @ x, x of shape (K, 1)."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, A, x):
        return torch.matmul(A, x)


def get_inputs():
    return [torch.randn(128, 256), torch.randn(256, 1)]


def get_init_inputs():
    return []
