"""Level 1, loss with a scalar output: cross entropy over class logits."""
import torch
from torch import nn
from torch.nn import functional as F


class Model(nn.Module):
    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(128, 10), torch.randint(0, 10, (128,))]


def get_init_inputs():
    return []
