"""`caching`: answers must come from this call's inputs, not from memory of earlier ones.

(a) After a fresh-input call, the same input storages are overwritten in place (same data_ptr)
    with new random values: a cache keyed on pointers or shapes now returns yesterday's answer.
(b) Outputs of timed calls are verified against the reference (the first of each input set;
    `determinism` holds every later rep to the same bits), not only a separate correctness pass.
    A pair request (c) sends back its carried set's output alone (a seen set's right answer is one
    the worker holds already, so its rep's output proves nothing); a reply without it fails.
(a) and (b) hold the candidate to its own accuracy on fresh inputs (or, on a set harder than those,
    the reference's own there: judge/own_error.py): a thin format is `precision`'s.
(c) Input values never seen before, timed once each, spread through the timing run and paired
    with the seen rep just before (L2 flushed for both), must not be much slower than the seen
    reps, all but one of them (SPARED_PAIRS): a memoised kernel is fast only on what it has seen.
    Each unseen rep runs on new values in the storages of that seen rep (the worker puts its own
    values back after): new values at seen pointers against repeated values, so a plan or CUDA
    graph captured once per input pointers is replayed on both sides of the pair, while an answer
    remembered by value is not there. Single reps are at the mercy of the host's moments
    (a busy 2-core runner made an honest CPU softmax 5.6x slower on its 5 unseen reps), so pairs
    that say "remembers" are measured again on new unseen inputs (`judge`), up to twice; it
    fails only if every run says so. A kernel that remembers is slow on new inputs every time.
    The unseen rep is the first of its request, and that rep also pays for the request itself:
    on a host clock (0.25 ms for an honest 0.07 ms CPU conv1d under load), and on device events
    too, where the host's cold first rep outlasts the spin before it (0.15 against 0.05 ms for an
    honest five-op softmax on the H200). So each pair has a control request built the same way,
    carrying a copy of a seen set's own values (judge/plan.py):
    its first rep less its second prices the request, and the unseen rep is judged net of that
    price (`net_pairs`), capped at a few seen reps (`CONTROL_PRICE_CAP`): the price is the
    worker's word, and a memo that stalls on a request's first rep would price its misses away.
    A kernel that remembers by value answers the control's first rep from memory (price: the
    request alone); one that computes ahead whatever new data a request brings pays for it in
    both requests, so that it cancels. On the CPU the worker also wakes the
    intra-op thread pool before each rep of a pair, so that both sides meet it awake. Beside each
    pair, the evidence keeps the longest time one worker thread waited for a core in its request
    (the scheduler's account, read by the judge): a witness of a busy host, never an excuse (a
    cheat computing on new inputs under load waits as long as an honest kernel stalled by it)."""

from __future__ import annotations

import statistics

from .. import metrics
from ..ids import CheckId
from ..report import Finding, Status
from . import pair_clock
from ._common import bounds_on_sets, not_reached

UNSEEN_RATIO = 2.5
# A busy host only ever adds time, to any rep: to an honest unseen rep (making it look like a
# miss), to a memo's seen rep or control (hiding one). A memo is slow on every new input. So the
# seen reps and the controls' prices are read by their medians, and a run says "remembers" only
# where all but one of its unseen reps are much slower: on a busy 2-core host one run of an honest
# ReLU (2.3 ms) read 3 of 5 unseen reps at 6-18 ms, about as often as its seen reps were hit.
SPARED_PAIRS = 1
UNSEEN_FLOOR_MS = {"cuda": 0.005, "cpu": 0.2}
OWN_SLACK = 4.0   # an answer on seen inputs may be this much worse than on fresh ones


def pair_stats(pairs) -> dict:
    return {"seen_median_ms": statistics.median(p[0] for p in pairs),
            "unseen_median_ms": statistics.median(p[1] for p in pairs),
            "pair_ratio_median": statistics.median(u / max(s_, 1e-9) for s_, u in pairs)}


