"""Pattern 1 (streams): hide the work on another stream.

Mechanism: launch the real (honest, IEEE) Triton GEMM on a private stream and return the output
before that stream has done anything. Events recorded on the caller's stream do not wait for it.
Why a naive bench believes it: its events only see the caller's stream (1.3 us "per GEMM"), and
by the time it compares, the private stream has finished: the product is eventually right.
Which check kills it: `streams`: a device-wide synchronize after the caller's end event takes the
hidden GEMM's time (calibrated against a no-call drain), far more than half the event time.
"""

import torch
from torch import nn

from kernelvet.practice import kernels


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.private = None

    def forward(self, A, B):
        if self.private is None:
            self.private = torch.cuda.Stream(device=A.device)
        out = torch.empty(A.shape[0], B.shape[1], dtype=torch.float32, device=A.device)
        with torch.cuda.stream(self.private):
            kernels.matmul(A, B, out)
        return out
