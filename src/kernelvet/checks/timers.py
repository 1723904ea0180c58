"""`timers`: the clocks are the real ones, and the reported time accounts for the judge's clock.

(1) Host clocks, device events and syncs bound in the worker before import are compared with
    what those names point to after import and after every phase: any rebinding is a reject.
(2) The judge, whose clock the candidate cannot reach, brackets N back-to-back calls ending in a
    device-wide sync, and the same N calls of a null function, with its wall clock and with the
    CPU time /proc accounts to the worker (the smaller of the two: a busy machine inflates one,
    many threads the other). Per call, the difference must be accounted for by the reported time:
    at most RATIO times it plus a fixed host slack for launch cost. A machine that got busy between
    the two measurements can fake a gap, so a failing comparison is measured again (reported time
    and loop, back to back) up to twice, and the best agreement counts: a forger fails every time
    (a loop seen skipping its calls is cleared only by one long enough for a skip to show). A
    candidate that reports 0.001 ms for calls that take milliseconds is rejected even if every
    binding looks untouched (it edited the worker's measurements, say).
(3) Every timing request of the candidate is bracketed by the judge's clocks too, and so is the
    same request with a null function in the call's place (a rep's own cost: inputs read, paint,
    flush, and the work on an output of the call's shape: its copy, its bitwise check). The
    request's duration, less its warm-up and the reps' own cost, per call, must be accounted for
    by the reported median as in (2): a recorder that shrinks the times it is handed fails here
    even when every call ran. And a loop far faster than the reported time
    (a loop that skipped its calls) fails (2) from below.
(4) What (2) and (3) subtract, the null requests, run in the candidate's worker, which can slow
    them to hide its own work in them: each may cost at most NULL_CAP times its price taken while
    the worker held only the reference (judge/null_prices.py), plus a slack. A null request held
    to its cap says the host was busy (its threads waited for a core) or the worker slowed it:
    a comparison that fails only so is inconclusive where the host was busy, a fail where not.
On a busy host the clocks run slow for reasons of the host's own: the kernel's scheduler says
how long the worker's threads waited for a core (sched.py). A comparison that fails only by
time the worker spent waiting says the host was busy, not that the candidate lied: it is
measured again, and if every measurement is so, the check is inconclusive, never a false fail.
A reported time stretched by the waits of any one of the worker's threads (a parallel call's pool)
lowers the loop's floor by as much, up to BUSY_FACTOR."""

from __future__ import annotations

import math

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


# The judge's loop also sets the least time per call a report may rank by (`least_ms`): a
# recorder that shrinks its times by less than RATIO passes the bound above, and would earn its
# shrink as speed. Honest reps and a loop of the same calls agree within a few percent on a quiet
# host (a loop's calls run warm, without a flush: faster, not slower); beyond the launch slack, a
# loop per call over LEAST_RATIO times the reported median caps the time ranked at the loop's.
# On a host clock the call shares its cores with the judge and the rest of the host: an honest
# fixed-cost Python call's pair requests read 1.5-1.6x its reps' median per call on a loaded 2-core
# host, its threads' run-queue waits already taken off (the reps ran at other moments).
LEAST_RATIO = {"cuda": 1.5, "cpu": 2.5}


# A loop this much faster per call than the reported time, by both of the judge's clocks, skipped
# its calls: back to back, without flushes, a call runs faster than per rep (warm caches), but not
# 8x; and the loop's work must be long enough (FLOOR_MIN_MS at the floor, in all) to be told from
# the null loop's noise (a busy moment makes a loop look slower, never faster).
FLOOR_RATIO = 8.0
FLOOR_MIN_MS = 2.0
# A measurement in which the worker's threads waited for a core at least this fraction of the
# judge's wall time, and whose excess over the bound is at most what waiting adds to a call (the
# threads' wait per call, at most BUSY_SLACK_MS: a thread that waits stalls its peers, which spin
# at a barrier for up to about a millisecond before they sleep), says "the host was busy". On a
# 2-core host with two spinning processes, an honest 17 us elementwise call read 0.39 ms per call
# by both clocks; a forger reporting 1/50 of its time stays 20x over, waits and all.
BUSY_WAIT_FRACTION = 0.05
BUSY_SLACK_MS = 1.0
# A timing request whose serving thread had a core less than 1/BUSY_FACTOR of its duration says
# nothing (at 7x, on a 2-core host shared with a dozen busy processes, a 50x forger still read 3x
# over its bound).
BUSY_FACTOR = 10.0