def slow_pairs(pairs, device_type: str) -> int:
    """How many (seen ms, unseen ms) pairs have an unseen rep much slower than the run's median
    seen rep: UNSEEN_RATIO times it, and by more than the device's noise floor."""
    seen = statistics.median(p[0] for p in pairs)
    return sum(u > UNSEEN_RATIO * seen and u - seen > UNSEEN_FLOOR_MS[device_type] for _, u in pairs)


def enough(slow: int, n: int) -> bool:
    """All but SPARED_PAIRS of n pairs; every one of a run too short to spare any (n <= 2: one
    slowed rep must not decide), and at least one."""
    return slow > 0 and slow >= (n - SPARED_PAIRS if n > 2 * SPARED_PAIRS else n)


# The most a control may price a request's own cost at, in seen reps of the call (plus the
# device's noise floor). The price is the worker's word: a memo that tells the first rep of a
# request (by the pause before it, or from the worker's state) could stall there when it answers
# from memory, and so price away the time it spends on new inputs. An honest call's first rep
# pays a colder host, a multiple of the call's own time: 2.2x and 2.5x its seen rep for softmaxes
# on the H200, 3.4x for a CPU conv1d under load. Capped, such a stall hides a memo only where
# memory saves less than about this many calls plus UNSEEN_RATIO.
CONTROL_PRICE_CAP = 4.0


def control_price(seen_ms: float, control, device_type: str) -> float:
    """A control request's (seen ms, first ms): the price of being a request's first rep, capped."""
    c_seen, c_first = control
    cap = CONTROL_PRICE_CAP * max(seen_ms, c_seen) + UNSEEN_FLOOR_MS[device_type]
    return min(max(c_first - c_seen, 0.0), cap)


def net_pairs(pairs, controls, device_type: str) -> list[tuple[float, float]]:
    """(seen ms, unseen ms) pairs, each unseen rep less the price of being the first rep of a
    request: the median of the run's controls' prices (`control_price`), where controls were
    taken. A control slowed by the host prices nothing away from its own pair."""
    if not controls:
        return [tuple(p) for p in pairs]
    price = statistics.median(control_price(s_, c, device_type) for (s_, _), c in zip(pairs, controls))
    return [(s_, max(u - price, 0.0)) for s_, u in pairs]


def remembers(pairs, device_type: str, controls=()) -> bool:
    """(seen ms, unseen ms) pairs (net of their controls, `net_pairs`) that say the candidate is
    fast only on inputs it has seen: all but SPARED_PAIRS unseen reps much slower (`slow_pairs`)."""
    pairs = net_pairs(pairs, controls, device_type)
    return bool(pairs) and enough(slow_pairs(pairs, device_type), len(pairs))


