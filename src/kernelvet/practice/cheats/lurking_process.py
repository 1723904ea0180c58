"""Pattern 2 (threads), as a process: leave a helper process running after the call.

Mechanism: the call computes honestly, but starts a child process that outlives it, parked to
interfere with whatever runs next (the next candidate's reference timing, a shared GPU) or to
finish work off the clock. The output is complete and right at return.
Why a naive bench believes it: it only looks at outputs and its own clock.
Which check kills it: `threads` (child processes alive after the call that were not before).
One child, left by the first call: a child per call would pile up over the timed reps until the
harness ends the worker as a fork bomb (`worker`), a second catcher.
"""

import subprocess
import sys

import torch
from torch import nn

_lurkers = []


class ModelNew(nn.Module):
    def forward(self, A, B):
        if not _lurkers:
            _lurkers.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in range(0, A.shape[1], 32):
            out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
        return out
