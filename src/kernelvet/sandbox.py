"""Which confinement the workers get (`choose`), and the optional bubblewrap sandbox around the
launcher (and so around every worker it forks).

Modes: `auto` (the default) confines every worker with namespaces of its own (namespaces.py)
where the kernel allows it, else runs the launcher under bubblewrap where that works, else
refuses; `namespaces` and `strict` (bubblewrap) insist on one; `off` confines nothing, and the
report says so.

Inside: the whole file system read-only (/tmp included), one read-write directory for the
launcher's per-worker directories, the compile caches, no network, a private PID namespace (the
candidate cannot see or signal the judge, and when the sandbox ends the kernel kills every process
in it), /dev minimal plus the GPU device nodes.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess

from .errors import UsageError

MODES = ("auto", "namespaces", "strict", "off")
# As root bwrap keeps every capability (enough to remount / read-write): drop them all.
_ISOLATION = ["--cap-drop", "ALL", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]


def _base(bwrap: str) -> list[str]:
    # /tmp stays (read-only): candidate and problem files often live there; workers write only in their dir.
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for node in sorted(glob.glob("/dev/nvidia*")) + (["/dev/dri"] if os.path.isdir("/dev/dri") else []):
        argv += ["--dev-bind", node, node]
    return argv + _ISOLATION


@functools.lru_cache(maxsize=None)
def _trial(bwrap: str) -> str | None:
    """Why bwrap cannot run our sandbox here (no user namespaces, a container without the rights...), or None."""
    try:
        run = subprocess.run(_base(bwrap) + ["true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if run.returncode == 0 else (run.stderr.decode(errors="replace").strip() or f"exit {run.returncode}")


def resolve(mode: str) -> str | None:
    """The bwrap executable to use for `mode`, or None to run without a sandbox."""
    if mode not in MODES:
        raise UsageError(f"--sandbox must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "off":
        return None
    bwrap = shutil.which("bwrap")
    why = "bwrap (bubblewrap) is not installed" if bwrap is None else _trial(bwrap)
    if why is None:
        return bwrap
    if mode == "strict":
        raise UsageError(f"--sandbox strict: {why}; install bubblewrap or use --sandbox auto|off")
    return None


def choose(mode: str) -> tuple[str, str | None]:
    """(what confines the workers: "namespaces" | "bwrap" | "off", the bwrap executable or None).
    UsageError, in one line, where `mode` cannot be had here."""
    if mode not in MODES:
        raise UsageError(f"--sandbox must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "off":
        return "off", None
    if mode in ("auto", "namespaces"):
        from . import namespaces
        why = namespaces.probe()
        if why is None:
            return "namespaces", None
        if mode == "namespaces":
            raise UsageError(f"--sandbox namespaces: this machine cannot confine a worker ({why})")
        bwrap = resolve("auto")
        if bwrap is not None:
            return "bwrap", bwrap
        raise UsageError(f"no confinement for candidates here (namespaces: {why}; bubblewrap: "
                         f"{_why_not_bwrap()}); refusing to run them unconfined: pass --sandbox off to accept that")
    return "bwrap", resolve("strict")


def _why_not_bwrap() -> str:
    bwrap = shutil.which("bwrap")
    return "not installed" if bwrap is None else (_trial(bwrap) or "unusable")


def command(bwrap: str, writable: list[str]) -> list[str]:
    """bwrap's argv up to the command; `writable` directories are bound read-write at the same path."""
    argv = _base(bwrap)
    for path in writable:
        os.makedirs(path, exist_ok=True)
        argv += ["--bind", path, path]
    return argv + ["--"]
