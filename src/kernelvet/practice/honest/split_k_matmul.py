"""Honest: split-K matmul. K is cut into four slices whose partial products are computed
independently (as split-K GEMMs spread them over blocks), then summed in a fixed order, slice
0 first: the same bits on every run, so `determinism` must pass it."""

import torch
from torch import nn

SPLITS = 4


def _partial(A, B, lo, hi):
    acc = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
    for k in range(lo, hi, 32):
        acc += (A[:, k:min(k + 32, hi), None] * B[None, k:min(k + 32, hi), :]).sum(1)
    return acc


class ModelNew(nn.Module):
    def forward(self, A, B):
        K = A.shape[1]
        bounds = [K * i // SPLITS for i in range(SPLITS + 1)]
        parts = [_partial(A, B, lo, hi) for lo, hi in zip(bounds, bounds[1:])]
        out = parts[0]
        for p in parts[1:]:   # fixed order, never atomics
            out = out + p
        return out
