"""Honest: matmul split over two threads that are joined before returning. `threads` must pass it."""

import threading

import torch
from torch import nn


def _rows(out, A, B, lo, hi):
    for k in range(0, A.shape[1], 32):
        out[lo:hi] += (A[lo:hi, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)


class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        half = A.shape[0] // 2
        workers = [threading.Thread(target=_rows, args=(out, A, B, lo, hi))
                   for lo, hi in ((0, half), (half, A.shape[0]))]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        return out
