"""`timers`: the clocks are the real ones, and the reported time accounts for the judge's clock.

(1) Host clocks, device events and syncs bound in the worker before import are compared with
    what those names point to after import and after every phase: any rebinding is a reject.
(2) The judge, whose clock the candidate cannot reach, brackets N back-to-back calls ending in a
    device-wide sync, and the same N calls of a null function. Per call, the difference must be
    accounted for by the reported time: at most RATIO times it plus a fixed host slack for launch
    cost. A candidate that reports 0.001 ms for calls that take milliseconds is rejected even if
    every binding looks untouched (it edited the worker's measurements, say)."""

from __future__ import annotations

import statistics

from ..ids import CheckId
from ..report import Finding, Status
from ._common import first_seen, not_reached

RATIO = 3.0
SLACK_MS = {"cuda": 0.06, "cpu": 0.05}   # per-call host cost a launch-bound call may add


def evaluate(ev) -> Finding:
    phase, moved = first_seen(ev.integrity, "moved")
    if moved:
        return Finding(CheckId.TIMERS, Status.FAIL, f"clock bindings replaced by the candidate "
                       f"(first seen after {phase}): {', '.join(moved)}", {"moved": moved, "phase": phase})
    if not ev.integrity:
        return not_reached(CheckId.TIMERS)
    times = (ev.timing or {}).get("times_ms") or []
    if not ev.loop or not times:
        return Finding(CheckId.TIMERS, Status.PASS, "clock bindings unchanged (the judge-clock loop did not run)",
                       {"phases_checked": len(ev.integrity)})
    reported = statistics.median(times)
    n = ev.loop["n"]
    per_call = max(ev.loop["judge_s"] - ev.loop["null_s"], 0.0) / n * 1e3
    bound = RATIO * reported + SLACK_MS[ev.device.type]
    evidence = {"reported_ms": reported, "judge_per_call_ms": per_call, "bound_ms": bound, "n": n,
                "judge_s": ev.loop["judge_s"], "null_s": ev.loop["null_s"]}
    if per_call > bound:
        return Finding(CheckId.TIMERS, Status.FAIL,
                       f"the judge's clock saw {per_call:.4g} ms per call, the candidate's timing reported "
                       f"{reported:.4g} ms: the reported time does not account for the work", evidence)
    return Finding(CheckId.TIMERS, Status.PASS, f"bindings unchanged; judge clock {per_call:.4g} ms per call "
                   f"vs reported {reported:.4g} ms", evidence)
