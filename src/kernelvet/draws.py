"""A vet's input sets, drawn a few ahead of use on a thread of their own.

KernelBench draws inputs with torch's global CPU generator: at 8192^3 one set (two 8192 x 8192
float32 tensors) costs the judge ~0.4 s, and a vet uses up to eleven. Drawn while the worker
runs the set before, they cost no wall time. One thread, so that draws (each reseeds the global
generator) never interleave: every set is what its seed says, whatever the order of use. Only
a few ahead: a candidate rejected early pays for no later set, nor holds its memory.

A set let go and asked for again is drawn again from its seed (a big problem's judge keeps no
set it need not: judge/lean.py). It must come out as it first did: a few of each tensor's first
and last elements are kept from the first draw and compared, and a set that differs is the
harness's failure, never a finding against a candidate judged on other inputs than it was given.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Hashable, Sequence

import torch

from .errors import HarnessError

PRINT_ELEMENTS = 64   # of each end of each tensor, kept from a set's first draw
AHEAD = 2             # sets drawn ahead of use, where the plan has room for them


class Draws(dict):
    """key -> draw(key), made on first use; using the key at position i of `order` starts the
    draws of the next `ahead` keys (settable: 0 for a problem whose sets the host barely holds).
    `close()` when done: it cancels draws not started and waits for the one running (it holds
    torch's global generator)."""

    def __init__(self, draw: Callable[[Hashable], object], order: Sequence[Hashable], ahead: int = AHEAD):
        super().__init__()
        self._draw, self._order, self.ahead = draw, list(order), ahead
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelvet-draws")
        self._pending: dict[Hashable, Future] = {}
        self._prints: dict[Hashable, tuple] = {}   # key -> its first draw's fingerprint

    def _start(self, key) -> None:
        if key not in self and key not in self._pending:
            self._pending[key] = self._pool.submit(self._draw, key)

    def __missing__(self, key):
        self._start(key)
        if key in self._order:
            i = self._order.index(key)
            for nxt in self._order[i + 1:i + 1 + self.ahead]:
                self._start(nxt)
        value = self[key] = self._pending.pop(key).result()   # a draw's exception is raised here
        self._same_as_first(key, value)
        return value

    def _same_as_first(self, key, value) -> None:
        got = _fingerprint(value)
        first = self._prints.setdefault(key, got)
        if got != first:
            raise HarnessError(f"input set {key!r}, drawn again from its seed, came out different from its "
                               "first draw (the generator's state was not the seed's alone)")

    def forget(self, keys) -> None:
        """Draws started ahead for `keys`, which the caller will not ask for after all, dropped:
        held, each would stay beside the `ahead` sets a plan counts until `close`."""
        for k in keys:
            pending = self._pending.pop(k, None)
            if pending is not None:
                pending.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()


def _fingerprint(values) -> tuple:
    """A set's dtypes, shapes and the bytes of a few of each tensor's first and last elements."""
    if isinstance(values, torch.Tensor):
        values = [values]
    if not isinstance(values, (list, tuple)):
        return (values,)
    out = []
    for x in values:
        if isinstance(x, torch.Tensor):
            flat = x.detach().reshape(-1)
            ends = torch.cat([flat[:PRINT_ELEMENTS], flat[-PRINT_ELEMENTS:]]).cpu()
            out.append((str(x.dtype), tuple(x.shape), ends.view(torch.uint8).numpy().tobytes()))
        else:
            out.append(x)
    return tuple(out)
