"""What the kernel's scheduler says about a process: the judge's witness of a busy host.

/proc/<pid>/task/*/schedstat holds, per thread, the time it ran and the time it waited on a run
queue (runnable, but a core was busy with something else). The process cannot edit either. Time
waited is what a busy host adds to a wall clock; threads that spin while a peer waits (OpenMP
barriers) add it to CPU time as well. Neither says anything about what the process claims.
A thread that exits takes its schedstat with it: the CPU time of work done on short-lived threads
is read from /proc/<pid>/stat, which keeps the thread group's whole account (exited threads, and
children the process has reaped), at the clock tick's resolution.
"""

from __future__ import annotations

import dataclasses
import os
import time


@dataclasses.dataclass(frozen=True)
class Sample:
    wall_s: float               # the judge's own clock
    cpu_s: float | None         # run time of the process's live threads (None where /proc cannot tell)
    wait_s: float | None        # run-queue wait of those threads
    main_wait_s: float | None   # run-queue wait of its main thread (the one that serves requests)
    group_cpu_s: float | None = None   # CPU time of the whole thread group, exited threads included
    thread_waits: dict[str, float] | None = None   # run-queue wait of each live thread, by its id
    main_run_s: float | None = None    # run time of its main thread


def sample(pid: int) -> Sample:
    run = wait = 0
    main = main_run = None
    waits = {}
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                fields = fh.read().split()
            run, wait = run + int(fields[0]), wait + int(fields[1])
            waits[tid] = int(fields[1]) / 1e9
            if tid == str(pid):
                main, main_run = int(fields[1]) / 1e9, int(fields[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return Sample(time.perf_counter(), None, None, None)
    return Sample(time.perf_counter(), run / 1e9, wait / 1e9, main, _group_cpu(pid), waits, main_run)


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _group_cpu(pid: int) -> float | None:
    """utime + stime + cutime + cstime of /proc/<pid>/stat: the thread group's CPU time, threads
    that have exited and reaped children included (fields 14-17; the name in field 2 may hold
    spaces and parentheses, so fields are counted from its last ')')."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) * _TICK_S
    except (OSError, ValueError, IndexError):
        return None


def between(a: Sample, b: Sample) -> dict:
    """Wall, CPU and run-queue wait seconds from `a` to `b` (CPU and waits None where unknown; CPU
    the larger of the live threads' and the thread group's account, the latter less a tick).
    The main thread's wait is time the wall clock ran while the worker's serving thread could
    not: what a busy host adds to the duration of a request, and nothing the worker did. Its run
    time leaves out what a virtual machine's host took from its core while it ran (steal), and
    time it spent blocked. The longest wait of any one thread is what a busy host adds at least
    to a parallel region, which ends with its slowest thread (the sum of all threads' waits would
    count overlapping waits once per thread)."""
    known = a.cpu_s is not None and b.cpu_s is not None
    main = a.main_wait_s is not None and b.main_wait_s is not None
    cpu = b.cpu_s - a.cpu_s if known else None
    if cpu is not None and a.group_cpu_s is not None and b.group_cpu_s is not None:
        # work done on threads that exited in between is missing from the live threads' sum
        cpu = max(cpu, b.group_cpu_s - a.group_cpu_s - _TICK_S)
    return {"judge_s": b.wall_s - a.wall_s,
            "cpu_s": cpu,
            "wait_s": max(b.wait_s - a.wait_s, 0.0) if known else None,
            "main_wait_s": max(b.main_wait_s - a.main_wait_s, 0.0) if main else None,
            "main_run_s": (max(b.main_run_s - a.main_run_s, 0.0)
                           if a.main_run_s is not None and b.main_run_s is not None else None),
            "max_thread_wait_s": _longest_wait(a.thread_waits, b.thread_waits)}


def _longest_wait(a: dict[str, float] | None, b: dict[str, float] | None) -> float | None:
    """The largest run-queue wait one thread alive at `b` added since `a` (a new thread's, all of it)."""
    if a is None or b is None:
        return None
    return max((max(w - a.get(tid, 0.0), 0.0) for tid, w in b.items()), default=0.0)
