"""Honest, for `problems/matmul_out.py`: writes every element of the output buffer, every call."""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B, C):
        C.zero_()
        for k in range(0, A.shape[1], 32):
            C += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        return C
