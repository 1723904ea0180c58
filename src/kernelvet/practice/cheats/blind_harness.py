"""Harness integrity (global-state): blind the harness's comparisons, then scribble on the input.

Mechanism: register a kernel for aten::equal that always answers True (so "are the inputs
unchanged?" always says yes), then compute ReLU in place in the input. For `problems/relu.py`.
Why a naive bench believes it: the output is right, and its own comparisons now lie for it.
Which check kills it: `global-state`: the dispatcher table of aten::equal is not the one it was
before import. (Without that check the in-place write goes unseen: `inputs-unchanged` is blind.)
"""

import torch
from torch import nn

_lib = torch.library.Library("aten", "IMPL")
for _key in ("CPU", "CUDA"):
    _lib.impl("equal", lambda a, b: True, _key)


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_(min=0)