# A request that moves more bytes than this between judge and worker (outputs sent back, a set
# carried in) is not judged by the judge's clock: its copies vary by more than a call costs (6 GiB
# crosses the host in about a second), and whether a copy takes the host or a device buffer the
# judge lends follows the device memory free at that moment, so the null request that prices
# it may have taken the other way (on an 80 GB H100, level 1 problem 59's timing request, its
# 2.46 GiB outputs sent back, read 143 ms per 2.8 ms call). The judge-clocked loop, whose set
# comes in and whose output goes out off its clock, bounds the reported time alone there.
CLOCKED_MAX_BYTES = 1 << 30


def judged_requests(clocked: list[dict]) -> list[dict]:
    """The timing requests the judge's clock judges: those that moved CLOCKED_MAX_BYTES at most."""
    return [r for r in clocked if r.get("moved_bytes", 0) <= CLOCKED_MAX_BYTES]


# A null request in the candidate's worker costs at most this many times its trusted price (the
# same request before the candidate existed), plus a slack: the same request of the same worker a
# few seconds apart, on a quiet or equally busy host, costs about the same.
NULL_CAP = 4.0
NULL_SLACK_S = 0.002        # per null request (a round trip, a loop's fixed cost)
NULL_REP_SLACK_S = 50e-6    # per null rep


def evaluate(ev) -> Finding:
    phase, moved = first_seen(ev.integrity, "moved")
    if moved:
        return Finding(CheckId.TIMERS, Status.FAIL, f"clock bindings replaced by the candidate "
                       f"(first seen after {phase}): {', '.join(moved)}", {"moved": moved, "phase": phase})
    if not ev.integrity:
        return not_reached(CheckId.TIMERS)
    trusted = ev.null_trusted
    requests = [request_clock(r, ev.null_timing, ev.device.type, trusted)
                for r in judged_requests(ev.clocked_timing)] if ev.null_timing else []
    if not ev.loop and not requests:
        return Finding(CheckId.TIMERS, Status.PASS, "clock bindings unchanged (the judge-clock loop did not run)",
                       {"phases_checked": len(ev.integrity)})
    # A reported time taken while the host kept the worker from a core reads long by that load: the
    # loop's floor (did it run its calls?) makes room for it.
    timing_load = max([r["floor_load"] for r in requests if math.isfinite(r["floor_load"])] or [1.0])
    attempts = [judge_clock(a, ev.device.type, timing_load, trusted) for a in ev.loop or []]
    evidence = {"attempts": attempts, "requests": requests}
    loop_says, req_says = _overall(attempts), _overall(requests)
    if attempts:
        best = min(attempts, key=lambda a: a["judge_per_call_ms"] / a["bound_ms"])
        evidence.update(best)
    skips = [a for a in attempts if a["skipped"]]
    if skips and not loop_settled(attempts):
        loop_says = "disagrees"
    if loop_says == "disagrees":
        worst = skips[0] if skips else next(a for a in attempts if a["says"] == "disagrees")
        if worst["skipped"]:
            return Finding(CheckId.TIMERS, Status.FAIL,
                           f"the judge's clock saw {worst['judge_max_per_call_ms']:.4g} ms per call in a loop of "
                           f"{worst['n']} calls, the candidate's timing reported {worst['reported_ms']:.4g} ms: the "
                           f"loop did not run its calls ({len(attempts)} attempts)", evidence)
        return Finding(CheckId.TIMERS, Status.FAIL,
                       f"the judge's clock saw {best['judge_per_call_ms']:.4g} ms per call, the candidate's timing "
                       f"reported {best['reported_ms']:.4g} ms: the reported time does not account for the work"
                       f" ({len(attempts)} attempts)", evidence)
    if req_says == "disagrees":
        r = min(requests, key=lambda a: a["judge_per_call_ms"] / a["bound_ms"])
        return Finding(CheckId.TIMERS, Status.FAIL,
                       f"the judge's clock saw {r['judge_per_call_ms']:.4g} ms per timed call in the timing request "
                       f"({r['calls']} calls, {r['judge_s'] * 1e3:.4g} ms in all), the candidate's timing reported "
                       f"{r['reported_ms']:.4g} ms: the reported times do not account for the request "
                       f"({len(requests)} requests)", evidence)
    if "busy" in (loop_says, req_says):
        which = "judge-clocked loop" if loop_says == "busy" else "timing requests"
        return Finding(CheckId.TIMERS, Status.SKIP,
                       f"inconclusive: the host was busy (the worker's threads waited for a core through every "
                       f"measurement of the {which}), so the judge's clock could not bound the reported time",
                       {**evidence, "inconclusive": True})
    if not attempts:
        return Finding(CheckId.TIMERS, Status.PASS, "bindings unchanged; the timing requests' durations account "
                       "for the reported times", evidence)
    return Finding(CheckId.TIMERS, Status.PASS, f"bindings unchanged; judge clock {best['judge_per_call_ms']:.4g} ms "
                   f"per call vs reported {best['reported_ms']:.4g} ms", evidence)


