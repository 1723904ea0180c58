"""`threads`: a call that returned is finished.

Work after return is what fails, not a live thread: a lazily created pool whose futures were all
joined before return sits idle on its queue and passes. What counts (`after_return`): CPU time
the candidate's Python threads used between return and the end of the settle, any of them still
runnable when it ends, device allocations made while the caller slept, child processes alive
after the call that were not alive before it, and an output that changed between its snapshot at
return and a re-read after the settle and a device sync. Threads alive after return and native
thread counts are kept as evidence only: OpenMP and CUDA runtimes grow their pools lazily, even
for honest calls, and an idle pool is not work."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached

CPU_AFTER_RETURN_MS = 1.0   # an idle pool uses microseconds; a matmul finishing off the clock, milliseconds


def work_after_return(after) -> str:
    """Why the worker's `after_return` observation says work went on after return ('' if none)."""
    if not isinstance(after, dict):
        return ""
    cpu, running, allocs = _num(after.get("cpu_ms")), _num(after.get("running")), _num(after.get("device_allocs"))
    if cpu > CPU_AFTER_RETURN_MS:
        return f"its threads used {cpu:.3g} ms of CPU after it returned"
    if running:
        return f"{int(running)} of its threads were still running after it returned"
    if allocs:
        return f"{int(allocs)} device allocation(s) were made after it returned"
    return ""


def evaluate(ev) -> Finding:
    observed = [c for c in ev.calls if c.meta]
    if not observed:
        return not_reached(CheckId.THREADS)
    for c in observed:
        m = c.meta
        if m.get("children_new"):
            return _fail(c, f"the call left child process(es) running: {m['children_new'][:5]}", m)
        if m.get("changed_after_return"):
            return _fail(c, "the output changed after the call returned (work finishing behind the clock)", m)
        why = work_after_return(m.get("after_return"))
        if why:
            return _fail(c, f"work went on after the call returned: {why} (work finishing behind the clock)", m)
    idle = max((_num(c.meta.get("py_threads_new")) for c in observed), default=0)
    return Finding(CheckId.THREADS, Status.PASS,
                   f"no work or process outlived any of {len(observed)} calls; outputs stable after return"
                   + (f" ({int(idle)} idle thread(s) left alive)" if idle else ""),
                   {"calls": len(observed), "idle_threads_left": int(idle),
                    "after_return": [c.meta.get("after_return") for c in observed]})


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0


def _fail(c, summary, meta) -> Finding:
    keys = ("py_threads_new", "native_threads", "children_new", "changed_after_return", "after_return", "call_index")
    return Finding(CheckId.THREADS, Status.FAIL, f"{c.phase} call: {summary}",
                   {"phase": c.phase, **{k: meta.get(k) for k in keys}})
