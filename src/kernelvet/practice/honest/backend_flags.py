"""Honest: the flags a tuned kernel file often sets at import, `cudnn.benchmark = True` (pick
the fastest algorithm) and `allow_tf32 = False` for cuDNN and matmul (keep float32 math). Neither
can lower precision, so `global-state` must pass it; the matmul itself is a plain blocked sum."""

import torch
from torch import nn

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in range(0, A.shape[1], 64):
            out += (A[:, k:k + 64, None] * B[None, k:k + 64, :]).sum(1)
        return out
