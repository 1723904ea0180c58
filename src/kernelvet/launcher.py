"""The launcher: a torch-preloaded process that forks one fresh worker per candidate.

Why a separate process: the worker's parent must not be the judge (a candidate that kills
`os.getppid()` must not take the verdict with it), the worker must not inherit the judge's
memory (the secret seed, the reference), and `import torch` (seconds) should be paid once,
not per candidate. The launcher never initialises CUDA, so forking it is safe.

It also contains what the workers start (see reaper.py): it is a child subreaper, kills every
child of its that is not a live worker, kills a worker's whole tree when it exceeds its process
limit, and kills its process group when it ends.

Control channel (SOCK_SEQPACKET, one JSON object per packet; requests have exactly these keys):
  judge -> launcher  {"op": "spawn", "job": N, "cwd": DIR, "log": FILE, "limits": {...}, "cuda": BOOL}
                     + the worker's socket as SCM_RIGHTS  (limits: see containment.LIMIT_KEYS)
                     | {"op": "exit"}
  launcher -> judge  {"op": "ready", "pid": P, "steps": {STEP: SECONDS}}
                     | {"op": "refused", "job": N, "why": TEXT}
                     | {"op": "exited", "job": N, "code": C, "why": TEXT or null}
  worker -> judge    {"op": "spawned", "job": N, "containment": {...}}: sent by the forked child
                     itself, after confining itself and before the candidate exists, so that the
                     judge reads its pid (in the judge's own PID namespace) from SCM_CREDENTIALS.
`code` is the exit status, or minus the signal number, as in subprocess; `why` says what the
launcher did to it, if anything.

Started as `python -m kernelvet.launcher FD [namespaces|bwrap|off]`: with `namespaces`, every
worker enters namespaces of its own (namespaces.py) before anything else. In every mode a
worker's Triton, torch-extension, inductor and CUDA JIT caches live in its own directory, so that
nothing one candidate compiled (or planted) is loaded by another.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import time

from . import containment, namespaces, reaper

_SPAWN_KEYS = frozenset({"op", "job", "cwd", "log", "limits", "cuda"})
CONFINE = "off"     # what the workers get: this launcher's mode, from its command line
# Where a worker's compile caches go, under its directory's .cache ("": the directory itself).
CACHE_ENV = {"XDG_CACHE_HOME": ".", "TRITON_HOME": "", "TRITON_CACHE_DIR": "triton",
             "TORCH_EXTENSIONS_DIR": "torch_extensions", "TORCHINDUCTOR_CACHE_DIR": "inductor", "CUDA_CACHE_PATH": "nv"}
_GUARD_EVERY_S = 0.1


def _send(ctl: socket.socket, **msg) -> None:
    ctl.send(json.dumps(msg).encode())


def _child(ctl: socket.socket, fd: int, req: dict) -> None:
    """In the forked worker: new session, confined, nothing inherited but its one socket, then serve."""
    try:
        os.setsid()
        reaper.die_with_parent()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        took = containment.confine(req["limits"])
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)   # before a uid change
        took["confined"] = None
        if CONFINE == "namespaces":
            try:
                took["confined"] = namespaces.enter(req["cwd"], req["cuda"])   # forks: we may be a grandchild now
            except OSError as exc:
                _send(ctl, op="refused", job=req["job"], why=f"the worker could not be confined: {exc}")
                raise
            took["net"] = "namespace"
        took["caches"] = _private_caches(req["cwd"])
        if not req["cuda"]:
            took["triton"] = _triton_on_the_host()
        # From this process, not the launcher: the judge learns our pid from the kernel (SCM_CREDENTIALS).
        _send(ctl, op="spawned", job=req["job"], containment=took)
        ctl.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        for other in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
            n = int(other)
            if n > 2 and n != fd and n != log:
                try:
                    os.close(n)
                except OSError:
                    pass
        os.chdir(req["cwd"])
        os.environ["HOME"] = req["cwd"]
        os.environ["TMPDIR"] = req["cwd"]
        from kernelvet import worker
        worker.main(fd)
    except BaseException:   # noqa: BLE001 - into the worker's log (the report's output), if it is open yet
        import traceback
        traceback.print_exc()
    finally:
        os._exit(70)


def _private_caches(cwd: str) -> str:
    """Every compile cache a candidate's build may read or write, inside the worker's own directory
    (removed after the vet): a cache entry planted by one candidate is never loaded by another."""
    cache = os.path.join(cwd, ".cache")
    os.environ.update({var: os.path.normpath(os.path.join(cache, sub)) if sub else cwd for var, sub in CACHE_ENV.items()})
    return "private"


def _triton_on_the_host() -> str:
    """A worker without a device runs Triton kernels in Triton's interpreter (on the host's
    tensors, through numpy): a Triton candidate is judged for what it computes on a CPU too,
    rather than failing for want of a GPU driver. Its times are the interpreter's.
    Triton's own library (`tl.max`, `tl.sum`, ...) is made of @jit functions, bound to the compiler
    or to the interpreter as `triton.language` is imported: the launcher imported it for CUDA
    workers, so a host worker drops those modules and the candidate's import loads them afresh
    (all but the compiled extension, `triton._C`, which cannot register its types twice)."""
    os.environ["TRITON_INTERPRET"] = "1"
    for name in [n for n in sys.modules if (n == "triton" or n.startswith("triton.")) and not n.startswith("triton._C")]:
        del sys.modules[name]
    return "interpreter"


def _refusal(req) -> str | None:
    if not isinstance(req, dict) or set(req) != _SPAWN_KEYS or type(req["job"]) is not int:
        return f"a spawn request has exactly the keys {sorted(_SPAWN_KEYS)}"
    if type(req["cuda"]) is not bool:
        return "cuda must be true or false"
    if not all(isinstance(req[k], str) for k in ("cwd", "log")):
        return "cwd and log must be paths"
    return containment.check(req["limits"])


class _Job:
    def __init__(self, job: int, limits: dict, cuda: bool):
        self.job, self.limits, self.why = job, limits, None
        # The harness's own processes in a confined worker's tree (its init and the worker itself).
        self.overhead = namespaces.harness_processes(cuda, os.geteuid() == 0) if CONFINE == "namespaces" else 0

    def exit_reason(self, code: int) -> str | None:
        if self.why:
            return self.why
        if code == -signal.SIGXCPU:
            return f"it used up its CPU-time limit ({self.limits['cpu_s']} s of CPU)"
        return None


class _Steps(dict):
    """Seconds each start-up step took, sent with "ready" (`kernelvet check --verbose` prints them)."""

    def __init__(self):
        super().__init__()
        self._t = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self[name], self._t = round(now - self._t, 4), now


def serve(ctl_fd: int) -> None:
    namespaces.protect_self()   # a worker must not read the launcher's memory through /proc
    ctl = socket.socket(fileno=ctl_fd)
    steps = _Steps()
    # Paid once here, not per candidate. Triton is optional.
    import torch  # noqa: F401
    steps.done("import torch")
    try:
        import triton  # noqa: F401
        steps.done("import triton")
        # Triton's cache key, paid here once for every worker forked after (file reads, no CUDA)
        from . import triton_key
        steps.done(f"triton hash ({triton_key.prepare()})")
    except Exception:  # noqa: BLE001 - a broken triton install must not stop CPU vets
        pass
    import kernelvet.worker
    steps.done("import worker")
    # The first TorchDispatchMode in a process pays lazy imports (torch._dynamo no longer: see
    # dispatch_modes): pay what is left here, once.
    # (One-element CPU ops start no thread pool, so forking after them stays safe.)
    with kernelvet.worker._AtenTrace():
        torch.zeros(1) + 1
    steps.done("dispatch mode")
    # Everything loaded so far lives as long as we do: out of the collector's sight, a worker's
    # gc.collect() (before it paints freed memory) costs microseconds, not ~50 ms, and forked
    # workers do not dirty these pages by walking them. (No collection first: 0.07-0.11 s on the
    # H200's host to free the little that imports leave.)
    gc.freeze()
    steps.done("gc freeze")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reaper.become_subreaper()
    jobs: dict[int, _Job] = {}
    strays = False          # a worker ended: its leftovers may still be around
    next_guard = 0.0
    _send(ctl, op="ready", pid=os.getpid(), steps=dict(steps))
    while True:
        ready, _, _ = select.select([ctl], [], [], 0.02)
        if ready:
            data, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 4)
            if not data:
                break  # the judge is gone: so are we
            try:
                req = json.loads(data)
            except ValueError:
                req = None
            if isinstance(req, dict) and req.get("op") == "exit":
                break
            why = _refusal(req) if isinstance(req, dict) and req.get("op") == "spawn" else "unknown request"
            if why is None and len(fds) == 1:
                pid = os.fork()
                if pid == 0:
                    _child(ctl, fds[0], req)
                jobs[pid] = _Job(req["job"], req["limits"], req["cuda"])
            else:
                job = req.get("job") if isinstance(req, dict) else None
                _send(ctl, op="refused", job=job, why=why or "a spawn request carries exactly one socket")
            for fd in fds:
                os.close(fd)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in jobs:  # anything else we reap is an escaped process the sweep killed
                job = jobs.pop(pid)
                _kill_group(pid)
                strays = True
                code = os.waitstatus_to_exitcode(status)
                _send(ctl, op="exited", job=job.job, code=code, why=job.exit_reason(code))
        if (jobs or strays) and time.monotonic() >= next_guard:
            _guard(jobs)
            strays = bool(jobs)
            next_guard = time.monotonic() + _GUARD_EVERY_S
    for pid in jobs:
        _kill_group(pid)
        reaper.kill_tree(pid)
    reaper.sweep(set())


def _guard(jobs: dict[int, _Job]) -> None:
    """Kill escaped processes; kill the tree of a worker over its process limit (a fork bomb).
    One scan of /proc when all is well: this runs while candidates are being timed."""
    procs = reaper.table()
    if reaper.strays(procs, set(jobs)):
        reaper.sweep(set(jobs))
    for pid, job in jobs.items():
        n = len(reaper.descendants(procs, pid)) - job.overhead
        if n > job.limits["max_procs"] and job.why is None:
            job.why = (f"it started more than {job.limits['max_procs']} processes at once ({n} seen); "
                       "its whole process tree was killed")
            reaper.kill_tree(pid)
            reaper.sweep(set(jobs) - {pid})


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


if __name__ == "__main__":
    CONFINE = sys.argv[2] if len(sys.argv) > 2 else "off"
    serve(int(sys.argv[1]))
    # No interpreter teardown: the frozen objects are never freed, and native bindings would
    # report them as leaks on stderr.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
