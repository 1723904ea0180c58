"""Small helpers the checks share."""

from __future__ import annotations

from .. import metrics
from ..report import Finding, Status


def not_reached(cid, what: str = "the run ended before this check had evidence") -> Finding:
    """A skip for want of evidence (not because the check has no meaning on this device)."""
    return Finding(cid, Status.SKIP, what, {"not_reached": True})


def dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def first_seen(integrity, key: str):
    """The phase after which an integrity entry first appeared (its value as it was then)."""
    for phase, entry in integrity:
        if entry.get(key):
            return phase, entry[key]
    return None, None


def bounds_on_sets(ev, items, tol: float) -> list[float | None]:
    """The bound each (error, values key) of `items` is held to: `tol`; or, for an error over it,
    the bound the reference implementation's own error on that very set gives where wider
    (judge/own_error.py: a set harder than those the reference ran on). The judge makes that
    error only when it could decide: never while an output on a set of known error (one the
    reference ran on, or one already made) fails, nor for an error no set's bound could reach."""
    errors = ev.reference_error_on
    widest = metrics.widest_on_set(ev.dtype, ev.declared_tolerance)

    def bound(err, key, make: bool) -> float | None:
        if err <= tol or errors is None or err > widest:
            return tol
        if key in errors or make:   # `in` makes nothing; errors[key] makes it
            return max(tol, metrics.on_set(ev.dtype, errors[key], ev.declared_tolerance))
        return None

    known = [bound(err, key, False) for err, key in items]
    if any(b is not None and err > b for (err, _), b in zip(items, known)):
        return known   # None: a set whose own error was not needed to decide
    return [b if b is not None else bound(err, key, True) for (err, key), b in zip(items, known)]
