"""`timers`: the clocks are the real ones, and the reported time accounts for the judge's clock.

(1) Host clocks, device events and syncs bound in the worker before import are compared with
    what those names point to after import and after every phase: any rebinding is a reject.
(2) The judge, whose clock the candidate cannot reach, brackets N back-to-back calls ending in a
    device-wide sync, and the same N calls of a null function, with its wall clock and with the
    CPU time /proc accounts to the worker (the smaller of the two: a busy machine inflates one,
    many threads the other). Per call, the difference must be accounted for by the reported time:
    at most RATIO times it plus a fixed host slack for launch cost. A machine that got busy between
    the two measurements can fake a gap, so a failing comparison is measured again (reported time
    and loop, back to back) up to twice, and the best agreement counts: a forger fails every time. A candidate that reports 0.001 ms for calls that take milliseconds is rejected even if
    every binding looks untouched (it edited the worker's measurements, say)."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import first_seen, not_reached

# Honest calls were seen up to 4x slower back to back than per rep (multi-threaded BLAS on a busy
# 2-core machine); forgers claim 50x or 1000x. 8x sits between.
RATIO = 8.0
# Per-call host cost a launch-bound call may add: back to back, such a call runs at the host's pace,
# not the device's. On the H200's host one Triton launch (with a flush and two event records) paced
# 48-118 us per rep across runs, the pace moving with the host's load from minute to
# minute; a hidden-stream GEMM at 256^3 (1.9 us reported) read 86 us per call on the judge's clock,
# all of it launch cost. 0.15 ms covers one launch at the slowest pace seen; 0.06 ms failed honest
# tiny kernels (~2-3 us reported) whenever the host was slow.
SLACK_MS = {"cuda": 0.15, "cpu": 0.05}


def evaluate(ev) -> Finding:
    phase, moved = first_seen(ev.integrity, "moved")
    if moved:
        return Finding(CheckId.TIMERS, Status.FAIL, f"clock bindings replaced by the candidate "
                       f"(first seen after {phase}): {', '.join(moved)}", {"moved": moved, "phase": phase})
    if not ev.integrity:
        return not_reached(CheckId.TIMERS)
    if not ev.loop:
        return Finding(CheckId.TIMERS, Status.PASS, "clock bindings unchanged (the judge-clock loop did not run)",
                       {"phases_checked": len(ev.integrity)})
    attempts = [judge_clock(a, ev.device.type) for a in ev.loop]
    best = min(attempts, key=lambda a: a["judge_per_call_ms"] / a["bound_ms"])
    evidence = {**best, "attempts": attempts}
    if best["judge_per_call_ms"] > best["bound_ms"]:
        return Finding(CheckId.TIMERS, Status.FAIL,
                       f"the judge's clock saw {best['judge_per_call_ms']:.4g} ms per call, the candidate's timing "
                       f"reported {best['reported_ms']:.4g} ms: the reported time does not account for the work"
                       f" ({len(attempts)} attempts)", evidence)
    return Finding(CheckId.TIMERS, Status.PASS, f"bindings unchanged; judge clock {best['judge_per_call_ms']:.4g} ms "
                   f"per call vs reported {best['reported_ms']:.4g} ms", evidence)


def judge_clock(attempt: dict, device_type: str) -> dict:
    """One judge-clocked loop against the reported time measured just before it."""
    n = attempt["n"]
    wall = max(attempt["judge_s"] - attempt["null_s"], 0.0) / n * 1e3
    cpu = None
    if attempt.get("cpu_s") is not None and attempt.get("null_cpu_s") is not None:
        cpu = max(attempt["cpu_s"] - attempt["null_cpu_s"], 0.0) / n * 1e3
    per_call = min(wall, cpu) if cpu is not None else wall
    return {"reported_ms": attempt["reported_ms"], "judge_per_call_ms": per_call, "judge_wall_per_call_ms": wall,
            "judge_cpu_per_call_ms": cpu, "bound_ms": RATIO * attempt["reported_ms"] + SLACK_MS[device_type],
            "n": n}
