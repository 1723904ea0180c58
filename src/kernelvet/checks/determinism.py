"""`determinism`: the same inputs, launched twice with the allocator's cache emptied between,
give the same bits, and so does every timed rep on the same inputs; and the implied rate does
not beat physics.

Uninitialised memory moves between runs; a result that does not repeat is read from somewhere
nobody wrote. Kernels nondeterministic by design (atomics) are waived with `--allow determinism`.
The ceiling: FLOPs / time above the device's fastest format, or minimum bytes / time above twice
its memory bandwidth, is math that did not happen."""

from __future__ import annotations

import statistics

from ..metrics import same_bits
from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached

FLOP_MARGIN = 1.2
BYTES_MARGIN = 2.0


def evaluate(ev) -> Finding:
    again = [c for c in ev.records("determinism") if not ev.poisoned(c)]
    first = {c.set_id: c for c in reversed(ev.records("fresh"))}
    evidence = {}
    if again:
        c = again[0]
        ref = first.get(c.set_id)
        if ref is not None and not ev.poisoned(ref):
            if not same_bits(c.output, ref.output):
                diff = (c.output.double() - ref.output.double()).abs()
                n = int((c.output.contiguous().view(-1) != ref.output.contiguous().view(-1)).sum())
                return Finding(CheckId.DETERMINISM, Status.FAIL,
                               f"two launches on identical inputs differ in {n} of {c.output.numel()} elements "
                               f"(max difference {diff.nan_to_num(nan=float('inf')).max().item():.3g})",
                               {"differing": n, "elements": c.output.numel()})
            evidence["bitwise_equal_launches"] = 2
    t = ev.timing or {}
    if t.get("mismatches"):
        return Finding(CheckId.DETERMINISM, Status.FAIL,
                       f"{t['mismatches']} timed reps returned other bits than the first rep on the same inputs",
                       {"mismatches": t["mismatches"], "reps": len(t.get("times_ms", []))})
    if t.get("times_ms"):
        evidence["timed_reps_bitwise_equal"] = len(t["times_ms"])
    ceiling = _ceiling(ev)
    if ceiling:
        return ceiling
    if not evidence:
        return not_reached(CheckId.DETERMINISM)
    if ev.peaks is None:   # an unknown part: say so, rather than imply a ceiling was applied
        name = ev.device_info.get("name", "this device")
        return Finding(CheckId.DETERMINISM, Status.PASS, "two launches on identical inputs are bitwise equal; "
                       f"no peak rates known for {name}, so the rate ceiling was not applied",
                       {**evidence, **_rates(ev), "ceiling": f"skipped: {name} is not in the peak table"})
    return Finding(CheckId.DETERMINISM, Status.PASS, "two launches on identical inputs are bitwise equal; "
                   "implied rate within the device's peak", {**evidence, **_rates(ev)})


def _rates(ev) -> dict:
    times = (ev.timing or {}).get("times_ms") or []
    if not times:
        return {}
    sec = statistics.median(times) / 1e3
    out = {"median_ms": sec * 1e3}
    if ev.flops and sec > 0:
        out["implied_flops"] = ev.flops / sec
    if ev.bytes_moved and sec > 0:
        out["implied_bytes_per_s"] = ev.bytes_moved / sec
    return out


def _ceiling(ev) -> Finding | None:
    r = _rates(ev)
    if not ev.peaks or not r:
        return None
    if r.get("implied_flops", 0) > FLOP_MARGIN * ev.peaks.fastest:
        return Finding(CheckId.DETERMINISM, Status.FAIL,
                       f"implied {r['implied_flops'] / 1e12:.3g} TFLOP/s beats the device's fastest format "
                       f"({ev.peaks.fastest / 1e12:.3g} TFLOP/s): that math did not happen",
                       {**r, "peak_flops": ev.peaks.fastest})
    if r.get("implied_bytes_per_s", 0) > BYTES_MARGIN * ev.peaks.bandwidth:
        return Finding(CheckId.DETERMINISM, Status.FAIL,
                       f"implied {r['implied_bytes_per_s'] / 1e9:.3g} GB/s is over twice the memory bandwidth "
                       f"({ev.peaks.bandwidth / 1e9:.3g} GB/s)", {**r, "peak_bytes_per_s": ev.peaks.bandwidth})
    return None
