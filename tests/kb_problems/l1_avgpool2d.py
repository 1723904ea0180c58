"""Level 1, pooling: AvgPool2d."""
import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.avg_pool2d(x, 3, stride=1, padding=1)


def get_inputs():
    return [torch.randn(4, 8, 32, 32)]


def get_init_inputs():
    return []
