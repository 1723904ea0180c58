"""Judge-side process handling: the launcher client and a handle on one worker.

Every byte that comes back from a worker goes through `protocol.recv` with a closed list of
reply types; every way a worker can end becomes a `WorkerEnded` with a reason.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from . import protocol

_REPLY_FIELDS = {
    "hello": {"pid", "ppid", "torch", "python"},
    "loaded": {"import_s", "build_s"},
    "ok": {"same_pointers"},
    "output": {"wall_s", "call_index", "py_threads_new", "native_threads", "children_new", "type",
               "exact_tensor", "aten_ops", "storage_ptr", "device", "changed_after_return", "inputs_changed",
               "py_threads_after_settle", "guard_overrun"},
    "probed": {"conclusive", "sleep_ms", "early_fraction", "compared", "why"},
    "timed": {"times_ms", "drain_ms", "null_drain_ms", "order", "unseen_pairs", "mismatches", "non_tensor",
              "first_sets", "overruns", "warmup_calls"},
    "looped": {"exact_tensor"},
    "state": set(),
    "failed": {"phase", "error", "traceback"},
}
REPLIES = {k: frozenset(v | {"integrity"}) for k, v in _REPLY_FIELDS.items()}

# Variables a worker may see. Nothing of the judge's (seed, report path) is ever in the environment.
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
             "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "NVCC_PREPEND_FLAGS",
             "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE")
LOG_LIMIT = 64 << 10


class WorkerEnded(Exception):
    """The worker cannot answer any more. `reason` says how it ended, in words."""

    def __init__(self, reason: str, code: int | None = None):
        super().__init__(reason)
        self.reason, self.code = reason, code


class CandidateRaised(Exception):
    def __init__(self, phase: str, error: str, tb: str):
        super().__init__(error)
        self.phase, self.error, self.tb = phase, error, tb


def worker_env() -> dict:
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith("TRITON_")})
    # Keep the user's compile caches (Triton, torch extensions): a cold cache costs seconds per vet.
    home = os.path.expanduser("~")
    env.setdefault("TRITON_CACHE_DIR", os.path.join(home, ".triton", "cache"))
    env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(home, ".cache", "torch_extensions"))
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def cpu_seconds(pid: int) -> float | None:
    """CPU time the kernel has accounted to a process's live threads (from /proc, not from the
    process: a clock the candidate cannot reach). None where /proc cannot tell."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


class Launcher:
    """A torch-preloaded process that forks workers (see launcher.py)."""

    def __init__(self, start_timeout: float = 120.0):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelvet.launcher", str(child.fileno())],
            pass_fds=[child.fileno()], env=worker_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd="/")
        child.close()
        self.ctl = parent
        self.exits: dict[int, int] = {}
        self.lock = threading.Lock()
        self._next_job = 0
        msg = self._read(time.monotonic() + start_timeout)
        if msg is None or msg.get("op") != "ready":
            self.close()
            raise RuntimeError("the kernelvet launcher did not start (is torch importable?)")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self, deadline: float, *, skip_exits: bool = True) -> dict | None:
        """Next control message; exit reports are recorded on the way (and returned if asked)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.ctl], [], [], left)
            if not ready:
                return None
            data = self.ctl.recv(1 << 16)
            if not data:
                return None
            msg = json.loads(data)
            if msg.get("op") == "exited":
                self.exits[msg["pid"]] = msg["code"]
                if skip_exits:
                    continue
            return msg

    def spawn(self, cwd: str, log: str) -> tuple[socket.socket, int]:
        with self.lock:
            self._next_job += 1
            job = self._next_job
            judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                socket.send_fds(self.ctl, [json.dumps({"op": "spawn", "job": job, "cwd": cwd, "log": log}).encode()],
                                [worker_end.fileno()])
            finally:
                worker_end.close()
            msg = self._read(time.monotonic() + 30)
            if msg is None or msg.get("op") != "spawned" or msg.get("job") != job:
                judge_end.close()
                raise RuntimeError("the kernelvet launcher did not fork a worker")
            return judge_end, int(msg["pid"])

    def exit_code(self, pid: int, wait: float) -> int | None:
        deadline = time.monotonic() + wait
        with self.lock:
            while pid not in self.exits:
                if self._read(deadline, skip_exits=False) is None:
                    break
            return self.exits.pop(pid, None)

    def close(self) -> None:
        try:
            self.ctl.close()
        finally:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.wait()


_shared: Launcher | None = None


def shared_launcher() -> Launcher:
    """One launcher per judge process, restarted if a candidate managed to kill it."""
    global _shared
    if _shared is None or not _shared.alive():
        _shared = Launcher()
        atexit.register(_shared.close)
    return _shared


class WorkerHandle:
    def __init__(self, launcher: Launcher, deadline: float):
        self.launcher = launcher
        self.deadline = deadline
        self.tmpdir = tempfile.mkdtemp(prefix="kernelvet-")
        self.log = os.path.join(self.tmpdir, ".output")
        self.sock, self.pid = launcher.spawn(self.tmpdir, self.log)
        self.ended: WorkerEnded | None = None

    def request(self, type_: str, body: dict | None = None, tensors=(), *, timeout: float | None = None,
                max_blob_bytes: int = 1 << 30) -> protocol.Message:
        if self.ended:
            raise self.ended
        deadline = self.deadline if timeout is None else min(self.deadline, time.monotonic() + timeout)
        try:
            if type_ is not None:
                protocol.send(self.sock, type_, body, tensors)
            msg = protocol.recv(self.sock, deadline=deadline, max_blob_bytes=max_blob_bytes, allowed=REPLIES)
        except protocol.Timeout:
            self._end(f"timed out (no answer within the {self._budget_text(deadline)})")
        except (protocol.PeerClosed, BrokenPipeError, ConnectionResetError):
            self._end_from_exit()
        except protocol.ProtocolError as exc:
            self._end(f"protocol violation: {exc}")
        if msg.type == "failed":
            raise CandidateRaised(msg.body.get("phase", "?"), str(msg.body.get("error", "")),
                                  str(msg.body.get("traceback", "")))
        return msg

    def hello(self) -> protocol.Message:
        return self.request(None)

    def _budget_text(self, deadline: float) -> str:
        return "time limit" if deadline >= self.deadline else "request's time limit"

    def _end(self, reason: str, code: int | None = None):
        self.kill()
        self.ended = WorkerEnded(reason, code)
        raise self.ended

    def _end_from_exit(self):
        code = self.launcher.exit_code(self.pid, wait=3.0)
        self.kill()
        if code is None:
            reason = "the worker vanished (no exit status: its launcher was killed?)"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            reason = f"the worker was killed by {name}"
        elif code == 0:
            reason = "the worker exited with status 0 without sending a result"
        else:
            reason = f"the worker exited with status {code}"
        self.ended = WorkerEnded(reason, code)
        raise self.ended

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def close(self) -> None:
        if not self.ended:
            try:
                protocol.send(self.sock, "bye")
            except OSError:
                pass
            self.launcher.exit_code(self.pid, wait=2.0)
        self.kill()
        self.sock.close()

    def output(self) -> str:
        """What the candidate printed, bounded; never parsed for results."""
        try:
            with open(self.log, "rb") as fh:
                raw = fh.read(LOG_LIMIT + 1)
        except OSError:
            return ""
        text = raw[:LOG_LIMIT].decode("utf-8", "replace")
        return text + ("\n[... output truncated]" if len(raw) > LOG_LIMIT else "")

    def cleanup(self) -> None:
        import shutil
        shutil.rmtree(self.tmpdir, ignore_errors=True)
