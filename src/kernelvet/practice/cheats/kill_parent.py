"""Harness integrity (worker): kill the evaluator, then hang.

Mechanism: kill os.getppid() (the process that started us), then sleep. A harness whose worker is
its own child dies with it and leaves no verdict.
Which check kills it: `worker`. Our worker's parent is the launcher, not the judge: the judge
survives, sees the worker go silent, and rejects it when the deadline passes.
"""

import os
import signal
import time

from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(3600)
