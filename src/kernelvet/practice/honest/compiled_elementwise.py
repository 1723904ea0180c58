"""Honest, for `problems/relu.py`: the ReLU written as a plain function and handed to
`torch.compile` (Inductor generates and compiles the kernel on first call). The harness's own
aten trace must not be traced by Dynamo along with it."""

import torch
from torch import nn


@torch.compile(dynamic=False)
def _relu(x):
    return torch.where(x > 0, x, 0.0)


class ModelNew(nn.Module):
    def forward(self, x):
        return _relu(x)
