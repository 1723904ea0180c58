"""`unwritten-output`: every element of the output was written by this call.

Before each call the worker paints the memory the allocator will hand out with a secret poison
(CUDA: a NaN with a random payload in every free cached block; CPU: glibc's perturb byte in every
malloc). An output element still holding that bit pattern was never written: a kernel that
launched nothing and hoped the allocator would hand back yesterday's answer."""

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
    for c in recs:
        n = poison_count(c.output, ev.poison_words)
        if n:
            return Finding(CheckId.UNWRITTEN_OUTPUT, Status.FAIL,
                           f"{n} of {c.output.numel()} output elements were never written in the {c.phase} call "
                           "(they still hold the poison painted before it)",
                           {"phase": c.phase, "unwritten": n, "elements": c.output.numel(), "poison": words})
    return Finding(CheckId.UNWRITTEN_OUTPUT, Status.PASS,
                   f"no poison left in {len(recs)} outputs", {"outputs": len(recs), "poison": words})
