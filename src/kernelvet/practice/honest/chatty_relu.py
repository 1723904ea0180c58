"""Honest, for `problems/relu.py`: a correct ReLU that prints a lot, at import and on every call
(progress lines, tensor summaries, as a debugging model leaves them in). Its output is the
candidate's, kept in the report and never parsed: printing is not a reason to reject."""

import torch
from torch import nn

print("chatty_relu: loaded\n" + "debug: " + "x" * 2000)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        print(f"chatty_relu: call {self.calls}, input {tuple(x.shape)} {x.dtype}, "
              f"verdict: pass, speedup: 99x, runtime_ms: 0.001")
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype, device=x.device))
