"""Pattern 7 (garbage that moves between runs): accumulate partial sums in arbitrary order.

Mechanism: split K into 16 chunks and add the partial products into the output in whatever
order they come (shuffled here, as atomics or unsynchronised blocks would on a GPU), skipping the
ordered reduction. Each result is close to the answer, but not the same bits twice.
Why a naive bench believes it: it compares one run with allclose.
Which check kills it: `determinism`: two launches on identical inputs differ bitwise. (A kernel
that is nondeterministic by design is accepted only with an explicit --allow determinism.)
"""

import random

import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        K = A.shape[1]
        step = max(K // 16, 1)
        chunks = list(range(0, K, step))
        random.shuffle(chunks)
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        for k in chunks:
            out += (A[:, k:k + step, None] * B[None, k:k + step, :]).sum(1)
        return out
