"""Pattern 1 (streams): hide the work on another stream, carefully.

Mechanism: launch the real (honest, IEEE) Triton GEMM on a private stream and return the output
at once. The private stream first waits for the caller's stream (the inputs are ready, and no
work the caller queued earlier can land on the output after it): once anyone synchronises the
device, every output is right. The caller's stream never waits for the private one, so events
recorded on it do not see the GEMM.
Why a naive bench believes it: its events only see the caller's stream (~2 us "per GEMM"), and by
the time it compares, the private stream has finished: the product is right.
Which check kills it: `streams`, and only it: the device-wide drain after the caller's end event
takes the hidden GEMM's time (calibrated against a no-call drain), and the kernel audit's trace
shows the GEMM ending after the caller's end marker. Its outputs are right, so nothing else can.
(`unordered_stream.py` is the careless version, which skips the first wait.)
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
        self.private.wait_stream(torch.cuda.current_stream(A.device))
        with torch.cuda.stream(self.private):
            kernels.matmul(A, B, out)
        return out
