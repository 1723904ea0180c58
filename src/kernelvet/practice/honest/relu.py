"""Honest, for `problems/relu.py`: out-of-place ReLU."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype, device=x.device))