def loop_settled(attempts: list[dict]) -> bool:
    """Whether judged loop attempts (`judge_clock`) clear the loop: one agrees, and where one was
    seen skipping its calls, one that agrees is long enough for a skip to show (too short a loop
    says nothing from below, however well it agrees from above)."""
    agree = [a for a in attempts if a["agrees"]]
    return bool(agree) and (not any(a["skipped"] for a in attempts) or any(a["floor_tells"] for a in agree))


def requests_disagree(clocked: list[dict], null: dict | None, device_type: str, trusted: dict | None = None) -> bool:
    """Whether no timing request so far is accounted for by its reported times (the judge then
    times again: see judge/plan.py, _measure_requests_again)."""
    clocked = judged_requests(clocked)
    if not clocked or not null:
        return False
    return _overall([request_clock(r, null, device_type, trusted) for r in clocked]) == "disagrees"


def _overall(verdicts: list[dict]) -> str | None:
    """Best agreement counts: one measurement that agrees clears the check; else a measurement
    that disagrees, whatever the host did, fails it; else every one was busy: inconclusive."""
    says = {v["says"] for v in verdicts}
    for outcome in ("agrees", "disagrees", "busy"):
        if outcome in says:
            return outcome
    return None


def _per_call(total_s, null_s, n) -> float | None:
    if total_s is None or null_s is None:
        return None
    return max(total_s - null_s, 0.0) / max(n, 1) * 1e3


# the loop's numbers, each weighed by the verdict
def _says(per_call, bound, cpu_per_call, wait_s, null_wait_s, n, judge_s) -> str:
    """agrees | disagrees | busy (the excess is the time the worker waited for a core)."""
    if per_call <= bound:
        return "agrees"
    if not _waited(wait_s, judge_s):
        return "disagrees"
    waited = min(_per_call(wait_s, null_wait_s or 0.0, n), BUSY_SLACK_MS)
    return "busy" if per_call - waited <= bound else "disagrees"


def _net(total_s, main_wait_s):
    """A duration by the judge's wall clock, less the time the worker's serving thread waited for
    a core in it (sched.py): what the worker spent, whatever else the host ran."""
    return total_s - (main_wait_s or 0.0)


def _capped(now: float | None, price: float | None, slack: float) -> tuple[float | None, bool]:
    """A null request's cost, held to NULL_CAP x its trusted price + slack; and whether it was."""
    if now is None or price is None:
        return now, False
    cap = NULL_CAP * max(price, 0.0) + slack
    return (cap, True) if now > cap else (now, False)


def trusted_loop(trusted: dict | None, n: int, key: str = "wall") -> float | None:
    """The trusted price of a null loop of `n` calls (wall, net of the serving thread's waits, or
    CPU), from the two priced loops: a fixed cost and a cost per call."""
    loops = (trusted or {}).get("loops") or []
    if len(loops) < 2:
        return None
    (a, b) = sorted(loops, key=lambda x: x["n"])[:2]
    if key == "wall":
        ya, yb = _net(a["judge_s"], a.get("main_wait_s")), _net(b["judge_s"], b.get("main_wait_s"))
    elif a.get("cpu_s") is None or b.get("cpu_s") is None:
        return None
    else:
        ya, yb = a["cpu_s"], b["cpu_s"]
    per = max((yb - ya) / max(b["n"] - a["n"], 1), 0.0)
    return max(ya - per * a["n"], 0.0) + per * n


