"""The launcher: a torch-preloaded process that forks one fresh worker per candidate.

Why a separate process: the worker's parent must not be the judge (a candidate that kills
`os.getppid()` must not take the verdict with it), the worker must not inherit the judge's
memory (the secret seed, the reference), and `import torch` (seconds) should be paid once,
not per candidate. The launcher never initialises CUDA, so forking it is safe.

Control channel (SOCK_SEQPACKET, one JSON object per packet):
  judge -> launcher  {"op": "spawn", "job": N, "cwd": DIR, "log": FILE} + the worker's socket as SCM_RIGHTS
  launcher -> judge  {"op": "ready"} | {"op": "spawned", "job": N, "pid": P} | {"op": "exited", "job": N, "pid": P, "code": C}
`code` is the exit status, or minus the signal number, as in subprocess.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys


def _send(ctl: socket.socket, **msg) -> None:
    ctl.send(json.dumps(msg).encode())


def _child(ctl: socket.socket, fd: int, req: dict) -> None:
    """In the forked worker: new session, nothing inherited but its one socket, then serve."""
    try:
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        ctl.close()
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for other in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
            n = int(other)
            if n > 2 and n != fd:
                try:
                    os.close(n)
                except OSError:
                    pass
        os.chdir(req["cwd"])
        os.environ["HOME"] = req["cwd"]
        os.environ["TMPDIR"] = req["cwd"]
        from kernelvet import worker
        worker.main(fd)
    finally:
        os._exit(70)


def serve(ctl_fd: int) -> None:
    ctl = socket.socket(fileno=ctl_fd)
    # Paid once here, not per candidate. Triton is optional.
    import torch  # noqa: F401
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken triton install must not stop CPU vets
        pass
    import kernelvet.worker
    # The first TorchDispatchMode in a process pays ~1 s of lazy imports: pay it here, once.
    # (One-element CPU ops start no thread pool, so forking after them stays safe.)
    with kernelvet.worker._AtenTrace():
        torch.zeros(1) + 1
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    jobs: dict[int, int] = {}
    _send(ctl, op="ready", pid=os.getpid())
    while True:
        ready, _, _ = select.select([ctl], [], [], 0.02)
        if ready:
            data, fds, _flags, _addr = socket.recv_fds(ctl, 1 << 16, 4)
            if not data:
                break  # the judge is gone: so are we
            req = json.loads(data)
            if req.get("op") == "exit":
                break
            if req.get("op") == "spawn" and len(fds) == 1:
                pid = os.fork()
                if pid == 0:
                    _child(ctl, fds[0], req)
                os.close(fds[0])
                jobs[pid] = req["job"]
                _send(ctl, op="spawned", job=req["job"], pid=pid)
            else:
                for fd in fds:
                    os.close(fd)
        while jobs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _send(ctl, op="exited", job=jobs.pop(pid, -1), pid=pid, code=os.waitstatus_to_exitcode(status))
    for pid in jobs:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    serve(int(sys.argv[1]))
