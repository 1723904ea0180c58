"""What the judge's clocks subtract, priced before the candidate exists.

`timers` bounds the reported time by the judge's clock: a timing request's duration, and a loop
of back-to-back calls, less what the same request costs with a null function in the call's
place (the round trip, a rep's own work). Those null requests run in the candidate's worker,
which the candidate controls: one that slows them (a sleep in its copy of the handler) makes
the judge subtract its own work, and a forged time passes. So the same null requests are first
made while the worker holds only the reference, before any candidate code has run in it (the
reference is trusted): those prices bound what a null request may cost later (checks/timers.py).
"""

from __future__ import annotations

from typing import Callable

import torch

from .. import sched
from ..checks.timers import CLOCKED_MAX_BYTES
from .bodies import _encode_set, _pair_body, _time_body
from .settings import _NULL_PAIR, Settings

NULL_TIMING_REPS = 64   # reps of a null timing request (a rep's own cost, averaged)
REHEARSALS = 6          # untimed whole reps a CUDA timing request runs first (the worker's _Reps.REHEARSALS)
LOOP_CALLS = (10, 2000)   # null loops priced at the shortest and the longest loop the judge runs
# Pair requests that move up to CLOCKED_MAX_BYTES (checks/timers.py) get a null pair request
# (checks/pair_clock.py): the set carried in, and its rep's output sent back. On an 80 GB H100,
# level 1 problem 55's pair requests (a 1 GiB set in, two 2 GiB outputs out, when the seen rep's
# came back too) read 1.9 s by the judge's clock beside 3.8 ms calls.
PAIR_OUTPUTS = 1   # outputs a pair request's reply carries: its carried set's (worker/serve.py)


def pair_clocked(carried: list | int, out_nbytes: int) -> bool:
    """Whether a pair request carrying a set of these values (or of these bytes), whose call's
    output takes `out_nbytes`, moves little enough to be judged by the clock."""
    if not isinstance(carried, int):
        carried = sum(v.numel() * v.element_size() for v in carried if isinstance(v, torch.Tensor))
    return carried + PAIR_OUTPUTS * out_nbytes <= CLOCKED_MAX_BYTES


def timing_priced(sets: int, out_nbytes: int, pairs_clocked: bool) -> bool:
    """Whether the judge's clock judges anything a null timing request prices: a timing request on
    `sets` sets (its reply the first output on each: checks/timers.judged_requests), or the pair
    requests (`pairs_clocked`: their unit is bounded by the timing request's clock). A big
    problem's requests move more than the clock can judge: there the null timing request and its
    outputs of the call's shape (18 GiB back for a 6 GiB ReLU) would price nothing."""
    return sets * out_nbytes <= CLOCKED_MAX_BYTES or pairs_clocked


def null_timing(w, fresh, settings: Settings, reps: int, max_blob, cuda: bool) -> dict:
    """The cost of a timing request and its reps without the candidate: the same request with
    the judge's null function in the call's place (min(reps, NULL_TIMING_REPS) reps, no warm-up),
    by the judge's clocks. A rep's own work (inputs read, paint, flush, events; the copy and the
    check of an output of the call's shape, which the worker hands the null reps) is what it prices."""
    r = max(1, min(reps, NULL_TIMING_REPS))
    body = {**_time_body(fresh, settings, reps=r, warmup=0, budget_ms=1e9, null_reps=0), "warmup_ms": 0.0,
            "min_reps": r, "null": True}
    before = sched.sample(w.clock_pid)
    w.request("integrity")   # a request's fixed cost: the round trip and the worker's integrity report
    fixed = sched.between(before, sched.sample(w.clock_pid))
    before = sched.sample(w.clock_pid)
    w.request("time", body, max_blob_bytes=max_blob)
    return {**sched.between(before, sched.sample(w.clock_pid)), "reps": r + (REHEARSALS if cuda else 0),
            "fixed_s": fixed["judge_s"], "fixed_main_wait_s": fixed["main_wait_s"]}


def null_loop(w, set_id: int, n: int, max_blob) -> dict:
    """`n` calls of the null function back to back, bracketed by the judge's clocks."""
    before = sched.sample(w.clock_pid)
    w.request("loop", {"set": set_id, "n": n, "null": True}, max_blob_bytes=max_blob)
    return {"n": n, **sched.between(before, sched.sample(w.clock_pid))}


def null_pair(w, seen: int, values: list, max_blob, lead_ms: float = 0.0) -> dict:
    """A pair request (judge/plan.py, `unseen_pairs`) with the null function in the calls' place:
    a copy of seen set `seen`'s values carried, two reps' own work (each after a spin of `lead_ms`
    on CUDA, as the candidate's reps), an output of the call's shape sent back, by the judge's
    clocks from its send to its reply, as the candidate's pair requests (spawn.WorkerHandle.clocked);
    the copy released after."""
    layout, blobs = _encode_set(values)
    _, got = w.clocked("time", _pair_body(seen, _NULL_PAIR, layout, lead_ms, null=True), blobs, max_blob_bytes=max_blob)
    w.request("release", {"sets": [_NULL_PAIR]})
    return got


# 8 parameters: the null requests' own (the worker, its sets, the settings, the message limit, the
# device kind, the reps) and the set the null pair request carries, with its bytes
def trusted(w, fresh, settings: Settings, max_blob, cuda: bool, reps: int = NULL_TIMING_REPS,
            seen_values: Callable[[], list] | None = None, out_nbytes: int = 0,
            seen_bytes: int | None = None) -> dict:
    """The null prices of a worker that holds the reference (its input sets and, from its timing
    run, outputs of the problem's shape): the shortest and longest null loops, a null timing request
    (of the reference's own reps, at most NULL_TIMING_REPS) where it prices anything the clock
    judges (`timing_priced`), and (given the first seen set's
    values, as a function that gets them, and the call's output size) a null pair request. Run
    after the reference's timing and before the candidate is loaded. `seen_bytes`: the set's bytes,
    where known without its values (a set the judge would draw again only to count them)."""
    pairs = seen_values is not None and pair_clocked(seen_bytes if seen_bytes is not None else seen_values(),
                                                     out_nbytes)
    prices = {}
    if timing_priced(len(set(fresh)), out_nbytes, pairs):
        prices["timing"] = null_timing(w, fresh, settings, reps, max_blob, cuda)
    prices["loops"] = [null_loop(w, fresh[1], n, max_blob) for n in LOOP_CALLS]
    if pairs:
        prices["pair"] = null_pair(w, fresh[0], seen_values(), max_blob)
    return prices
