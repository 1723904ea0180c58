"""`inputs-unchanged`: the candidate does not write into its inputs (bitwise, before vs after each call).
A kernel that scribbles over its inputs corrupts the caller's data and can smuggle state between calls."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached


def evaluate(ev) -> Finding:
    observed = [c for c in ev.calls if c.meta]
    if not observed:
        return not_reached(CheckId.INPUTS_UNCHANGED)
    for c in observed:
        if c.meta.get("inputs_changed"):
            return Finding(CheckId.INPUTS_UNCHANGED, Status.FAIL,
                           f"the {c.phase} call rewrote input(s) {c.meta['inputs_changed']}",
                           {"phase": c.phase, "inputs": c.meta["inputs_changed"]})
    return Finding(CheckId.INPUTS_UNCHANGED, Status.PASS, f"inputs bitwise unchanged by {len(observed)} calls",
                   {"calls": len(observed)})
