"""`determinism`: the same inputs, launched twice with the allocator's cache emptied between,
give the same bits, and so does every timed rep on the same inputs; and the implied rate does
not beat physics.

Uninitialised memory moves between runs; a result that does not repeat is read from somewhere
nobody wrote. Kernels nondeterministic by design (atomics) are waived with `--allow determinism`.
Where the reference itself does not repeat bitwise on this device (its timed reps differed from
its first: a library algorithm with atomics, such as some of cuDNN's 3-D transposed convolutions),
a candidate need not either: its two launches may differ by as much as the precision bound allows,
and its timed reps' differing bits are evidence, not a finding (every timed rep's output that the
judge sees is still compared with its reference: `caching`, `precision`).
The ceiling: FLOPs / time above the device's fastest format, or minimum bytes / time above twice
its memory bandwidth, is math that did not happen."""

from __future__ import annotations

import statistics

from .. import metrics
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
            # through the memo: under a lean holding the launch was compared as it arrived (compact.py)
            if not ev.memo(same_bits, c.output, ref.output):
                failed = _launches_differ(ev, c.output, ref.output, evidence)
                if failed:
                    return failed
            else:
                evidence["bitwise_equal_launches"] = 2
    t = ev.timing or {}
    if t.get("mismatches") and ev.reference_repeat_mismatches:
        evidence["timed_reps_differing"] = t["mismatches"]
    elif t.get("mismatches"):
        return Finding(CheckId.DETERMINISM, Status.FAIL,
                       f"{t['mismatches']} timed reps returned other bits than the first rep on the same inputs",
                       {"mismatches": t["mismatches"], "reps": len(t.get("times_ms", []))})
    if t.get("times_ms") and not t.get("mismatches"):
        evidence["timed_reps_bitwise_equal"] = len(t["times_ms"])
    ceiling = _ceiling(ev)
    if ceiling:
        return ceiling
    if not evidence:
        return not_reached(CheckId.DETERMINISM)
    if ev.reference_repeat_mismatches and not evidence.get("bitwise_equal_launches"):
        return Finding(CheckId.DETERMINISM, Status.PASS, "two launches on identical inputs differ within the "
                       "precision bound, as the reference's own do on this device (it does not repeat bitwise)",
                       {**evidence, **_rates(ev)})
    if ev.peaks is None:   # an unknown part: say so, rather than imply a ceiling was applied
        name = ev.device_info.get("name", "this device")
        return Finding(CheckId.DETERMINISM, Status.PASS, "two launches on identical inputs are bitwise equal; "
                       f"no peak rates known for {name}, so the rate ceiling was not applied",
                       {**evidence, **_rates(ev), "ceiling": f"skipped: {name} is not in the peak table"})
    return Finding(CheckId.DETERMINISM, Status.PASS, "two launches on identical inputs are bitwise equal; "
                   "implied rate within the device's peak", {**evidence, **_rates(ev)})


def _launches_differ(ev, a, b, evidence: dict) -> Finding | None:
    """Two launches on identical inputs gave other bits: a finding, unless the reference itself does
    not repeat bitwise here and the two differ by no more than the precision bound."""
    n, most = ev.memo(metrics.bitwise_differences, a, b)   # (compact.settle_repeat: known already)
    said = {"differing": n, "elements": a.numel()}
    if ev.reference_repeat_mismatches and a.shape == b.shape and a.is_floating_point():
        apart, tol = ev.memo(metrics.rel_error, a, b), metrics.tolerance(ev.dtype, ev.reference_error, ev.declared_tolerance)
        said.update(relative_difference=apart, tolerance=tol, reference_repeat_mismatches=ev.reference_repeat_mismatches)
        if apart <= tol:
            evidence.update(launches_differ=said)
            return None
        return Finding(CheckId.DETERMINISM, Status.FAIL,
                       f"two launches on identical inputs differ by {apart:.3g} (relative), beyond the precision "
                       f"bound {tol:.3g}; the reference's own launches differ here too, but only within it", said)
    return Finding(CheckId.DETERMINISM, Status.FAIL,
                   f"two launches on identical inputs differ in {n} of {a.numel()} elements "
                   f"(max difference {most:.3g})", said)


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
