"""Honest: 3xTF32-style split precision, with bfloat16 as the thin format. Each float32 operand
is split into a bfloat16-representable high part and the float32 remainder, and the product is
hi*hi + hi*lo + lo*hi (the lo*lo term is below float32's resolution). Products of the parts are
exact in float32 and accumulate in float32, so the result has float32 accuracy although most of
the work is on thin operands: `precision` judges the error, and must pass it."""

import torch
from torch import nn


def _split(x):
    hi = x.to(torch.bfloat16).to(torch.float32)
    return hi, x - hi


def _mm(A, B):
    out = torch.zeros(A.shape[0], B.shape[1], dtype=torch.float32, device=A.device)
    for k in range(0, A.shape[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return out


class ModelNew(nn.Module):
    def forward(self, A, B):
        a_hi, a_lo = _split(A)
        b_hi, b_lo = _split(B)
        return _mm(a_hi, b_hi) + (_mm(a_hi, b_lo) + _mm(a_lo, b_hi))
