"""What the judge works out about a problem before any candidate runs, kept for the next
candidate of the same problem under the same secret seed.

A vet of a KernelBench problem spends most of the judge's time on the problem, not on the
candidate: building the reference model, drawing the input sets, counting FLOPs, and computing
the float64 references (seconds on a CPU for a large problem). Many candidates of one problem
(`kernelvet batch`) share all of that through one `ReferenceCache`: `vet(..., reference=cache)`.
The candidates of one problem then see the same secret checked inputs, as they would under one
`--seed`; the never-seen sets timed among them (the caching check's) are each vet's own, drawn
from a seed of its own: whatever one candidate could pass on to the next (a file left behind
where confinement is weak), no candidate has seen those before its vet. Each vet still runs in
a fresh worker of its own. The reference runs and is timed in the first vet's worker only,
before any candidate code runs there: what that run found (its output dtype and error, its
times, its ops, the null requests' trusted prices) is the problem's on that device, and the later
vets' workers hold the candidate alone. The cache holds the shared input sets, float64
references and that run until `close()`: one problem at a time.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import random
import threading
from typing import Any

from .problem import Problem


@dataclasses.dataclass
class SharedReference:
    """One device's share of a problem: what `judge.api._vet` computed for its first candidate."""

    model: Any          # the reference nn.Module (float32 weights drawn from the weight seed)
    values: Any         # draws.Draws: input sets by key, drawn on first use
    flops: float | None
    judged_on: Any      # torch.device where the checks compare
    refs64: Any         # float64 references by input-set key, made on first use
    weights: Any = ()   # the fresh weights the model holds, as weights.redraw returned them
    draws_on: Any = None   # the device whose generator draws the sets (None: the host's)
    sets_kept: bool = False   # the sets stay on that device (Problem.draw_inputs's keep)
    hold: Any = None   # sizes.Holding: what the problem's vets hold, and where (None: each vet decides)
    # what the reference's run in the first vet's worker found (judge.reference._run_reference's
    # answer less that worker's description of itself); None until it has run
    ref_run: Any = None


class ReferenceCache:
    """The shared part of a problem's vets. `seed` (default: a fresh secret one) is every vet's
    secret seed; a vet given another seed is a usage mistake."""

    def __init__(self, problem: Problem, seed: int | None = None):
        self.problem = problem
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self.fixed = seed is not None
        self._by_device: dict[str, SharedReference] = {}

    def get(self, device) -> SharedReference | None:
        return self._by_device.get(str(device))

    def put(self, device, shared: SharedReference) -> None:
        self._by_device[str(device)] = shared

    def reset(self) -> None:
        """Let go what the problem's vets made so far, under the same secret seed: a vet that
        failed in the harness may have left it half made, or left its device full."""
        self.close()

    def close(self) -> None:
        """Stop the input draws and let the input sets, references and model go, now. The vets'
        objects refer to them in reference cycles, which only a collection frees, and none may run
        before the next problem's vets plan their memory: on an 80 GB H100 a 4 GiB problem's
        sets and references (89 GiB of host memory) were still held when the next problem's
        first vet began, and the host ran out."""
        for shared in self._by_device.values():
            shared.values.close()
            for held in (shared.values, shared.refs64):
                held.clear()
        had = bool(self._by_device)
        self._by_device.clear()
        shared = held = None   # no local of this frame keeps the last problem from the collection
        if had:
            gc.collect()
            import torch
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()

    def __enter__(self) -> "ReferenceCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def own_sets(reference: ReferenceCache | None, key_seeds: dict, unseen, again, candidate_sha256: str) -> tuple:
    """The input-set keys a vet with a shared reference draws for itself (its never-seen sets and
    their re-measurements), their seeds replaced in `key_seeds`: fresh secret ones, or, under a
    fixed seed, ones derived from it and the candidate's bytes (a rerun draws the same)."""
    if reference is None:
        return ()
    keys = (*unseen, *(k for ks in again for k in ks))
    rng = random.Random(f"{reference.seed}/{candidate_sha256}") if reference.fixed else random.Random(os.urandom(16))
    key_seeds.update({k: rng.getrandbits(63) for k in keys})
    return keys


_DRAW_LOCK = threading.Lock()


def locked_draw(problem: Problem, seed: int, on=None, keep: bool = False) -> list:
    """One input set: a problem's shared draws and a vet's own run on two threads, and each draw
    reseeds torch's global generator, so that no two draws interleave. `on`, `keep`: Problem.draw_inputs's."""
    with _DRAW_LOCK:
        return problem.draw_inputs(seed, on, keep)


class PerVet(dict):
    """A vet's view of input sets or references by key: its own (`own`, for `own_keys`) beside
    the shared ones. `close()` closes its own draws only."""

    def __init__(self, shared, own, own_keys, shared_made=None):
        super().__init__()
        self._shared, self._own, self._own_keys = shared, own, frozenset(own_keys)
        # how this vet reads a shared key (default: the shared mapping's own lookup): the shared maker
        # is the problem's, what may be done before it is tried again is this vet's (memory_beside.py)
        self._shared_made = shared_made or shared.__getitem__

    def __missing__(self, key):
        value = self[key] = self._own[key] if key in self._own_keys else self._shared_made(key)
        return value

    def forget(self, keys) -> None:
        """Its own draws started ahead for `keys` dropped (draws.Draws.forget); the shared ones are
        the problem's."""
        forget = getattr(self._own, "forget", None)
        if forget is not None:
            forget([k for k in keys if k in self._own_keys])

    def close(self) -> None:
        close = getattr(self._own, "close", None)
        if close is not None:
            close()
