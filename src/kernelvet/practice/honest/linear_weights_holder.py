"""Honest, for `problems/linear.py`: `nn.Linear` kept in `__init__` only to hold the weights.

The layer is never called: the product is the candidate's own (a blocked multiply and sum over
the weight the layer holds), so nothing of the library's contraction dispatches. The source names
`nn.Linear`; what dispatches decides, and the name is evidence only. Holding the weights in the
reference's own module keeps their names, shapes and initialisation the reference's.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)   # the weights' holder, never called

    def forward(self, x):
        w, b = self.fc.weight, self.fc.bias
        out = b.expand(x.shape[0], w.shape[0]).clone()
        for k in range(0, x.shape[1], 32):
            out += (x[:, None, k:k + 32] * w[None, :, k:k + 32]).sum(-1)
        return out
