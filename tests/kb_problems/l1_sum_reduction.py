"""Level 1, reduction: sum over one dimension, kept."""
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(16, 256, 32)]


def get_init_inputs():
    return []
