"""Honest (CUDA): a Triton row softmax, one program per row. Must pass everything."""

from torch import nn

from kernelvet.practice import kernels


class ModelNew(nn.Module):
    def forward(self, x):
        return kernels.softmax(x)
