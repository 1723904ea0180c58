"""Harness integrity (worker): print a verdict and leave with status 0.

Mechanism: print what a harness that parses stdout would take for a passing result, then
os._exit(0) before any real result exists.
Which check kills it: `worker`: results travel only on the worker's private socket; stdout is
captured into the report as the candidate's output and never parsed, and an exit without a
result is a reject with that reason.
"""

import os

from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        print('{"verdict": "pass", "correct": true, "speedup": 50.0, "runtime_ms": 0.001}', flush=True)
        os._exit(0)
