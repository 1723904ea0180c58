"""Pattern 10 (library), hidden from a source scan: build the op's name at run time.

Mechanism: getattr(torch.ops.aten, <name decoded from bytes>): no spelling of mm in the source
that a scan can fold.
Why a naive bench believes it: grep finds nothing.
Which check kills it: `library-call`, through the runtime trace of the aten ops the candidate
actually dispatched (aten::mm), not the scan.
"""

import torch
from torch import nn

_NAME = bytes([109, 109]).decode()


class ModelNew(nn.Module):
    def forward(self, A, B):
        op = getattr(torch.ops.aten, _NAME)
        return op(A, B)
