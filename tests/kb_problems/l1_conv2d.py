"""Level 1, convolution: Conv2d with weights and bias."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 16, 16)]


def get_init_inputs():
    return [4, 8, 3]
