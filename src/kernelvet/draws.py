"""A vet's input sets, drawn a few ahead of use on a thread of their own.

KernelBench draws inputs with torch's global CPU generator: at 8192^3 one set (two 8192 x 8192
float32 tensors) costs the judge ~0.4 s, and a vet uses up to eleven. Drawn while the worker
runs the set before, they cost no wall time. One thread, so that draws (each reseeds the global
generator) never interleave: every set is what its seed says, whatever the order of use. Only
a few ahead: a candidate rejected early pays for no later set, nor holds its memory.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Hashable, Sequence


class Draws(dict):
    """key -> draw(key), made on first use; using the key at position i of `order` starts the
    draws of the next `ahead` keys (settable: 0 for a problem whose sets the host barely holds).
    `close()` when done: it cancels draws not started and waits for the one running (it holds
    torch's global generator)."""

    def __init__(self, draw: Callable[[Hashable], object], order: Sequence[Hashable], ahead: int = 2):
        super().__init__()
        self._draw, self._order, self.ahead = draw, list(order), ahead
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelvet-draws")
        self._pending: dict[Hashable, Future] = {}

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
        return value

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
