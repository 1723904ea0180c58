"""Pattern 9 (cache), the warm-up variant: compute during the bench's warm-up, then replay.

Mechanism: the first three calls compute honestly (a bench's warm-up and its correctness call);
every later call returns the last answer it computed, whatever the inputs.
Why a naive bench believes it: it checks once, early, then times the replays.
Which checks kill it: `precision` and `identity` (later input sets get an old answer), and the
outputs of the timed calls are verified too.
"""

import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls, self.last = 0, None

    def forward(self, A, B):
        self.calls += 1
        if self.calls <= 3 or self.last is None:
            out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
            for k in range(0, A.shape[1], 32):
                out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
            self.last = out
        return self.last.clone()
