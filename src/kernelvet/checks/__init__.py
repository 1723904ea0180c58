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


def evaluate_all(ev, waived=frozenset()) -> list[Finding]:
    out = []
    for cid in ALL_CHECKS:
        try:
            f = REGISTRY[cid](ev)
        except Exception as exc:  # a bug in a check is a harness error, never a silent pass
            f = Finding(cid, Status.ERROR, f"the check itself failed: {type(exc).__name__}: {exc}")
        if cid in waived:
            f = Finding(cid, Status.WAIVED, f"allowed by the user (--allow {cid}); would have said: {f.summary}",
                        {**f.evidence, "would_be": str(f.status)})
        out.append(f)
    return out
