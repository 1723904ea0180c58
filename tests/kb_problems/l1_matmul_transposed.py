"""Level 1, matmul with a transposed operand: C = A.T @ B."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(48, 32), torch.randn(48, 40)]


def get_init_inputs():
    return []
