"""Level 1, convolution: Conv1d, no bias."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, k, bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(4, 8, 64)]


def get_init_inputs():
    return [8, 16, 5]
