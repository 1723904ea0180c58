"""Honest, for `problems/linear.py`: the weight and bias declared by hand as parameters and
initialised exactly as nn.Linear initialises them (Kaiming-uniform weight, uniform bias in
+-1/sqrt(in)), in the same order, so that under the reference's seed they are the reference's
weights; the product is the candidate's own blocked sum."""

import math

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(in_features)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        wt = self.weight.t()
        out = self.bias.expand(x.shape[0], -1).clone()
        for k in range(0, x.shape[1], 32):
            out += (x[:, k:k + 32, None] * wt[None, k:k + 32, :]).sum(1)
        return out
