"""`threads`: a call that returned is finished.

Python threads and child processes alive after the call that were not alive before it (threads
started and joined inside the call are honest), and the output must not change between its
snapshot at return and a re-read after a settle and a device sync. Native thread counts are kept
as evidence only: OpenMP and CUDA runtimes grow their pools lazily, even for honest calls."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached


def evaluate(ev) -> Finding:
    observed = [c for c in ev.calls if c.meta]
    if not observed:
        return not_reached(CheckId.THREADS)
    for c in observed:
        m = c.meta
        if m.get("py_threads_new"):
            return _fail(c, f"{m['py_threads_new']} Python thread(s) started by the call were still running "
                            "after it returned", m)
        if m.get("children_new"):
            return _fail(c, f"the call left child process(es) running: {m['children_new'][:5]}", m)
        if m.get("changed_after_return"):
            return _fail(c, "the output changed after the call returned (work finishing behind the clock)", m)
    return Finding(CheckId.THREADS, Status.PASS,
                   f"no thread or process outlived any of {len(observed)} calls; outputs stable after return",
                   {"calls": len(observed)})


def _fail(c, summary, meta) -> Finding:
    keys = ("py_threads_new", "native_threads", "children_new", "changed_after_return", "call_index")
    return Finding(CheckId.THREADS, Status.FAIL, f"{c.phase} call: {summary}",
                   {"phase": c.phase, **{k: meta.get(k) for k in keys}})
