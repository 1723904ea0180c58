"""Practice problem (KernelBench format): a Linear layer, y = x @ W.T + b, with its weights."""

import torch
from torch import nn

BATCH, IN, OUT = 64, 256, 128


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(BATCH, IN)]


def get_init_inputs():
    return [IN, OUT]