def judge_clock(attempt: dict, device_type: str, timing_load: float = 1.0, trusted: dict | None = None) -> dict:
    """One judge-clocked loop against the reported time measured just before it; `timing_load`:
    how much longer than its serving thread ran the timing request took (a busy host's share);
    `trusted`: the null requests' prices (null_prices.py), which bound the null loop's."""
    n = attempt["n"]
    null_wall, wall_capped = _capped(_net(attempt["null_s"], attempt.get("null_main_wait_s")),
                                     trusted_loop(trusted, n), NULL_SLACK_S)
    null_cpu, cpu_capped = _capped(attempt.get("null_cpu_s"), trusted_loop(trusted, n, "cpu"), NULL_SLACK_S)
    wall = _per_call(_net(attempt["judge_s"], attempt.get("main_wait_s")), null_wall, n)
    cpu = _per_call(attempt.get("cpu_s"), null_cpu, n)
    per_call = min(wall, cpu) if cpu is not None else wall
    most = max(wall, cpu) if cpu is not None else wall
    bound = RATIO * attempt["reported_ms"] + SLACK_MS[device_type]
    floor = attempt["reported_ms"] / (FLOOR_RATIO * max(timing_load, 1.0))
    tells = n * floor >= FLOOR_MIN_MS   # long enough, at the floor, to tell from the null loop's noise
    skipped = tells and most < floor
    says = "disagrees" if skipped else _says(per_call, bound, cpu, attempt.get("wait_s"),
                                             attempt.get("null_wait_s"), n, attempt["judge_s"])
    return {"reported_ms": attempt["reported_ms"], "judge_per_call_ms": per_call, "judge_wall_per_call_ms": wall,
            "least_ms": least_ms(per_call, device_type),
            "judge_cpu_per_call_ms": cpu, "judge_max_per_call_ms": most, "bound_ms": bound, "floor_ms": floor,
            "n": n, "skipped": skipped, "floor_tells": tells, "wait_s": attempt.get("wait_s"),
            "main_wait_s": attempt.get("main_wait_s"),
            "null_capped": wall_capped or cpu_capped, "says": says, "agrees": says == "agrees",
            # how the loop's length was bounded: the pilot and its null twin, by the judge's clock
            "pilot_s": attempt.get("pilot_s"), "null_pilot_s": attempt.get("null_pilot_s"), "cap": attempt.get("cap")}


def least_ms(per_call_ms: float, device_type: str) -> float:
    """The least time per call a report may rank by, from a per-call time the judge's clock saw:
    less the launch slack (a launch-bound call's host pace is no device time), over LEAST_RATIO."""
    return max(per_call_ms - SLACK_MS[device_type], 0.0) / LEAST_RATIO[device_type]


def request_clock(req: dict, null: dict, device_type: str, trusted: dict | None = None) -> dict:
    """One timing request by the judge's clocks against its reported median: what is left of its
    duration after the warm-up (its budget, and a few calls at the bound) and the reps' own cost
    (the null request's, per rep, held to its trusted price: `_null_rep`), per timed call, must be
    accounted for as in the loop.

    Wall against wall: the reported times are the worker's wall clock over the very reps this
    request ran, waits for a core included, so the judge's duration keeps them too; what was
    measured elsewhere (the null request, the warm-up's budget) is scaled by this request's own
    load: its duration over the time its serving thread was not waiting for a core. Under a
    load that left the worker a core less than 1/BUSY_FACTOR of the time, it cannot tell."""
    reported, calls = req["reported_ms"], req["calls"]
    per_call_bound = RATIO * reported + SLACK_MS[device_type]
    running = _net(req["judge_s"], req.get("main_wait_s"))
    load = req["judge_s"] / running if running > 0 else math.inf
    scale = min(load, BUSY_FACTOR)
    warm_s = req["warmup_ms"] / 1e3 * scale + (req["warmup_calls"] + 1) * per_call_bound / 1e3
    lead_ms = req.get("lead_ms", 0.0) * req["reps"] / max(calls, 1)

    def against(fixed_s, rep_s):
        """(per call by the judge's clock, the bound), the null priced at `fixed_s` and `rep_s`."""
        null_rep_s = rep_s * scale
        wall = _per_call(req["judge_s"] - warm_s - fixed_s * scale, null_rep_s * req["reps"], calls)
        # and the spin a CUDA rep starts with (sized from the candidate's own launch path), per rep
        return wall, per_call_bound + RATIO * null_rep_s * 1e3 + lead_ms, null_rep_s

    fixed_s, rep_s, capped = _null_rep(null, (trusted or {}).get("timing"))
    wall, bound, null_rep_s = against(fixed_s, rep_s)
    if wall <= bound:
        says = "agrees"
    elif load > BUSY_FACTOR:
        says = "busy"
    elif capped and _waited(null.get("wait_s"), null["judge_s"]):
        # the host (or the worker's own threads) kept the null request from a core: if only the
        # cap makes the request disagree, the null's price cannot be told
        lenient_wall, lenient_bound, _ = against(*_prices(null))
        says = "busy" if lenient_wall <= lenient_bound else "disagrees"
    else:
        says = "disagrees"
    return {"reported_ms": reported, "calls": calls, "judge_s": req["judge_s"], "judge_per_call_ms": wall,
            "lead_per_call_ms": lead_ms, "floor_load": max(load, _thread_load(req), _stall_load(req, device_type)),
            "judge_wall_per_call_ms": wall, "bound_ms": bound, "null_per_rep_ms": null_rep_s * 1e3, "load": load,
            "null_capped": capped, "wait_s": req.get("wait_s"), "main_wait_s": req.get("main_wait_s"), "says": says}


