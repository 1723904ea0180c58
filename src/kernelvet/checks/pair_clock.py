"""`caching`'s seen/unseen pairs by the judge's clock: the worker's pair times are its word.

A candidate that rewrites the worker's reply to a pair request (its `_time_unseen`, say) can report
the unseen rep of a value-keyed memo at its seen rep's time: on CPU such a memo passed every check
at "5.1x". The judge brackets each pair request (an unseen set carried, its rep, a seen rep) and
each control request (the same, carrying a copy of seen values) with its own clock, from its send
to its reply (the judge's own copy of the set into the buffer it lends outside), and prices the
same request without the candidate (a null pair request: the set carried, two reps' own work,
an output of the call's shape sent back), in the candidate's worker and held to the price the
reference's worker paid (as timers holds its null requests). What is left of a request is its two
calls and the cold start of a request's first rep:
    unseen request:  first rep price + unseen call + seen call
    control request: first rep price + call on seen values + seen call
The seen call is the unit: the larger of the reported median and the judge's own per-call time of
the timing request (timers.request_clock; a host-bound CUDA call costs its host's pace there, not
its device time). The run's controls, by their median, price the first rep (on CUDA held to
CLOCK_PRICE_CAP units: a memo that stalls its hits in a request's first rep would price its misses
away), and what is left of the unseen request is the judge's unseen rep. It must stay within
UNSEEN_RATIO units, beyond the noise of a request's own cost (PAIR_FLOOR_S, PAIR_JITTER of the null
pair request, and the spread of the run's controls: a request carrying a big set costs its copies,
which vary from one request to the next), in all pairs but one.
What the judge's clock cannot see: a memo saving less per call than about PAIR_FLOOR_S and the
controls' spread (there the worker's pair times stand), and one that rewrites the worker's reply
and also stalls its hits in the control's first rep, on a host clock at all, on CUDA while a miss
costs less than about CLOCK_PRICE_CAP + UNSEEN_RATIO of its hits (SECURITY.md)."""

from __future__ import annotations

import math
import statistics

from . import timers

# The noise of one pair request against its twin, beyond what the null request prices: a round
# trip, a set's placement, an output sent back, and on a host clock a thread pool waking.
PAIR_FLOOR_S = {"cuda": 0.25e-3, "cpu": 2e-3}
PAIR_JITTER = 0.25
# The most the control's two reps may exceed two units by (its first rep's price), in units. On
# a host clock, none: an honest CPU matmul's pair requests read 14x its timing run's median per
# rep on a 2-core host, so a control made slow on purpose cannot be told from one the host made
# slow. On CUDA, 8 (caching.CONTROL_PRICE_CAP, for the worker's own split of a request's reps, is 4).
CLOCK_PRICE_CAP = {"cuda": 8.0, "cpu": math.inf}


def unit_s(ev) -> float | None:
    """A seen call's cost in s: the reported median, or the judge's per-call time of the timing
    request where larger. None without a priced timing request (timers waived): nothing to scale by."""
    times = (ev.timing or {}).get("times_ms") or []
    if not times or not ev.null_timing or not ev.clocked_timing:
        return None
    judged = [timers.request_clock(r, ev.null_timing, ev.device.type, ev.null_trusted)["judge_per_call_ms"]
              for r in timers.judged_requests(ev.clocked_timing)]
    return max(statistics.median(times), min(judged, default=0.0)) / 1e3


def null_pair_s(measured: float, trusted: dict | None, lead_ms: float) -> tuple[float, bool]:
    """The null pair request's price in s, held to timers.NULL_CAP x the trusted one (plus a slack
    and the two reps' lead spin, which the trusted request ran without); and whether it was."""
    if not trusted:
        return measured, False
    cap = (timers.NULL_CAP * max(trusted["judge_s"] - (trusted.get("main_wait_s") or 0.0), 0.0)
           + timers.NULL_SLACK_S + 2 * lead_ms / 1e3)
    return (cap, True) if measured > cap else (measured, False)


