"""Honest, for `problems/residual_bf16.py`: the update computed in float32 and rounded once."""

import torch
from torch import nn

SCALE = 5e-4


class ModelNew(nn.Module):
    def forward(self, x, a, b):
        af, bf = a.float(), b.float()
        upd = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
        for k in range(0, a.shape[1], 32):
            upd += (af[:, k:k + 32, None] * bf[None, k:k + 32, :]).sum(1)
        return (x.float() + SCALE * upd).to(torch.bfloat16)
