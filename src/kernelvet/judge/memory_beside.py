"""The judge out of device memory while a candidate's worker holds part of the device: whose doing.

The judge and the worker share one device. The judge's float64 references, its draws and its
comparisons need memory while the candidate's worker holds its sets and outputs; a candidate that
takes the rest (and keeps it in its allocator's cache, which it controls) would turn the judge's
out-of-memory into an exit 2 blamed on the problem, in place of the verdict its outputs earn, and
in a batch into the same record for every later candidate of the problem.

So the candidate's side is bounded: the problem's plan (sizes.footprint) gives the worker its
sets, copies, outputs, weights and flush buffer; its scratch and its allocator's cache are not
counted, hence a margin. What the side holds is the device's account, not the worker's word: the
device's memory in use, less what the judge's allocator holds and a CUDA context of the judge's
own (any process the worker started counts on its side). Beyond the margin, the candidate's: the
`worker` check fails with both numbers. Within it, the problem does not fit this device beside
this candidate: exit 2 for this candidate alone (errors.OutOfMemoryBesideCandidate).

Before either, a float64 reference the judge makes during the plan (an unseen set's, a loop's), a
comparison of an output as it arrives and the checks' arithmetic that run out are made once more
after the worker gave its allocator's free blocks back to the device (`once_more`,
`with_cache_returned`, Evidence.with_room), and the side is read only once the worker was asked to (`cache_returned`):
blocks a worker keeps cached hold nothing, yet count on its side by the device's account, and an
honest worker frees and caches outputs, copies and paint of the output's size in every call (an
H100 worker timing a 4 GiB output held 54.1 GiB by the device's account, against a plan of
24.3 GiB).
"""

from __future__ import annotations

import time

import torch

from .. import sizes, spawn
from ..errors import MachineOutOfMemory, OutOfMemoryBesideCandidate, UsageError, raised_at

_gib = sizes._gib

# the judge's own out-of-memory: its draws and float64 references (errors.py), its arithmetic (torch)
JUDGES_OWN = (MachineOutOfMemory, torch.OutOfMemoryError)
MARGIN = 1.25             # the plan's worker share, times this ...
SLACK = 2 << 30           # ... plus this: a candidate's own scratch and cache, unplanned
JUDGE_CONTEXT = 1 << 30   # the judge's CUDA context and libraries' workspaces, beside its allocator


def candidate_side(device) -> int | None:
    """Bytes of `device` held by processes other than the judge, by the device's account; None
    where the judge has no CUDA context on it (a CPU vet, a judge that never touched the device)."""
    got = sizes.device_memory(device)
    if got is None:
        return None
    free, total, _, judge = got
    return max(0, total - free - judge - JUDGE_CONTEXT)


def planned_share(size: sizes.ProblemSize, hold: sizes.Holding) -> int:
    """What the problem's plan gives the worker on the device, in bytes."""
    terms = sizes.footprint(size, hold).device_terms
    return sum(v for k, v in terms.items() if k.startswith("worker "))


def allowed(planned: int) -> int:
    return int(MARGIN * planned) + SLACK


def whose(exc: BaseException, device, size: sizes.ProblemSize, hold: sizes.Holding, census: dict | None = None) -> str:
    """For an out-of-memory of the judge's during a candidate's plan: the `worker` failure to
    record where the candidate's side holds more than its plan allows; else raises
    OutOfMemoryBesideCandidate, saying what each side held (and what the worker says it holds,
    `census`: worker_account)."""
    said = str(exc) if isinstance(exc, UsageError) else \
        f"the judge ran out of memory on {device} ({type(exc).__name__}{raised_at(exc)})"
    side, planned = candidate_side(device), planned_share(size, hold)
    if side is not None and side > allowed(planned):
        return (f"the judge ran out of the device's memory beside the candidate's worker, which held "
                f"{_gib(side)} of the device by the device's account, more than the {_gib(allowed(planned))} "
                f"the problem's plan allows it ({_gib(planned)} planned, x{MARGIN:g} + {_gib(SLACK)})"
                f"{census_said(census)}: {said}")
    held = "" if side is None else \
        f"; the candidate's worker held {_gib(side)} of the device (its plan: {_gib(planned)}){census_said(census)}"
    raise OutOfMemoryBesideCandidate(f"{said}{held}") from None


def census_said(census) -> str:
    """The worker's own word on what it holds (worker/observe.py device_census), as a clause; a
    claim, shown for what it is, and nothing where it is missing or malformed."""
    if not isinstance(census, dict):
        return ""
    nums = [census.get("allocated"), census.get("reserved")]
    rows = census.get("storages")
    if not all(type(n) is int and n >= 0 for n in nums) or not isinstance(rows, list):
        return ""
    parts = [f"{_gib(r[0])} x{r[1]}" for r in rows[:8]
             if isinstance(r, list) and len(r) == 2 and all(type(n) is int and n >= 0 for n in r)]
    largest = f", its largest storages {', '.join(parts)}" if parts else ""
    return (f" (the worker says its allocator held {_gib(nums[0])} in tensors and reserved {_gib(nums[1])}"
            f"{largest})")


def wait_for_release(device, planned: int, within_s: float = 10.0) -> None:
    """After the judge ends a worker beyond its share: until the device's account of the candidate's
    side is back within `planned` (the driver frees a process's memory as it exits), at most
    `within_s`. Nothing to wait for where the judge has no CUDA context."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        side = candidate_side(device)
        if side is None or side <= planned:
            return
        time.sleep(0.1)


def once_more(step, w, caught: tuple | type = JUDGES_OWN):
    """`step()`, and where it runs out of the device's memory (`caught`), once more after the worker
    gave the device its allocator's free blocks back (a `release` with `empty_cache`), if it may be
    asked now; a second out-of-memory is the caller's (`whose`)."""
    try:
        return step()
    except caught:   # left before the retry: the failed step's tensors go with its frames
        if not cache_returned(w):
            raise
    return step()


def with_cache_returned(make, w):
    """`make(key)`, made `once_more` where it runs out."""
    return lambda key: once_more(lambda: make(key), w)


def cache_returned(w) -> bool:
    """Whether the worker, asked now, gave its allocator's free blocks back to the device: before the
    judge retries, and before it reads the candidate's side by the device's account (`whose`), which
    would otherwise count an honest worker's cache of freed outputs as held."""
    return worker_account(w, census=False) is not None


def worker_account(w, census: bool = True) -> dict | None:
    """The worker asked to give its allocator's free blocks back (`cache_returned`) and, with
    `census`, to say what it holds then (its word); None where it could not be asked now."""
    if not w.idle:
        return None
    try:
        msg = w.request("release", {"empty_cache": True, "census": census})
    except (spawn.WorkerEnded, spawn.CandidateRaised):
        return None
    return msg.body.get("census") or {}