def judged_pairs(clocks: list[dict], unit: float, trusted: dict | None, lead_ms: float,
                 device_type: str) -> list[dict]:
    """Each pair by the judge's clock (ms): the unseen rep it leaves, and the bound on it. The
    bound widens by the spread of the run's controls (each held to its cap, `_spread`): what the
    same request, on values the candidate has seen, varied by in this run (on a 2-core host an
    honest ReLU's pair requests of a 16 MB set varied by 30 ms)."""
    from .caching import UNSEEN_FLOOR_MS, UNSEEN_RATIO
    floor = UNSEEN_FLOOR_MS[device_type] / 1e3
    # nor more than the cheapest control less two seen calls: that request carried the same set
    # and made at least those calls (on the H200, one null pair request read 1-2 ms over what
    # honest pair requests left for their calls)
    least = min((c["control_s"] for c in clocks), default=0.0) - 2 * unit
    priced = []
    for c in clocks:
        null, capped = null_pair_s(c["null_s"], trusted, lead_ms)
        null = max(min(null, least), 0.0)
        control = min(max(c["control_s"] - null, 0.0), (2 + CLOCK_PRICE_CAP[device_type]) * unit + floor)
        priced.append((null, capped, control))
    spread = _spread([p[2] for p in priced])
    # the first rep's price is the run's: its controls' median (one the host slowed prices
    # nothing away from its own pair; caching.net_pairs reads the worker's controls alike)
    control = statistics.median(p[2] for p in priced) if priced else 0.0
    out = []
    for c, (null, capped, _) in zip(clocks, priced):
        first = max(control - 2 * unit, 0.0)
        unseen = c["unseen_s"] - null - unit - first
        bound = UNSEEN_RATIO * unit + PAIR_FLOOR_S[device_type] + PAIR_JITTER * null + spread
        call = _new_call(c["unseen_s"] - null, control, first, bound - UNSEEN_RATIO * unit, lead_ms / 1e3, device_type)
        out.append({"unseen_ms": unseen * 1e3, "bound_ms": bound * 1e3, "first_rep_price_ms": first * 1e3,
                    "call_ms": call * 1e3,
                    "null_ms": null * 1e3, "null_capped": capped, "control_spread_ms": spread * 1e3,
                    "slower": unseen > bound})
    return out


def _new_call(unseen: float, control: float, first: float, noise: float, lead: float, device_type: str) -> float:
    """A call on values never seen, in s, from an unseen request (`unseen`, less the null) beside its
    control (`control`, its two calls on seen values, priced as above), beyond the pair's `noise` and
    the reps' lead spins (CUDA: time before each call): no report of the candidate's makes it
    shorter. Two readings, the larger counts: the unseen request's two calls halved (what a worker
    that stalls its controls still pays), and the unseen request less half its control (the call
    on new values alone: a memo's miss, where its hit is what the control's calls cost). The first
    rep's price comes off only up to the pair floor (an honest one: 0.07-0.25 ms on a host clock,
    up to 0.3 ms on the H200): the control prices it in units of the reported median, which a
    forger shrinks."""
    price = min(first, PAIR_FLOOR_S[device_type])
    both = (unseen - price - noise - 2 * lead) / 2
    alone = unseen - control / 2 - price / 2 - noise - lead
    return max(both, alone)


def _spread(controls: list[float]) -> float:
    """How much the controls varied: twice their median's lead over the least. The host only adds
    time, so the lower half of the controls tells what the request itself varies by, and moments
    when the host slowed a few of them widen no pair's bound."""
    if not controls:
        return 0.0
    return 2 * (statistics.median(controls) - min(controls))


def least_ms(judged: list[dict], device_type: str) -> float | None:
    """The least time per call a report may rank by, from the pairs' calls on new values by the
    judge's clock (their median: one slow moment of the host raises nothing): a worker that runs
    fewer calls than the judge's loop asks for, and reports the times to match, still pays one
    call on new values per pair request; and a kernel that remembers answers is ranked by what
    it costs on inputs it has not seen."""
    if not judged:
        return None
    return timers.least_ms(statistics.median(j["call_ms"] for j in judged), device_type)


def remembers(judged: list[dict]) -> bool:
    """All but caching.SPARED_PAIRS pairs' unseen reps, by the judge's clock, beyond their bound:
    the host's noise only adds time, to some requests; a memo's misses are in every one."""
    from .caching import enough
    return bool(judged) and enough(sum(j["slower"] for j in judged), len(judged))


def of(ev, clocks: list[dict] | None = None) -> list[dict]:
    """`ev`'s pairs (or `clocks`, an earlier run's) by the judge's clock; [] where they cannot be judged."""
    unit = unit_s(ev)
    clocks = ev.pair_clocks if clocks is None else clocks
    if unit is None or not clocks:
        return []
    lead_ms = float((ev.timing or {}).get("lead_ms", 0.0))
    return judged_pairs(clocks, unit, (ev.null_trusted or {}).get("pair"), lead_ms, ev.device.type)
