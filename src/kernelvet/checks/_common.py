"""Small helpers the checks share."""

from __future__ import annotations

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
