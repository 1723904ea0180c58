"""Level 1, pooling: MaxPool2d."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(2, stride=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(4, 8, 32, 32)]


def get_init_inputs():
    return []
