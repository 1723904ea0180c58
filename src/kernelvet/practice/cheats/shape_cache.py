"""Pattern 9 (cache), naive form: functools.lru_cache keyed on the shape.

Mechanism: compute the first answer for a shape, serve it for every later call of that shape.
Why a naive bench believes it: it checks one input, then times the same input.
Which checks kill it: `precision` (the second input set gets the first set's answer) and
`identity` (outputs of different inputs are identical). Caught by two checks by design.
"""

import functools

import torch
from torch import nn

_last = {}


@functools.lru_cache(maxsize=None)
def _answer(shape_a, shape_b):
    A, B = _last["A"], _last["B"]
    out = torch.zeros(shape_a[0], shape_b[1], dtype=A.dtype, device=A.device)
    for k in range(0, shape_a[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return out


class ModelNew(nn.Module):
    def forward(self, A, B):
        _last.update(A=A, B=B)
        return _answer(tuple(A.shape), tuple(B.shape)).clone()
