"""Harness integrity (worker): end the process with status 0 before any result exists.

Mechanism: os._exit(0) in the first call. A harness that trusts exit codes records a success.
Which check kills it: `worker` (exit 0 without a result is a reject with that reason).
"""

import os

from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        os._exit(0)
