"""Level 2, fusion with weights: a transposed convolution, a bias, then clamps around a scale. Most
outputs sit at a clamp's bound, so the same values recur across input sets."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, cin, cout, k, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(cin, cout, k, stride=2, padding=1, output_padding=1)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1))
        self.scale = scale

    def forward(self, x):
        x = torch.clamp(self.conv_transpose(x) + self.bias, min=0.0, max=1.0)
        return torch.clamp(x * self.scale, min=0.0, max=1.0) / self.scale


def get_inputs():
    return [torch.randn(16, 3, 32, 32)]


def get_init_inputs():
    return [3, 16, 3, 2.0]
