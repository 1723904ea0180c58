"""Containment of one worker: the limits the judge asks for, and applying them in the forked child.

The judge decides (`limits()` builds the spawn request's "limits" object, a closed set of keys);
the launcher's child applies them before the candidate is imported (`confine()`) and reports what
actually took effect, since that depends on the platform: root ignores RLIMIT_NPROC, a network
namespace needs root or unprivileged user namespaces.
"""

from __future__ import annotations

import ctypes
import os
import resource

LIMIT_KEYS = frozenset({"cpu_s", "mem_bytes", "nofile", "max_procs", "no_net"})
NOFILE = 1024          # torch + triton open a few hundred at most
MAX_PROCS = 64         # processes (not threads) in one worker's tree: compilers fan out, fork bombs more
_CPU_GRACE_S = 30      # the RLIMIT_CPU backstop only matters when nothing outside is watching
_CLONE_NEWUSER, _CLONE_NEWNET = 0x10000000, 0x40000000


def default_mem_bytes() -> int:
    """Half the host's RAM (at least 2 GiB): one runaway worker cannot take the machine down."""
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 8 << 30
    return max(2 << 30, ram // 2)


def limits(seconds_left: float, *, mem_bytes: int | None, max_procs: int = MAX_PROCS, no_net: bool = True) -> dict:
    """The spawn request's limits. CPU time counts every thread, so the backstop scales with cores;
    the wall-clock deadline itself is enforced by the judge from outside."""
    cpu_s = int(max(seconds_left, 1.0) * (os.cpu_count() or 1)) + _CPU_GRACE_S
    return {"cpu_s": cpu_s, "mem_bytes": mem_bytes, "nofile": NOFILE, "max_procs": int(max_procs),
            "no_net": bool(no_net)}


def check(req_limits) -> str | None:
    """Why a limits object from the judge is malformed, or None. The launcher refuses such a spawn."""
    if not isinstance(req_limits, dict) or set(req_limits) != LIMIT_KEYS:
        return f"limits must have exactly the keys {sorted(LIMIT_KEYS)}"
    for key in ("cpu_s", "nofile", "max_procs"):
        if type(req_limits[key]) is not int or req_limits[key] <= 0:
            return f"limits.{key} must be a positive integer"
    mem = req_limits["mem_bytes"]
    if mem is not None and (type(mem) is not int or mem <= 0):
        return "limits.mem_bytes must be a positive integer or null"
    if type(req_limits["no_net"]) is not bool:
        return "limits.no_net must be true or false"
    return None


def confine(req_limits: dict) -> dict:
    """In the forked, still single-threaded child: apply the limits; return what took effect."""
    took: dict = {}
    _set(resource.RLIMIT_CORE, 0, took, "core")
    _set(resource.RLIMIT_NOFILE, req_limits["nofile"], took, "nofile")
    # SIGXCPU at the soft limit, SIGKILL a little later if the candidate ignores it.
    _set(resource.RLIMIT_CPU, req_limits["cpu_s"], took, "cpu_s", hard_extra=5)
    if req_limits["mem_bytes"] is not None:
        # RLIMIT_DATA, not RLIMIT_AS: it counts writable private memory, not address-space
        # reservations (glibc arenas, thread stacks' guard pages), so it tracks what is really used.
        _set(resource.RLIMIT_DATA, req_limits["mem_bytes"], took, "mem_bytes")
    if os.geteuid() != 0:
        # Per real uid, threads included, and root ignores it: only a backstop behind the launcher's
        # own count, set above what this uid already runs so that the worker can still start threads.
        _set(resource.RLIMIT_NPROC, _tasks_of_uid(os.getuid()) + 4 * req_limits["max_procs"]
             + 2 * (os.cpu_count() or 1), took, "nproc")
    return {"limits": took, "max_procs": req_limits["max_procs"],
            "net": _isolate_net() if req_limits["no_net"] else "allowed"}


def _set(which: int, value: int, took: dict, name: str, hard_extra: int = 0) -> None:
    _soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:  # an unprivileged process cannot raise its hard limit
        value = min(value, hard)
        hard_extra = min(hard_extra, hard - value)
    try:
        resource.setrlimit(which, (value, value + hard_extra))
        took[name] = value
    except (ValueError, OSError):
        took[name] = None


def _tasks_of_uid(uid: int) -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                n += int(fields["Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return n


def _isolate_net() -> str:
    """A network namespace with nothing in it but a loopback that is down.
    As root (CAP_SYS_ADMIN) directly; otherwise inside a new user namespace that maps our own
    uid/gid to themselves (needs a single-threaded process: the forked child is one)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) == 0:
        return "namespace"
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return f"none ({os.strerror(ctypes.get_errno())})"
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    except OSError:
        pass  # the namespace stands; only the ids look different from inside
    return "user namespace"
