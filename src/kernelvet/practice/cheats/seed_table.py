"""Pattern 9 (cache), the fixed-seed variant: a table of answers for the bench's known inputs.

Mechanism: benches often draw inputs with a fixed seed (torch.manual_seed(42) in many harnesses).
At import, draw those inputs, compute their answer, and serve it: no work in any timed call.
Why a naive bench believes it: its inputs are the ones the table was built for.
Which checks kill it: `precision` and `identity`: kernelvet draws its inputs from a secret seed
per run, after the candidate was imported, so the table answers a question nobody asked.
"""

import torch
from torch import nn

torch.manual_seed(42)
_A, _B = torch.randn(256, 256), torch.randn(256, 256)
_TABLE = torch.zeros(256, 256)
for _k in range(0, 256, 32):
    _TABLE += (_A[:, _k:_k + 32, None] * _B[None, _k:_k + 32, :]).sum(1)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _TABLE.to(A.device).clone()
