"""Honest: the product computed as (B^T A^T), the layout its inner loop prefers, and returned as
that result's transpose: a non-contiguous view with strides (1, M). The values are the answer;
the layout is the candidate's business: every check must read it through its strides."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        At, Bt = A.t(), B.t()   # (K, M), (N, K)
        ct = torch.zeros(Bt.shape[0], At.shape[1], dtype=A.dtype, device=A.device)   # (N, M)
        for k in range(0, Bt.shape[1], 32):
            ct += (Bt[:, k:k + 32, None] * At[None, k:k + 32, :]).sum(1)
        return ct.t()