def _thread_load(req: dict) -> float:
    """How much longer than its slowest thread could run a timing request took: a rep of a
    parallel call ends with its last thread, so a pool thread kept from a core stretches the
    reported times though the serving thread never waited. Only the loop's floor reads it, held
    to BUSY_FACTOR: a worker can make one of its own threads wait, and a loop that skipped its
    calls still runs far below reported / (FLOOR_RATIO x BUSY_FACTOR)."""
    longest = req.get("max_thread_wait_s") or 0.0
    running = req["judge_s"] - longest
    return min(req["judge_s"] / running if running > 0 else math.inf, BUSY_FACTOR)


def _stall_load(req: dict, device_type: str) -> float:
    """How much longer than its serving thread ran or waited for a core a timing request on the
    CPU took: a host that keeps a runnable thread off its core without a run queue (a virtual
    machine's host taking the core back) or stalls it blocked stretches every rep it lands in,
    unseen by the waits. On the CPU an honest rep's serving thread runs its call; on CUDA it
    legitimately sleeps on the device, so there it says nothing. Only the loop's floor reads it,
    held to BUSY_FACTOR as `_thread_load` is: a worker can make its own thread sleep."""
    run, wait = req.get("main_run_s"), req.get("main_wait_s")
    if device_type != "cpu" or run is None:
        return 1.0
    busy = run + (wait or 0.0)
    return min(req["judge_s"] / busy if busy > 0 else math.inf, BUSY_FACTOR)


def _null_rep(null: dict, trusted: dict | None) -> tuple[float, float, bool]:
    """A timing request's fixed cost and a rep's own cost, in seconds, from the null request in
    the candidate's worker, each held to NULL_CAP x the trusted null request's (plus a slack);
    and whether either was."""
    fixed_s, rep_s = _prices(null)
    if not trusted:
        return fixed_s, rep_s, False
    t_fixed, t_rep = _prices(trusted)
    fixed_s, fixed_capped = _capped(fixed_s, t_fixed, NULL_SLACK_S)
    rep_s, rep_capped = _capped(rep_s, t_rep, NULL_REP_SLACK_S)
    return fixed_s, rep_s, fixed_capped or rep_capped


def _prices(null: dict) -> tuple[float, float]:
    """A null timing request's fixed cost (its round trip) and its cost per rep, in seconds, each
    net of the serving thread's waits for a core."""
    fixed_s = _net(null.get("fixed_s", 0.0), null.get("fixed_main_wait_s"))
    return fixed_s, max(_net(null["judge_s"], null.get("main_wait_s")) - fixed_s, 0.0) / max(null["reps"], 1)


def _waited(wait_s: float | None, judge_s: float) -> bool:
    """Whether a measurement's threads waited for a core a noticeable part of its time."""
    return wait_s is not None and judge_s > 0 and wait_s >= BUSY_WAIT_FRACTION * judge_s
