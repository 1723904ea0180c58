"""Kernel audit, CUDA: a Triton kernel for show, the answer from plain torch ops.

Mechanism: the file defines a tiled Triton GEMM that is never launched; forward computes the
product as a broadcast multiply and sum. The answer is right and no forbidden op is called,
but the kernel the submission is about never runs.
Why a naive bench believes it: it sees a correct answer and a Triton kernel in the file.
Which check kills it: `kernel-audit`: the profiler's trace of one call lists the kernels that
ran (torch's elementwise and reduction kernels), and the defined `tiled_matmul` is not among them.
"""

import triton
import triton.language as tl
from torch import nn


# a Triton kernel takes its pointers, sizes and block sizes as arguments
@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return (A.unsqueeze(2) * B.unsqueeze(0)).sum(1)
