"""Harness integrity (worker): kill the evaluator, then hang.

Mechanism: kill os.getppid() (the process that started us), then sleep. A harness whose worker is
its own child dies with it and leaves no verdict.
Which check kills it: `worker`. Our worker's parent is the launcher, not the judge: the judge
survives. The worker dies with its launcher (PR_SET_PDEATHSIG), so the judge sees it vanish at
once and rejects it; a fresh launcher serves the next vet.
"""

import os
import signal
import time

from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(3600)
