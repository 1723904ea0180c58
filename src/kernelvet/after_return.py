"""What a call's threads did after it returned (the worker's observation for `threads`).

A live thread is not work: a lazily created pool whose futures were all joined sits blocked on its
queue, using no CPU. Work after return is what such a thread does while nobody's clock runs: CPU
time between return and the end of the settle, a thread still runnable when the settle ends, or
device memory allocated (kernels producing tensors) by anyone while the caller was asleep.

The window opens the moment the call returns (a thread that launches its kernels right after
return is done with them within a millisecond) and closes after the settle; the harness's own
work in it runs on the calling thread, which is not watched, and its own allocations (the
output's snapshot) are counted and taken out.

CPU time comes from each thread's CPU clock (`clock_gettime` on the thread's clock id, ns), not
from `/proc/self/task/*/schedstat`: the kernel brings a thread's account up to date when its clock
is read, while schedstat shows a thread that is running on another core as it was at the last
tick or switch. Read at return, schedstat would move up to a tick of a pool thread's work before
return into the window (measured: a median 1.4 ms behind on a spinning thread). A thread that
ended during the settle can no longer be read, so its share is what the process clock (which
keeps the time of ended threads) counted beyond the threads still alive; the process clock too
counts other threads' running time as of their last update, so it is read right after their own
clocks, which updated them.
"""

from __future__ import annotations

import dataclasses
import os
import time

_process_ns = time.process_time_ns   # bound when the worker starts, before any candidate exists
_TICK_NS = 1e9 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _thread_clock(tid: int) -> int:
    """Linux's clock id of one thread's CPU clock (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED))."""
    return ((~tid) << 3) | 4 | 2


def thread_cpu_ns() -> dict[int, int]:
    """CPU time of every thread of this process, by native id, as of now."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            out[int(tid)] = time.clock_gettime_ns(_thread_clock(int(tid)))
            continue
        except (OSError, ValueError, OverflowError, AttributeError):
            pass   # the thread ended, or no per-thread clocks here
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as fh:
                out[int(tid)] = int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            try:   # no schedstat in this kernel: utime + stime, in clock ticks
                with open(f"/proc/self/task/{tid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                out[int(tid)] = int((int(fields[11]) + int(fields[12])) * _TICK_NS)
            except (OSError, ValueError, IndexError):
                pass
    return out


def runnable(tid: int) -> bool:
    """The thread is running or waiting for a core (state R), not blocked."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, IndexError):
        return False


@dataclasses.dataclass(frozen=True)
class Window:
    watched: frozenset[int]      # native ids of the candidate's Python threads alive at return
    process_ns: int
    threads_ns: dict
    device_allocs: int | None


def open_window(watched, device_allocs: int | None) -> Window:
    threads = thread_cpu_ns()   # first: reading them brings the process clock up to date
    return Window(frozenset(watched), _process_ns(), threads, device_allocs)


def close_window(win: Window, watched_now, device_allocs: int | None, harness_allocs: int = 0) -> dict:
    """The evidence: how many threads were watched, how many ended or still run, their CPU ms
    after return, and device allocations in the window (None where the device keeps no count)
    beyond the `harness_allocs` the harness itself made in it."""
    now = thread_cpu_ns()
    process = _process_ns() - win.process_ns
    watched = (win.watched | frozenset(watched_now))
    own = sum(ns - win.threads_ns.get(tid, 0) for tid, ns in now.items() if tid in watched)
    others = sum(ns - win.threads_ns.get(tid, 0) for tid, ns in now.items() if tid not in watched)
    ended = [tid for tid in win.watched if tid not in now]
    gone = max(process - own - others, 0) if ended else 0
    return {"threads": len(watched), "ended": len(ended),
            "running": sum(1 for tid in watched if tid in now and runnable(tid)),
            "cpu_ms": round((own + gone) / 1e6, 4),
            "device_allocs": None if device_allocs is None or win.device_allocs is None
            else device_allocs - win.device_allocs - harness_allocs}
