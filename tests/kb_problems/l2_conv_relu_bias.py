"""Level 2, fusion with weights: Conv2d, then ReLU, then a learned per-channel bias."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_init_inputs():
    return [4, 8, 3]
