"""`worker`: the candidate's process ended normally and answered every request.

Crash, signal, `os._exit`, timeout, protocol violation, or an exception from candidate code:
all are a reject with the reason, never a judge that dies with it.
"""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status


def evaluate(ev) -> Finding:
    if ev.worker_end:
        return Finding(CheckId.WORKER, Status.FAIL, f"worker ended abnormally: {ev.worker_end}",
                       {"reached": sorted(ev.reached)})
    if ev.candidate_error:
        e = ev.candidate_error
        return Finding(CheckId.WORKER, Status.FAIL, f"candidate code raised while {e['error']}",
                       {"phase": e["phase"], "traceback": e["traceback"][-2000:]})
    return Finding(CheckId.WORKER, Status.PASS, "worker answered every request",
                   {"reached": sorted(ev.reached)})
