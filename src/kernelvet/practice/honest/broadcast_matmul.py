"""Honest: matmul as a blocked broadcast-multiply-and-sum, float32 throughout. Must pass everything."""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in range(0, A.shape[1], 32):
            out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        return out
