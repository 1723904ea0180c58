"""Honest: online softmax (one pass keeps a running row maximum and a running sum rescaled as
the maximum grows, as flash-attention kernels do), then a second pass normalises. Equal to the
two-pass softmax up to rounding: `precision` must pass it."""

import torch
from torch import nn

BLOCK = 512


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        m = torch.full((rows, 1), float("-inf"), dtype=x.dtype, device=x.device)
        s = torch.zeros(rows, 1, dtype=x.dtype, device=x.device)
        for c in range(0, cols, BLOCK):
            blk = x[:, c:c + BLOCK]
            m_new = torch.maximum(m, blk.amax(dim=-1, keepdim=True))
            s = s * torch.exp(m - m_new) + torch.exp(blk - m_new).sum(dim=-1, keepdim=True)
            m = m_new
        return torch.exp(x - m) / s
