"""Practice problem (KernelBench format): a linear layer, y = x W^T + b, with nn.Linear's own
weights (both models are built under the same seed, as KernelBench builds them)."""

import torch
from torch import nn

BATCH, IN, OUT = 128, 256, 192


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(BATCH, IN)]


def get_init_inputs():
    return [IN, OUT]
