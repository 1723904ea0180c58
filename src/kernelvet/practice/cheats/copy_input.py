"""Pattern 5 (identity): copy an input to the output. For `problems/residual_bf16.py`.

Mechanism: out = x + s * (a @ b), with an update of about one bfloat16 ulp; return x and skip
the matrix product entirely.
Why a naive bench believes it: x is within a bfloat16 allclose of the answer (and a bench that
reuses buffers, or shapes that make an input look like the product, make it worse).
Which check kills it: `identity`: the output sits at distance 0 from input x, where the true
answer is a full update away (the precision bound alone cannot see it). It returns `x * 1`, not a
copy: a kernel runs, so a profiler's trace of the call shows device work (on CUDA the kernel audit
would otherwise catch it too, for computing nothing on the device).
"""

from torch import nn


class ModelNew(nn.Module):
    def forward(self, x, a, b):
        return x * 1
