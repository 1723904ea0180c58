"""Honest: row softmax as max, exp, sum, divide (numerically stable). Must pass everything."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        m = x.max(dim=-1, keepdim=True).values
        e = torch.exp(x - m)
        return e / e.sum(dim=-1, keepdim=True)
