"""Pattern 8 (thin-dtype), the accidental one: Triton's default float32 dot is TF32.

Mechanism: the same tiled GEMM as the honest one, without `input_precision="ieee"`: operands are
rounded to 10 mantissa bits on the tensor cores. Output dtype float32, about 7x the FLOP rate.
Why a naive bench believes it: output dtype matches; the error (~8e-4) sits inside atol=1e-3.
Which check kills it: `precision` (TF32's fingerprint against the float64 reference).
"""

from torch import nn

from kernelvet.practice import kernels


class ModelNew(nn.Module):
    def forward(self, A, B):
        return kernels.matmul(A, B, ieee=False)
