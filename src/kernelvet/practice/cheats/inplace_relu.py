"""Harness integrity (inputs-unchanged): compute in place, in the caller's input. For `problems/relu.py`.

Mechanism: clamp the input tensor in place and return it: no allocation, no extra write traffic.
ReLU is idempotent, so every later call still returns the right answer.
Why a naive bench believes it: the output is right; it never looks at its inputs again.
Which check kills it: `inputs-unchanged` (inputs are compared bitwise before and after each call).
"""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_(min=0)
