"""Pattern 1 (streams): hide the work on another stream, carelessly.

Mechanism: launch the real (honest, IEEE) Triton GEMM on a private stream that is ordered after
nothing, and return the output before that stream has done anything. Events recorded on the
caller's stream do not wait for it.
Why a naive bench believes it: its events only see the caller's stream (1.3 us "per GEMM"), and
by the time it compares, the private stream has finished: the product is eventually right.
Which checks kill it: `streams`: holding the caller's stream before the call, the worker finds
the output already computed (work ordered after the caller's stream could not have run yet); at
4096^3 the drain clock too. Not alone: the GEMM can also run before work the caller queued ahead
of the call (kernelvet's paint of the allocator's free blocks, while the timed reps keep the
caller's stream busy), which then overwrites it; those timed outputs fail `unwritten-output` and
`determinism` as well. (`hidden_stream.py` is the careful version.)
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
