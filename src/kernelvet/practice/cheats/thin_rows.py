"""Pattern 8 (thin-dtype), by the row: spend float32 only where the norm can see it.

Mechanism: rank the output rows by the scale of A's rows; zero the smallest 21% outright, compute
the next 40% from bfloat16 operands, and only the rest in float32. On `problems/scaled_rows.py`
the skipped and thinned rows carry almost none of the output's norm.
Why a naive bench believes it: a norm-wise comparison (relative Frobenius error, or an allclose
whose atol is generous next to the small rows) stays at honest float32 levels.
Which check kills it: `precision`, by its per-row bound: each row's error relative to its own
reference row is held to the dtype's bound (157 of 256 rows are off by more than 1e-4 here), where
honest float32 work is as accurate on a row of 1e-8 as on a row of 1.
"""

import torch
from torch import nn


def _product(a, b):
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    for k in range(0, a.shape[1], 32):
        out += (a[:, k:k + 32, None] * b[None, k:k + 32, :]).sum(1)
    return out


class ModelNew(nn.Module):
    def forward(self, A, B):
        order = torch.argsort(A.abs().amax(dim=1))      # smallest rows first
        m = A.shape[0]
        zero, thin = order[:int(0.21 * m)], order[int(0.21 * m):int(0.61 * m)]
        full = order[int(0.61 * m):]
        out = torch.zeros(m, B.shape[1], dtype=torch.float32, device=A.device)
        out[thin] = _product(A[thin].to(torch.bfloat16).float(), B.to(torch.bfloat16).float())
        out[full] = _product(A[full], B)
        return out
