"""Practice problem (KernelBench format): ReLU of a 1024x1024 float32 tensor.

ReLU is idempotent, so a kernel that overwrites its input in place still returns the right
answer on every later call: only `inputs-unchanged` sees it.
"""

import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
