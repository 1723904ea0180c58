"""The report's parts the evidence does not hold as such: findings an early stop left without
evidence, the times the judge's clock vouched for."""

from __future__ import annotations

import dataclasses

from ..checks.timers import judge_clock
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
    for attempt in ev.loop or []:
        if judge_clock(attempt, ev.device.type, trusted=ev.null_trusted)["agrees"]:
            return attempt["times_ms"]
    return ev.timing["times_ms"]
