"""Pattern 9 (cache), against the control requests: remember answers by content, and stall where
a stall prices the misses away.

Mechanism: `content_cache`'s table of answers keyed by a fingerprint of the values, plus a watch
on the worker's requests (the `msg` of the frame that serves them). On the first call of a
request, a hit sleeps as long as computing took: the judge prices a request's own cost from a
control request's first rep (a copy of seen values, which a memo answers from memory), so a memo
that stalls there looks as slow on its controls as on new inputs, and net of that price is not
slower on new inputs at all. Every other call is a lookup.
Why a naive bench believes it: it times the same inputs over and over; every timed call is a hit.
Which check kills it: `caching`, alone: a control's price is capped at a few of the call's seen
reps, so the stall cannot cover a miss that costs many lookups.
CPU only: on a GPU the fingerprint's host round trip costs more than a 256^3 multiply saves.
"""

import sys
import time

import torch
from torch import nn

_answers = {}
_last = {"request": None, "compute_s": 0.0}


def _fingerprint(A, B):
    return (tuple(A.shape), tuple(B.shape), float(A.sum()), float(B.sum()), float(A[::7].sum()),
            float(B[:, ::5].sum()))


def _request():
    """The request the worker is answering: the `msg` local of the frame that serves it."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "serve" and "msg" in frame.f_locals:
            return id(frame.f_locals["msg"])
        frame = frame.f_back
    return None


def _product(A, B):
    out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
    for k in range(0, A.shape[1], 32):
        out += (A[:, k:k + 32, None] * B[None, k:k + 32, :]).sum(1)
    return out


class ModelNew(nn.Module):
    def forward(self, A, B):
        request = _request()
        first, _last["request"] = request != _last["request"], request
        key = _fingerprint(A, B)
        hit = _answers.get(key)
        if hit is None:
            t0 = time.perf_counter()
            hit = _answers[key] = _product(A, B)
            _last["compute_s"] = time.perf_counter() - t0
        elif first:
            time.sleep(_last["compute_s"])
        return hit
