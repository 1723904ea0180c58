"""Honest: row softmax through workspaces taken from `torch.empty` (row maxima, exponentials,
row sums), each fully written before it is read. The harness fills what `torch.empty` hands
out with poison; nothing of it may survive into the output, and nothing does."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        rows = x.shape[0]
        row_max = torch.empty(rows, 1, dtype=x.dtype, device=x.device)
        torch.amax(x, dim=-1, keepdim=True, out=row_max)
        e = torch.empty_like(x)
        torch.exp(x - row_max, out=e)
        total = torch.empty(rows, 1, dtype=x.dtype, device=x.device)
        torch.sum(e, dim=-1, keepdim=True, out=total)
        out = torch.empty_like(x)
        torch.div(e, total, out=out)
        return out
