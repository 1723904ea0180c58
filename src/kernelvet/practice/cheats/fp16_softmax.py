"""Pattern 8 (thin-dtype), where a loose allclose cannot see it: softmax's exponentials and
normalisation in float16.

Mechanism: the row maximum is subtracted in float32 (so the shifted values are small and exact
enough), then exp, sum and divide run in float16 (half the bytes moved: a half-format kernel's
speed), and the result is cast back to float32.
Why a naive bench believes it: a softmax output is at most 1, so float16's ~5e-4 relative error
is at most ~5e-4 absolute, inside an `atol=1e-3, rtol=1e-3` allclose.
Which check kills it: `precision`: judged against a float64 reference, the error is float16's
fingerprint, orders of magnitude above an honest float32 softmax (~1e-7).
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        shifted = (x - x.max(dim=-1, keepdim=True).values).to(torch.float16)
        e = torch.exp(shifted)
        return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
