"""`aliasing`: each call's output is the caller's, or the reuse of one storage is said out loud.

A call that returns the storage of an earlier call's output (a static output buffer, as CUDA-graph
code keeps) overwrites what the caller holds from that call. The worker keeps recent outputs
alive, so the allocator cannot hand their storage out again: a match is the candidate's doing.
By default this passes with the evidence recorded (KernelBench accepts it; it is honest, and
common); `Settings.reused_output = "reject"` (CLI `--reused-output reject`) makes it a finding,
for callers that keep outputs across calls. Waivable either way."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached


def reuses(ev) -> list[list]:
    """[phase, call index, earlier call index] for each observed call that returned an output
    storage of an earlier call still held."""
    return [[c.phase, c.meta.get("call_index"), c.meta["same_storage_as_call"]]
            for c in ev.calls if c.meta and isinstance(c.meta.get("same_storage_as_call"), int)]


def evaluate(ev) -> Finding:
    observed = [c for c in ev.calls if c.meta]
    if not observed:
        return not_reached(CheckId.ALIASING)
    pairs = reuses(ev)
    t = ev.timing or {}
    timed = t.get("reused_output_reps") if isinstance(t.get("reused_output_reps"), int) else 0
    policy = ev.reused_output
    evidence = {"reused_output": policy, "same_storage": pairs[:20], "timed_reps_reusing": timed}
    if not pairs and not timed:
        return Finding(CheckId.ALIASING, Status.PASS, f"each of {len(observed)} calls returned its own storage",
                       evidence)
    where = (f"{pairs[0][0]} call {pairs[0][1]} returned the storage of call {pairs[0][2]}'s output" if pairs
             else "timed reps returned the storage of earlier reps' outputs")
    if policy == "reject":
        return Finding(CheckId.ALIASING, Status.FAIL,
                       f"outputs reuse one storage: {where}, overwriting what the caller holds from it", evidence)
    return Finding(CheckId.ALIASING, Status.PASS,
                   f"outputs reuse one storage ({where}): a static output buffer, allowed "
                   "(--reused-output reject makes it a finding)", evidence)
