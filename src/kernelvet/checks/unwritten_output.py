"""`unwritten-output`: every element of the output was written by this call.

Before each call the worker paints the memory the allocator will hand out with a secret poison
(CUDA: a NaN with a random payload in every free cached block; CPU: glibc's perturb byte in every
malloc; a problem-supplied output buffer is painted too, with guard bands on both sides). An
output element still holding that bit pattern was never written: a kernel that launched nothing
and hoped the buffer or the allocator would hand back yesterday's answer. A guard element that
lost its poison was written past the end of the buffer."""

from __future__ import annotations

from ..metrics import poison_count
from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached


def evaluate(ev) -> Finding:
    recs = [c for c in ev.calls if c.output is not None]
    if not recs:
        return not_reached(CheckId.UNWRITTEN_OUTPUT)
    words = [f"{w & ((1 << 64) - 1):#x}" for w in ev.poison_words]
    overruns = [(c.phase, c.meta["guard_overrun"]) for c in ev.calls if c.meta.get("guard_overrun")]
    if overruns or (ev.timing or {}).get("overruns"):
        phase, n = overruns[0] if overruns else ("timed", ev.timing["overruns"])
        return Finding(CheckId.UNWRITTEN_OUTPUT, Status.FAIL,
                       f"the {phase} call wrote {n} elements into the guard bands around its output buffer",
                       {"phase": phase, "guard_elements_written": n})
    for c in recs:
        n = ev.memo(poison_count, c.output, ev.poison_words)
        if n:
            return Finding(CheckId.UNWRITTEN_OUTPUT, Status.FAIL,
                           f"{n} of {c.output.numel()} output elements were never written in the {c.phase} call "
                           "(they still hold the poison painted before it)",
                           {"phase": c.phase, "unwritten": n, "elements": c.output.numel(), "poison": words})
    return Finding(CheckId.UNWRITTEN_OUTPUT, Status.PASS,
                   f"no poison left in {len(recs)} outputs", {"outputs": len(recs), "poison": words})
