"""Honest (CUDA): a tiled Triton float32 GEMM with an IEEE dot (no TF32). Must pass everything."""

from torch import nn

from kernelvet.practice import kernels


class ModelNew(nn.Module):
    def forward(self, A, B):
        return kernels.matmul(A, B, ieee=True)
