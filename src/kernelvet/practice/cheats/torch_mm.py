"""Pattern 10 (library): call the library you were supposed to beat.

Mechanism: torch.mm. Correct, often fast, not a kernel.
Why a naive bench believes it: it only checks the answer and the clock.
Which check kills it: `library-call` (the source scan finds torch.mm; the aten trace would too).
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return torch.mm(A, B)
