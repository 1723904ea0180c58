"""The launcher's side of process containment: nothing a candidate starts outlives its worker.

The launcher is a child subreaper, so a process that leaves its worker's tree (double fork,
setsid, its parent dead) is re-parented to the launcher rather than to init: every descendant of a
worker is either still under a live worker, or a child of the launcher that is not a worker, which
is killed on sight. Trees are read from /proc/*/stat (the /proc/PID/task/*/children files are not
in every kernel). The naive bench's fork server (practice/naive.py) uses the same tools, and kills
what is left in a request's session.
"""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> None:
    """In a worker: SIGKILL when the launcher dies, so that no worker runs with nobody counting its processes."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stats():
    """(pid, fields after the command name: state, ppid, pgrp, session, ...) for every process visible now."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
            fields = stat[stat.rindex(b")") + 2:].split()   # the command name may hold spaces and ')'
            if len(fields) > 3:
                yield int(name), fields
        except (OSError, ValueError):
            continue


def table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, state) for every process visible now."""
    return {pid: (int(f[1]), f[0].decode()) for pid, f in _stats()}


def session(sid: int) -> list[int]:
    """Live (not zombie) processes in session `sid`."""
    return [pid for pid, f in _stats() if int(f[3]) == sid and f[0] != b"Z"]


def kill_session(sid: int, rounds: int = 50) -> None:
    """SIGKILL every process in session `sid` until none lives (one forked between two scans is
    found in the next). For processes whose tree was cut when a parent died: a session outlives it."""
    for _ in range(rounds):
        alive = session(sid)
        if not alive:
            return
        for pid in alive:
            _kill(pid)


def descendants(procs: dict[int, tuple[int, str]], root: int) -> list[int]:
    """Live (not zombie) processes under `root`, not counting it."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _state) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], list(kids.get(root, ()))
    while todo:
        pid = todo.pop()
        if procs[pid][1] != "Z":
            out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


def kill_tree(root: int, rounds: int = 50) -> None:
    """SIGKILL `root` and everything under it, again and again until nothing under it lives:
    a process forked between two scans is found in the next one (a killed process forks no more).
    What was re-parented away meanwhile (to the launcher) is `sweep`'s."""
    for _ in range(rounds):
        procs = table()
        alive = descendants(procs, root)
        if root in procs and procs[root][1] != "Z":
            alive.append(root)
        if not alive:
            return
        for pid in alive:
            _kill(pid)


def sweep(workers: set[int], rounds: int = 50) -> int:
    """Kill the launcher's children that are not live workers (escaped descendants) until none is left.
    Returns how many were killed. Zombies are left to the launcher's waitpid."""
    killed = 0
    for _ in range(rounds):
        found = strays(table(), workers)
        if not found:
            break
        for pid in found:
            kill_tree(pid, rounds=3)
            killed += 1
    return killed


def strays(procs: dict[int, tuple[int, str]], workers: set[int]) -> list[int]:
    """The launcher's live children that are not workers."""
    me = os.getpid()
    return [pid for pid, (ppid, state) in procs.items() if ppid == me and pid not in workers and state != "Z"]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