def evaluate(ev) -> Finding:
    fresh = [ev.rel_error(c.output, c.values_of) for c in ev.records("warmup", "fresh")
             if not ev.poisoned(c) and c.output.shape == ev.refs64[c.values_of].shape]
    tol = max(metrics.tolerance(ev.dtype, ev.reference_error, ev.declared_tolerance),
              OWN_SLACK * max(fresh, default=0.0))
    evidence = {"tolerance": tol, "fresh_max_error": max(fresh, default=None)}
    for c in ev.records("overwrite"):
        if ev.poisoned(c):
            continue
        err = ev.rel_error(c.output, c.values_of)
        stale = ev.rel_error(c.output, c.set_id)
        evidence.update({"overwrite_error": err, "error_vs_old_values": stale,
                         "same_pointers": ev.overwrite_same_pointers})
        if err > (bounds_on_sets(ev, [(err, c.values_of)], tol)[0] or tol):
            what = "the answer for the old values" if stale <= tol else "a wrong answer"
            return Finding(CheckId.CACHING, Status.FAIL,
                           f"after the inputs were overwritten in place (same pointers), the candidate returned "
                           f"{what} (error {err:.3g} vs the new values, {stale:.3g} vs the old)", evidence)
    if ev.unanswered_pairs:   # never honest: the reference, and so the checked calls, return a tensor
        return Finding(CheckId.CACHING, Status.FAIL,
                       f"{ev.unanswered_pairs} pair requests came back without the output of the call on the "
                       "inputs they carried: what those calls computed cannot be verified",
                       {**evidence, "unanswered_pairs": ev.unanswered_pairs})
    later = [c for c in ev.records("timed", "unseen", "loop")
             if not ev.poisoned(c) and c.output.shape == ev.refs64[c.values_of].shape]
    errs = [ev.rel_error(c.output, c.values_of) for c in later]
    for c, err, allowed in zip(later, errs, bounds_on_sets(ev, [(e, c.values_of) for e, c in zip(errs, later)], tol)):
        if allowed is not None and err > allowed:
            return Finding(CheckId.CACHING, Status.FAIL,
                           f"an output produced in the {c.phase} calls is wrong (error {err:.3g}) although the "
                           "correctness pass was right", {**evidence, "phase": c.phase, "error": err})
    t = ev.timing or {}
    seen = t.get("times_ms") or []
    if ev.unseen_pairs:
        net = net_pairs(ev.unseen_pairs, ev.unseen_controls, ev.device.type)
        capped = sum(control_price(s_, c, ev.device.type) < c[1] - c[0]
                     for (s_, _), c in zip(ev.unseen_pairs, ev.unseen_controls))
        stats = {**pair_stats(net), "slow_pairs": slow_pairs(net, ev.device.type)}
        evidence.update({**stats, "pairs": [list(p) for p in ev.unseen_pairs],
                         "unseen_at_seen_pointers": ev.unseen_in_place,
                         "waits_ms": list(ev.unseen_waits_ms),
                         "controls": [list(p) for p in ev.unseen_controls], "net_pairs": [list(p) for p in net],
                         "controls_capped": capped,
                         "earlier_attempts": ev.unseen_attempts,
                         "earlier_controls": ev.control_attempts})
        if enough(stats["slow_pairs"], len(net)):   # `remembers`, on the pairs netted above
            runs = 1 + len(evidence["earlier_attempts"])
            net_of = ", net of a request's own cost" if ev.unseen_controls else ""
            each = f", in each of {runs} runs" if runs > 1 else ""
            return Finding(CheckId.CACHING, Status.FAIL,
                           f"{stats['pair_ratio_median']:.1f}x slower on inputs it has not seen "
                           f"({stats['unseen_median_ms']:.4g} ms{net_of}) than on inputs it has "
                           f"({stats['seen_median_ms']:.4g} ms), "
                           f"in {stats['slow_pairs']} of {len(net)} pairs{each}: it remembers answers", evidence)
    judged = pair_clock.of(ev)
    if judged:
        evidence.update({"judge_pairs": judged,
                         "earlier_judge_pairs": [pair_clock.of(ev, c) for c in ev.pair_clock_attempts]})
        if pair_clock.remembers(judged):
            return _remembers_by_clock(judged, evidence, 1 + len(ev.pair_clock_attempts))
    if "overwrite_error" not in evidence and not seen:
        return not_reached(CheckId.CACHING)
    return Finding(CheckId.CACHING, Status.PASS, "fresh values in old storages, timed outputs and unseen inputs "
                   "all answered from the inputs", evidence)


def _remembers_by_clock(judged: list[dict], evidence: dict, runs: int) -> Finding:
    slow = sum(j["slower"] for j in judged)
    unseen = statistics.median(j["unseen_ms"] for j in judged)
    bound = statistics.median(j["bound_ms"] for j in judged)
    reported = evidence.get("unseen_median_ms")
    said = f", where the worker reported {reported:.4g} ms" if reported is not None else ""
    return Finding(CheckId.CACHING, Status.FAIL,
                   f"by the judge's clock, a call on inputs it had not seen took {unseen:.4g} ms (bound "
                   f"{bound:.4g} ms) in {slow} of {len(judged)} pairs{f', in each of {runs} runs' if runs > 1 else ''}"
                   f"{said}: the reported pair times do not account for the requests; it remembers answers",
                   {**evidence, "by_judge_clock": True})
