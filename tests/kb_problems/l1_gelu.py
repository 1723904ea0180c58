"""Level 1, activation: GELU (erf form)."""
import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
