"""Honest (CUDA): an autotuned Triton float32 GEMM (configs benchmarked on the first call of a
shape, the winner cached by shape). Autotuning is a plan cache: `caching` must pass it."""

import torch
import triton
from torch import nn

from kernelvet.practice import kernels


class ModelNew(nn.Module):
    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        out = torch.empty(M, N, dtype=torch.float32, device=A.device)
        grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))  # noqa: E731
        kernels.matmul_autotuned[grid](A, B, out, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                                       out.stride(0), out.stride(1), IEEE=True)
        return out
