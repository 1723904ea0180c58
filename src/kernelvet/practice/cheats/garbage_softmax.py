"""Pattern 7 (garbage): launch too few programs and let memory nobody wrote pass for softmax.

Mechanism: a Triton softmax launched over only half the rows. The other rows are whatever the
allocator's block held, often an earlier softmax: values in [0, 1], rows summing to 1.
Why a naive bench believes it: a loose allclose over thousands of classes green-checks noise that
is shaped like a softmax.
Which checks kill it: `unwritten-output` (the painted poison is still there); with painting off,
`precision` and `determinism` (the garbage is the wrong softmax, and it moves between runs).
"""

import torch
from torch import nn

from kernelvet.practice import kernels


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        return kernels.softmax(x, out, rows=x.shape[0] // 2)
