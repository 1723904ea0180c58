"""Honest: a matmul split over a thread pool created lazily on the first call and kept for the
next ones; every future is joined (`result()`) before return. The pool's threads stay alive,
idle on their queue: a live thread is not work after return, so `threads` must pass it."""

import concurrent.futures

import torch
from torch import nn

_pool = None


def _rows(out, A, B, lo, hi):
    for k in range(0, A.shape[1], 32):
        out[lo:hi] += (A[lo:hi, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)


class ModelNew(nn.Module):
    def forward(self, A, B):
        global _pool
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        half = A.shape[0] // 2
        futures = [_pool.submit(_rows, out, A, B, lo, hi) for lo, hi in ((0, half), (half, A.shape[0]))]
        for f in futures:
            f.result()
        return out
