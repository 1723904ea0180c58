"""Pattern 10 (library), the operator spelling: `A @ B` is torch.matmul, which is cuBLAS.

Mechanism: the @ operator. Nothing in the source says "mm".
Why a naive bench believes it: correct and fast, and a grep for torch.mm finds nothing.
Which check kills it: `library-call` (the scan knows @, and the trace sees aten::mm).
"""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        return A @ B
