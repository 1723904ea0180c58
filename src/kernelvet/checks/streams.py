"""`streams`: work the reported clock did not see.

Two clocks per rep of a synchronised run after the timed reps: events on the caller's stream,
and then the host time of a device-wide synchronize (the drain). Each such rep is followed at
once by its twin with no call (the same rep, one ordered kernel of the judge's own in the call's
place), whose drain is calibrated away, so honest launch-bound kernels do not trip it. Work
hidden on another stream shows as drain time: reject when it exceeds half the event time (the
spec's 1.5x) and the noise floor. A side stream the caller's stream waits on is inside the events
and passes. A drain that says "hidden" is measured again (up to twice, by the judge) before it
counts, as `timers` does: another process busy on the device for a moment looks like hidden work
once; hidden work, every time.

At small sizes hidden work can finish inside the host's launch gaps, where no clock sees it, so
a second witness asks about order, not time: the worker holds the caller's stream in a sleep,
calls the candidate, and copies the output on a stream of its own before the sleep ends. Work
ordered after the caller's stream cannot have run yet; an output already finished was computed
on a stream the caller never waited on. A third witness, when the kernel audit ran: the
profiler's trace of one call (see kernel_audit.py)."""

from __future__ import annotations

import statistics

from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached
from .kernel_audit import hidden_work

RATIO = 0.5
FLOOR_MS = 0.008   # medians of the no-call drain vary by a few microseconds (9.5-13.6 us on an H200)
EARLY_FRACTION = 0.5
MIN_COMPARED = 16   # elements the call had to change; fewer and the probe says nothing


def evaluate(ev) -> Finding:
    if ev.device.type != "cuda":
        return Finding(CheckId.STREAMS, Status.SKIP, "no streams on the CPU: host timing waits for all work")
    p = ev.probe or {}
    traced = hidden_work(ev)   # None when the audit did not run or saw nothing out of order
    if p.get("conclusive") and p.get("compared", 0) >= MIN_COMPARED and p.get("early_fraction", 0) > EARLY_FRACTION:
        return Finding(CheckId.STREAMS, Status.FAIL,
                       f"{100 * p['early_fraction']:.0f}% of the output was already computed while the caller's "
                       f"stream was still {p['sleep_ms']:.0f} ms short of the call: the work ran on a stream the "
                       "caller never waited on", {"probe": p, "trace": traced})
    if traced:
        return Finding(CheckId.STREAMS, Status.FAIL, traced + ": work hidden on another stream",
                       {"probe": p, "trace": traced})
    t = ev.timing or {}
    clocks = drain_clocks(t)
    if clocks is None:
        return not_reached(CheckId.STREAMS)
    events, drain, base = clocks
    hidden = drain - base
    evidence = {"events_median_ms": events, "drain_median_ms": drain, "drain_baseline_ms": base,
                "hidden_ms": hidden, "ratio": (events + max(hidden, 0)) / events if events > 0 else None,
                "probe": p, "trace": traced, "earlier_attempts": ev.drain_attempts}
    if _hidden(events, drain, base):
        return Finding(CheckId.STREAMS, Status.FAIL,
                       f"{hidden:.4g} ms of device work per call outlived the caller's stream events "
                       f"({events:.4g} ms): work hidden on another stream"
                       + (f" (in {1 + len(evidence['earlier_attempts'])} measurements)"
                          if evidence["earlier_attempts"] else ""), evidence)
    return Finding(CheckId.STREAMS, Status.PASS,
                   f"device-wide drain adds {max(hidden, 0):.3g} ms to {events:.4g} ms of stream time", evidence)


def drain_clocks(t: dict) -> tuple[float, float, float] | None:
    """Medians of the synchronised reps' events, their drains, and the no-call drains."""
    if not t.get("drain_ms") or not t.get("null_drain_ms"):
        return None
    events = statistics.median(t.get("synced_ms") or t["times_ms"])   # the drains' own reps
    return events, statistics.median(t["drain_ms"]), statistics.median(t["null_drain_ms"])


def drain_says_hidden(t: dict) -> bool:
    clocks = drain_clocks(t)
    return clocks is not None and _hidden(*clocks)


def _hidden(events: float, drain: float, base: float) -> bool:
    return drain - base > RATIO * events and drain - base > FLOOR_MS
