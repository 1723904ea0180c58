"""Pattern 9 (cache), keyed on content: remember answers by a fingerprint of the inputs' values.

Mechanism: a few sums over the inputs (microseconds next to the multiply) key a table of answers;
a hit returns the remembered output. New values make a new fingerprint, so every input it has not
seen is computed, and rightly: the overwrite-in-place test and every output check pass.
Why a naive bench believes it: it times the same inputs over and over; every timed call is a hit.
Which check kills it: `caching`, alone: timed once each among the seen reps, inputs it has never
seen are many times slower than the seen ones, pair for pair, run after run.
CPU only: on a GPU the fingerprint's host round trip costs more than a 256^3 multiply saves.
"""

import torch
from torch import nn

_answers = {}


def _fingerprint(A, B):
    return (tuple(A.shape), tuple(B.shape), float(A.sum()), float(B.sum()), float(A[::7].sum()),
            float(B[:, ::5].sum()))


class ModelNew(nn.Module):
    def forward(self, A, B):
        key = _fingerprint(A, B)
        hit = _answers.get(key)
        if hit is None:
            hit = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
            for k in range(0, A.shape[1], 32):
                hit += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
            _answers[key] = hit
        return hit
