"""One module per check, each `evaluate(ev: Evidence) -> Finding`. The registry maps ids to them.

A waived check still runs where it has evidence; its finding is recorded as `waived`.
"""

from __future__ import annotations

from ..ids import ALL_CHECKS, CheckId
from ..report import Finding, Status
from . import (aliasing, caching, determinism, global_state, identity, inputs_unchanged, kernel_audit, library_call,
               output_type, parameters, precision, streams, threads, timers, unwritten_output, worker)

REGISTRY = {
    CheckId.STREAMS: streams.evaluate,
    CheckId.THREADS: threads.evaluate,
    CheckId.OUTPUT_TYPE: output_type.evaluate,
    CheckId.TIMERS: timers.evaluate,
    CheckId.IDENTITY: identity.evaluate,
    CheckId.UNWRITTEN_OUTPUT: unwritten_output.evaluate,
    CheckId.DETERMINISM: determinism.evaluate,
    CheckId.PRECISION: precision.evaluate,
    CheckId.CACHING: caching.evaluate,
    CheckId.LIBRARY_CALL: library_call.evaluate,
    CheckId.INPUTS_UNCHANGED: inputs_unchanged.evaluate,
    CheckId.GLOBAL_STATE: global_state.evaluate,
    CheckId.KERNEL_AUDIT: kernel_audit.evaluate,
    CheckId.PARAMETERS: parameters.evaluate,
    CheckId.WORKER: worker.evaluate,
    CheckId.ALIASING: aliasing.evaluate,
}
assert set(REGISTRY) == set(ALL_CHECKS)


# The checks that compare outputs with the float64 references, which the judge makes when first
# compared (a float64 forward of a big problem costs seconds on the CPU): last in `CHEAP_FIRST`.
AGAINST_REFERENCES = (CheckId.IDENTITY, CheckId.PRECISION, CheckId.CACHING)
CHEAP_FIRST = tuple(c for c in ALL_CHECKS if c not in AGAINST_REFERENCES) + AGAINST_REFERENCES


def evaluate(cid: CheckId, ev, waived=frozenset(), passes: tuple = ()) -> Finding:
    """`passes`: exceptions that are the judge's, not the check's (its memory running out while it
    makes a reference a check asked for): raised for the judge to decide on."""
    try:
        f = REGISTRY[cid](ev)
    except passes:
        raise
    except Exception as exc:  # a bug in a check is a harness error, never a silent pass
        f = Finding(cid, Status.ERROR, f"the check itself failed: {type(exc).__name__}: {exc}")
    if cid in waived:
        f = Finding(cid, Status.WAIVED, f"allowed by the user (--allow {cid}); would have said: {f.summary}",
                    {**f.evidence, "would_be": str(f.status)})
    return f


def evaluate_all(ev, waived=frozenset(), passes: tuple = ()) -> list[Finding]:
    return [evaluate(cid, ev, waived, passes) for cid in ALL_CHECKS]


def first_failure(ev, waived=frozenset(), passes: tuple = ()) -> Finding | None:
    """The first check that fails, in `CHEAP_FIRST` order: a candidate another check rejects costs
    no float64 reference it did not need."""
    for cid in CHEAP_FIRST:
        f = evaluate(cid, ev, waived, passes)
        if f.status is Status.FAIL:
            return f
    return None
