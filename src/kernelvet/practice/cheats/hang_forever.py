"""Harness integrity (worker): never return.

Mechanism: the first call sleeps forever. A harness without a deadline enforced from outside the
candidate's process waits forever, and a batch loses every verdict after it.
Which check kills it: `worker`: the judge's deadline (`--timeout`) ends it and rejects it.
"""

import time

from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        while True:
            time.sleep(60)
