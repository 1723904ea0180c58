"""Honest: a plan cache keyed on shape and dtype (block size chosen once per shape), computing
every call from the inputs. `caching` must pass it: plans may be cached, answers may not."""

import torch
from torch import nn

_plans = {}


def _plan(m, n, k, dtype):
    key = (m, n, k, dtype)
    if key not in _plans:
        _plans[key] = 64 if k % 64 == 0 else 16 if k % 16 == 0 else 1
    return _plans[key]


class ModelNew(nn.Module):
    def forward(self, A, B):
        block = _plan(A.shape[0], B.shape[1], A.shape[1], A.dtype)
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in range(0, A.shape[1], block):
            out += (A[:, k:k + block, None] * B[None, k:k + block, :]).sum(1)
        return out
