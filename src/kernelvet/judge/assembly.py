"""The report's parts the evidence does not hold as such: findings an early stop left without
evidence, the times the judge's clock vouched for and the least it allows."""

from __future__ import annotations

import dataclasses

from ..checks import pair_clock, timers
from ..evidence import Evidence
from ..report import Status


def _mark_not_run(findings: list, ev: Evidence) -> tuple:
    """After an early stop, a check left without evidence says why it has none."""
    stopped = ev.extra.get("stopped_after")
    if not stopped:
        return tuple(findings)
    return tuple(dataclasses.replace(f, summary=f"not run: kernelvet stopped early, after {stopped} had "
                                     f"rejected the candidate at {ev.extra['stopped_at']}")
                 if f.status is Status.SKIP and f.evidence.get("not_reached") else f for f in findings)


def _vouched_times(ev: Evidence) -> list[float]:
    """The reported times are those the judge's clock agreed with (a re-measurement, if the first
    disagreed), so that a candidate cannot report one run and be vouched for by another."""
    attempt, _ = _agreed(ev)
    return attempt["times_ms"] if attempt else ev.timing["times_ms"]


def _agreed(ev: Evidence) -> tuple[dict | None, dict | None]:
    """The first judge-clocked loop attempt that agreed with its reported times, and the verdict."""
    for attempt in ev.loop or []:
        verdict = timers.judge_clock(attempt, ev.device.type, trusted=ev.null_trusted)
        if verdict["agrees"]:
            return attempt, verdict
    return None, None


def _judge_least_ms(ev: Evidence) -> float | None:
    """The least time per call the judge's clocks allow the reported times: from the loop whose
    attempt they came from, from the timing requests (the least of them: their reps ran, unless the
    worker skipped them), and from the unseen pair requests' calls (which ran on values never seen);
    the largest. Each is what a worker that forged the others still pays."""
    found = [pair_clock.least_ms(pair_clock.of(ev), ev.device.type)]
    judged = timers.judged_requests(ev.clocked_timing)
    if ev.null_timing and judged:
        clocked = [timers.request_clock(r, ev.null_timing, ev.device.type, ev.null_trusted) for r in judged]
        # less the lead spin before each CUDA rep: time the device spent before the call, not in it
        found.append(min(timers.least_ms(c["judge_per_call_ms"] - c["lead_per_call_ms"], ev.device.type)
                         for c in clocked))
    _, verdict = _agreed(ev)
    if verdict:
        found.append(verdict["least_ms"])
    found = [x for x in found if x is not None]
    return max(found) if found else None
