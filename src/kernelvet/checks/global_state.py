"""`global-state`: process-wide settings and the harness itself are as they were before import.

Backend flags (TF32, reduced-precision reductions, cuDNN), default dtype, deterministic mode,
torch function/dispatch mode stacks, tracers, the dispatcher tables of the ops the harness uses,
and the identity of the harness's own modules and functions."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import first_seen, not_reached


def evaluate(ev) -> Finding:
    if not ev.integrity:
        return not_reached(CheckId.GLOBAL_STATE)
    phase, changed = first_seen(ev.integrity, "changed")
    if changed:
        keys = sorted(changed)
        return Finding(CheckId.GLOBAL_STATE, Status.FAIL,
                       f"the candidate changed process state (first seen after {phase}): {', '.join(keys[:6])}",
                       {"phase": phase, "changed": {k: changed[k] for k in keys[:20]}})
    return Finding(CheckId.GLOBAL_STATE, Status.PASS, f"process state unchanged across {len(ev.integrity)} phases",
                   {"phases_checked": len(ev.integrity)})
