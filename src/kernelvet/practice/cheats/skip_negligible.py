"""Pattern 6 (no-op) / 7: leave "negligible" outputs unwritten. For the built-in `softmax`.

Mechanism: allocate the output with torch.empty and write only the probabilities that matter
(logit within 20 of the row max); the rest are left as whatever memory held, trusting it to be
zero or small. Fresh pages from the OS are zero, so on a bench that never poisons memory the
result is within 1e-8 of the answer.
Why a naive bench believes it: the unwritten entries happen to be 0 and the true ones ~1e-9.
Which check kills it: `unwritten-output`: the memory was painted with a secret poison before the
call, and thousands of elements still hold it.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        m = x.max(dim=-1, keepdim=True).values
        keep = x > m - 20.0
        e = torch.exp(torch.where(keep, x - m, torch.full_like(x, -1e30)))
        p = e / e.sum(dim=-1, keepdim=True)
        out[keep] = p[keep]
        return out
