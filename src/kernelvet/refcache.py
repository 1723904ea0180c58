"""What the judge works out about a problem before any candidate runs, kept for the next
candidate of the same problem under the same secret seed.

A vet of a KernelBench problem spends most of the judge's time on the problem, not on the
candidate: building the reference model, drawing the input sets, counting FLOPs, and computing
the float64 references (seconds on a CPU for a large problem). Many candidates of one problem
(`kernelvet batch`) share all of that through one `ReferenceCache`: `vet(..., reference=cache)`.
The candidates of one problem then see the same secret inputs, as they would under one `--seed`;
each still runs in a fresh worker of its own, which also runs and times the reference itself.
The cache holds the input sets and float64 references until `close()`: one problem at a time.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from .problem import Problem


@dataclasses.dataclass
class SharedReference:
    """One device's share of a problem: what `judge._vet` computed for its first candidate."""

    model: Any          # the reference nn.Module (float32 weights drawn from the weight seed)
    values: Any         # draws.Draws: input sets by key, drawn on first use
    flops: float | None
    judged_on: Any      # torch.device where the checks compare
    refs64: Any         # float64 references by input-set key, made on first use


class ReferenceCache:
    """The shared part of a problem's vets. `seed` (default: a fresh secret one) is every vet's
    secret seed; a vet given another seed is a usage mistake."""

    def __init__(self, problem: Problem, seed: int | None = None):
        self.problem = problem
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
        self._by_device: dict[str, SharedReference] = {}

    def get(self, device) -> SharedReference | None:
        return self._by_device.get(str(device))

    def put(self, device, shared: SharedReference) -> None:
        self._by_device[str(device)] = shared

    def close(self) -> None:
        """Stop the input draws and let the input sets and references go."""
        for shared in self._by_device.values():
            shared.values.close()
        self._by_device.clear()

    def __enter__(self) -> "ReferenceCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
