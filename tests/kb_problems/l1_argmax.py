"""Level 1, reduction with an integer output: argmax over one dimension."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(16, 128, 32)]


def get_init_inputs():
    return []
