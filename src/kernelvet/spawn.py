"""Judge-side process handling: the launcher client and a handle on one worker.

Every byte that comes back from a worker goes through `protocol.recv` with a closed list of
reply types; every way a worker can end becomes a `WorkerEnded` with a reason.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from . import containment, namespaces, protocol, sched, wire
from . import sandbox as sandboxing

# What a worker may answer, and to which request (wire.py: one typed definition per message).
REPLIES, ANSWERS = wire.REPLIES, wire.ANSWERS

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


class JudgeOverran(Exception):
    """The judge's own work between a candidate's requests took longer than its budget: the
    problem's doing (its outputs' size), not the candidate's. `spent_s`, `budget_s` in seconds."""

    def __init__(self, spent_s: float, budget_s: float):
        super().__init__(f"{spent_s:.0f} s of the judge's own work between the candidate's requests")
        self.spent_s, self.budget_s = spent_s, budget_s


class CandidateRaised(Exception):
    def __init__(self, phase: str, error: str, tb: str):
        super().__init__(error)
        self.phase, self.error, self.tb = phase, error, tb


def worker_env() -> dict:
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith("TRITON_")})
    # The launcher's own Triton cache directory (it keeps Triton's installation hash there: see
    # triton_key). Workers compile into private caches in their own directory (launcher._child).
    env.setdefault("TRITON_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".triton", "cache"))
    # kernelvet's own package first; then the folders the user's PYTHONPATH names (a problem's
    # imports may live there), as absolute paths: a relative or empty entry would name the worker's
    # own directory, where the candidate writes.
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    user = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([own, *user]))
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


def _children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return []


def _start_time(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 1 << 62


# What the launcher (and, for "spawned", the freshly forked worker) may say: exactly these keys.
_CONTROL = {"ready": {"op", "pid", "steps"}, "refused": {"op", "job", "why"}, "exited": {"op", "job", "code", "why"},
            "spawned": {"op", "job", "containment"}}
_UCRED = struct.Struct("3i")
# The requests whose worker copies a set's input values, to compare or put back (worker/host_copies.py)
_COPYING = frozenset({"call", "probe", "time"})


class Launcher:
    """A torch-preloaded process that forks workers (see launcher.py), optionally inside bubblewrap.

    `sandbox`: "auto" (namespaces, else bwrap, else UsageError), "namespaces", "strict" (bwrap)
    or "off" (see sandbox.choose); `self.sandbox` says which one the workers get.
    `mem_limit`: bytes of data memory per CPU-only worker (None: no limit); CUDA workers get none,
    since the CUDA driver's address-space reservations do not mix with memory rlimits.
    `max_procs`: processes one worker's tree may hold at once before the launcher kills it.
    """

    def __init__(self, start_timeout: float = 120.0, *, sandbox: str = "auto",
                 mem_limit: int | None = containment.default_mem_bytes(), max_procs: int = containment.MAX_PROCS,
                 wait: bool = True):
        self.mode = sandbox
        self.sandbox, bwrap = sandboxing.choose(sandbox)
        namespaces.protect_self()   # the judge: no worker may read its memory through /proc
        self.mem_limit, self.max_procs = mem_limit, max_procs
        # Every worker's directory lives under this one, so that a sandbox needs to open only it.
        self.root = tempfile.mkdtemp(prefix="kernelvet-")
        # Workers of another uid pass through it to their own directories (mode 0700, each its own).
        os.chmod(self.root, 0o711)
        env = worker_env()
        env["TMPDIR"] = self.root   # the only writable place inside the sandbox (the worker gets its own)
        argv = [sys.executable, "-m", "kernelvet.launcher"]
        if bwrap:
            argv = sandboxing.command(bwrap, [self.root]) + argv
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The kernel stamps each packet with its sender's pid, translated into our PID namespace.
        parent.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.proc = subprocess.Popen(
            argv + [str(child.fileno()), self.sandbox], pass_fds=[child.fileno()], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, cwd="/")
        child.close()
        self.ctl = parent
        self.exits: dict[int, tuple[int, str | None]] = {}
        self.lock = threading.Lock()
        self._ready_lock = threading.Lock()
        self._next_job = 0
        self._started, self._start_timeout = False, start_timeout
        self.start_steps: dict[str, float] = {}   # the launcher's own start-up, seconds per step
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until the launcher has imported torch and said so (`wait=False` lets the caller work
        meanwhile; the process must still be started from a thread that lives on, since the
        launcher dies with the thread that forked it)."""
        with self._ready_lock:
            if self._started:
                return
            msg = self._read(time.monotonic() + self._start_timeout)
            if msg is None or msg.get("op") != "ready":
                self.close()
                raise RuntimeError("the kernelvet launcher did not start (is torch importable?"
                                   + (" does bwrap work here?)" if self.sandbox == "bwrap" else ")"))
            steps = msg["steps"]
            if isinstance(steps, dict):
                self.start_steps = {str(k): float(v) for k, v in steps.items() if isinstance(v, (int, float))}
            self._started = True

    @property
    def ready(self) -> bool:
        return self._started

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
            data, anc, _flags, _addr = self.ctl.recvmsg(1 << 16, socket.CMSG_SPACE(_UCRED.size))
            if not data:
                return None
            msg = json.loads(data)
            if not isinstance(msg, dict) or set(msg) != _CONTROL.get(msg.get("op"), ()):
                raise RuntimeError(f"the kernelvet launcher sent a malformed control message: {data[:200]!r}")
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    msg["sender_pid"] = _UCRED.unpack(cdata[:_UCRED.size])[0]
            if msg["op"] == "exited":
                self.exits[msg["job"]] = (msg["code"], msg["why"])
                if skip_exits:
                    continue
            return msg

    def spawn(self, cwd: str, log: str, limits: dict, cuda: bool = False) -> tuple[socket.socket, int, int, dict]:
        """Fork a worker (`cuda`: one that will use a GPU): its socket, its pid (in our PID
        namespace), its job number, and what containment took effect."""
        self.wait_ready()
        with self.lock:
            self._next_job += 1
            job = self._next_job
            judge_end, worker_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            req = {"op": "spawn", "job": job, "cwd": cwd, "log": log, "limits": limits, "cuda": bool(cuda)}
            try:
                socket.send_fds(self.ctl, [json.dumps(req).encode()], [worker_end.fileno()])
            finally:
                worker_end.close()
            msg = self._read(time.monotonic() + 30)
            while msg is not None and msg.get("job") != job:   # a late report of an earlier job
                msg = self._read(time.monotonic() + 30)
            if msg is None or msg["op"] != "spawned" or not msg.get("sender_pid"):
                judge_end.close()
                why = msg["why"] if msg is not None and msg["op"] == "refused" else "no answer"
                raise RuntimeError(f"the kernelvet launcher did not fork a worker: {why}")
            return judge_end, msg["sender_pid"], job, msg["containment"]

    def exit_status(self, job: int, wait: float) -> tuple[int | None, str | None]:
        """The job's exit code and what the launcher did to it (None, None: no report in time)."""
        deadline = time.monotonic() + wait
        with self.lock:
            while job not in self.exits:
                if self._read(deadline, skip_exits=False) is None:
                    break
            return self.exits.pop(job, (None, None))

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
            shutil.rmtree(self.root, ignore_errors=True)


_shared: dict[str, Launcher] = {}
_shared_lock = threading.Lock()


def shared_launcher(sandbox: str = "auto", wait: bool = True) -> Launcher:
    """One launcher per judge process and sandbox mode, restarted if a candidate managed to kill it."""
    with _shared_lock:
        launcher = _shared.get(sandbox)
        if launcher is None or not launcher.alive():
            launcher = _shared[sandbox] = Launcher(sandbox=sandbox, wait=False)
            atexit.register(launcher.close)
    if wait:
        launcher.wait_ready()
    return launcher


def _through_host(tensors):
    """Blobs with nothing lent for them, any device tensor among them as host bytes (lending.py;
    only a judge that imported torch can hold one)."""
    if not tensors or "torch" not in sys.modules:
        return tensors
    from . import lending
    return lending.through_host(tensors)


def _cpu_only(device) -> bool:
    """Memory limits are for CPU workers only. Without the device: only where no CUDA is visible.
    (A device's text, "cpu" or "cuda:N", needs no torch: the CLI spawns before its import ends.)"""
    if device is not None:
        return str(device).partition(":")[0] == "cpu"
    import torch
    return not torch.cuda.is_available()


class WorkerHandle:
    """One worker. `containment` says what confines it, for the report: {"sandbox":
    "namespaces"|"bwrap"|"off", "net": "namespace"|"user namespace"|"bwrap"|"none (why)",
    "limits": {...}, "max_procs": N, "caches": "private", "confined": {...} or None}; "confined"
    is what namespaces.enter gave it (namespaces, uid, gid, groups, capabilities, no_new_privs,
    proc, writable, hidden)."""

    # A big problem's vet on CUDA (a lean holding) sets it: before each request, the device blocks
    # the judge freed since the last one (draws, float64 references, outputs compared and dropped)
    # go back to the device. Kept in the judge's allocator they would be memory the worker, which
    # the request sets to work, cannot have, and which the plan does not count.
    give_back = False
    # A holding whose worker keeps its input copies on the host (sizes.Holding.copies_on_host)
    # sets it: each request that makes such copies says so.
    copies_on_host = False
    # Set by `charge_requests_only`: the judge's own time between requests so far, its bound, and
    # since when the worker has waited on the judge (None: it is working, or no one counts)
    judge_s = 0.0
    judge_budget_s: float | None = None
    _idle_since: float | None = None

    def __init__(self, launcher: Launcher, deadline: float, device=None):
        self.launcher = launcher
        self.deadline = deadline
        self.tmpdir = tempfile.mkdtemp(prefix="worker-", dir=launcher.root)
        self.log = os.path.join(self.tmpdir, ".output")
        sandboxed = launcher.sandbox == "bwrap"
        # In bwrap or its own namespaces the network is gone already (and a user namespace of the
        # child's own would hide its uid).
        cpu = _cpu_only(device)
        limits = containment.limits(deadline - time.monotonic(), max_procs=launcher.max_procs,
                                    no_net=launcher.sandbox == "off", mem_bytes=launcher.mem_limit if cpu else None)
        self.sock, self.pid, self.job, took = launcher.spawn(self.tmpdir, self.log, limits, cuda=not cpu)
        if sandboxed:
            took["net"] = "bwrap"
        self.containment = {"sandbox": launcher.sandbox, **took}
        # Processes of the harness between the forked child and the worker (a PID namespace's relay
        # and init): the scheduler's clocks are read from the worker itself (see `clock_pid`).
        self._harness_depth = namespaces.harness_processes(not cpu, os.geteuid() == 0) \
            if launcher.sandbox == "namespaces" else 0
        self._clock_pid: int | None = None
        self.ended: WorkerEnded | None = None
        # Tensor bytes one reply may announce: the judge sets it from the problem (sizes.py); until
        # then (start-up, the reference's load) replies carry no tensors of any size.
        self.max_blob_bytes = 1 << 20
        # Big CUDA tensors travel in device buffers the judge lends per request (lending.py): the
        # bytes one reply's output may take (set by the judge from the problem), and whether this
        # worker mapped the probe buffer (None: not asked yet)
        self.device = device
        self.room_bytes = 0
        self._lend_ok: bool | None = False if cpu else None
        self.transfers = "host"
        self._greeted = False
        self._pending: list[str] = []   # requests sent by `send_only` whose answers are unread, in order
        self.prepared: protocol.Message | None = None   # its `prepare` answer, read ahead (`read_prepared`)
        self._round_trips: dict[str, list] = {}

    def charge_requests_only(self, budget_s: float) -> None:
        """From now on the deadline moves on by the judge's own time between requests (comparing a
        big problem's outputs on the host takes seconds each): the candidate is charged only for the
        time its worker holds a request. That time of the judge's is bounded by `budget_s` in all,
        past which a request raises `JudgeOverran` (the problem ran out of time, not the candidate)."""
        self.judge_s, self.judge_budget_s = 0.0, budget_s
        self._idle_since = None if self._pending else time.monotonic()

    def _credit_judge_time(self, now: float) -> None:
        if self._idle_since is None or self.judge_budget_s is None:
            return
        gap, self._idle_since = now - self._idle_since, None
        self.deadline += gap
        self.judge_s += gap
        if self.judge_s > self.judge_budget_s:
            raise JudgeOverran(self.judge_s, self.judge_budget_s)

    def request(self, type_: str, body: dict | None = None, tensors=(), *, timeout: float | None = None,
                max_blob_bytes: int | None = None, samples: list | None = None) -> protocol.Message:
        """One request and its reply. `samples` (see `clocked`): the judge's clocks read into it as
        the request is sent and as its reply arrives."""
        if type_ is not None:
            self._give_back()   # before the loan: its buffers must not split the judge's freed blocks
        if self.copies_on_host and type_ in _COPYING:
            body = {**(body or {}), "copies_on_host": True}
        loan = self._loan(type_, body or {}, tensors) if type_ is not None else None
        if loan is not None:
            body, tensors = {**(body or {}), "lent": loan.specs()}, loan.blobs
        else:   # a set the judge keeps on the device, through the host
            tensors = _through_host(tensors)
        try:
            return self._request(type_, body, tensors, loan, timeout, max_blob_bytes, samples)
        finally:
            if loan is not None:
                loan.close()

    def clocked(self, type_: str, body: dict, tensors=(), *,
                max_blob_bytes: int | None = None) -> tuple[protocol.Message, dict]:
        """A request and the judge's clocks over the worker's part of it (sched.between): from its
        send to its reply's arrival. The judge's own work either side stays outside: a loan's
        buffers made and filled with the set the request carries, the lent outputs copied out. On
        an 80 GB H100, filling a 128 MiB set into its lent buffer from the judge's host was 1.4-1.9
        ms of a 4096^3 GEMM's 5.6-6.0 ms null pair request, whose two calls are the null function's."""
        samples = []
        msg = self.request(type_, body, tensors, max_blob_bytes=max_blob_bytes, samples=samples)
        return msg, sched.between(samples[0], samples[-1])

    def _give_back(self) -> None:
        """Under `give_back`: the device blocks the judge's allocator holds freed go back to the
        device. Before a request's loan is made, so that its buffers take segments of their own: a
        buffer carved from a freed block leaves the rest of that block held, beyond the judge's
        reach to give back while the buffer lives (126 MiB of a freed 128 MiB set, on an H100)."""
        if self.give_back:
            torch = sys.modules.get("torch")
            if torch is not None and torch.cuda.is_initialized():
                torch.cuda.empty_cache()

    def _loan(self, type_: str, body: dict, tensors):
        """The device buffers lent for this request (lending.JudgeLoan), or None: tensors through
        the host. Only in a judge that runs CUDA already, for a worker that mapped the probe."""
        torch = sys.modules.get("torch")
        if self._lend_ok is False or torch is None or not torch.cuda.is_initialized():
            return None
        from . import devshare, lending
        rooms = lending.rooms_for(type_, body)
        if not lending.worth_lending(tensors, rooms, self.room_bytes):
            return None
        if self._lend_ok is None:
            self._lend_ok = False   # while it is asked
            self._lend_ok = self._probe_lending()
            if not self._lend_ok:
                return None
            self._give_back()   # the probe's buffers, freed: not to be carved by this request's loan
        try:
            return lending.JudgeLoan.make(torch.device(self.device), tensors, rooms, self.room_bytes)
        except (devshare.DeviceShareError, torch.OutOfMemoryError):
            return None   # no device memory to lend now: through the host

    def _probe_lending(self) -> bool:
        """Whether this worker maps a lent buffer and returns its bytes through a lent room."""
        import torch
        from . import codec, devshare, lending
        if not devshare.available():
            self.transfers = "host (the CUDA runtime torch loaded was not found)"
            return False
        dev = torch.device(self.device)
        probe = torch.randint(0, 256, (devshare.LEND_MIN_BYTES,), dtype=torch.uint8, device=dev)
        try:
            loan = lending.JudgeLoan.make(dev, [codec.to_blob(probe)], 1, devshare.LEND_MIN_BYTES)
        except devshare.DeviceShareError as exc:
            self.transfers = f"host ({exc})"
            return False
        try:
            msg = self._request("lend", {"lent": loan.specs()}, loan.blobs, loan, 30.0, 2 * devshare.LEND_MIN_BYTES)
            back = msg.tensors[0].data if len(msg.tensors) == 1 else None
            ok = isinstance(back, torch.Tensor) and torch.equal(back, probe)
            self.transfers = "device (CUDA IPC)" if ok else "host (the worker did not return the probe buffer)"
            return ok
        except CandidateRaised as exc:
            self.transfers = f"host (the worker could not map a lent buffer: {exc.error})"[:300]
            return False
        finally:
            loan.close()

    # (the request as `request` made it: its type, body, blobs, loan, limits, and where its clocks go)
    def _request(self, type_, body, tensors, loan, timeout, max_blob_bytes, samples=None) -> protocol.Message:
        if self.ended:
            raise self.ended
        if type_ is not None and self._pending:
            raise RuntimeError(f"answers to {self._pending} are unread")   # harness bug: replies come in order
        self._credit_judge_time(time.monotonic())
        deadline = self.deadline if timeout is None else min(self.deadline, time.monotonic() + timeout)
        if max_blob_bytes is None:
            max_blob_bytes = self.max_blob_bytes
        t0 = time.monotonic()
        ended = None   # how the worker ended in this request ("": read from its exit)
        try:
            if type_ is not None:
                if samples is not None:
                    samples.append(sched.sample(self.clock_pid))
                protocol.send(self.sock, type_, body, tensors)
            msg = protocol.recv(self.sock, deadline=deadline, max_blob_bytes=max_blob_bytes, allowed=REPLIES)
            if samples is not None:
                samples.append(sched.sample(self.clock_pid))
            if any(b.lent is not None for b in msg.tensors):
                if loan is None:
                    raise protocol.ProtocolError("a blob names a lent buffer, but none was lent for this request")
                msg = loan.received(msg)
        except protocol.Timeout:
            ended = f"timed out (no answer within the {self._budget_text(deadline)})"
        except (protocol.PeerClosed, BrokenPipeError, ConnectionResetError):
            ended = ""
        except protocol.ProtocolError as exc:
            ended = f"protocol violation: {exc}"
        asked = type_ or (self._pending.pop(0) if self._pending else None)
        trip = self._round_trips.setdefault(asked or "hello", [0, 0.0])   # the request it ended in too
        trip[0] += 1
        trip[1] += time.monotonic() - t0
        if ended is not None:
            self._end(ended) if ended else self._end_from_exit()
        if self.judge_budget_s is not None and not self._pending:
            self._idle_since = time.monotonic()   # the worker waits on the judge from here
        if asked is None and self._greeted:
            asked = "?"   # the answer to a request sent past this handle: any reply but a second hello
        if (msg.type == "hello") != (asked is None) or (
                asked in ANSWERS and msg.type not in (ANSWERS[asked], "failed")):
            self._end(f"protocol violation: a {msg.type!r} reply to a {asked or 'hello'!r} request")
        self._greeted = True
        if type_ is not None and self._unsolicited():
            self._end(f"protocol violation: more data after the {msg.type!r} reply to a {type_!r} request")
        if msg.type == "failed":
            raise CandidateRaised(msg.body.get("phase", "?"), str(msg.body.get("error", "")),
                                  str(msg.body.get("traceback", "")))
        return msg

    @property
    def clock_pid(self) -> int:
        """The pid, in the judge's namespace, of the process that serves requests: the forked child
        itself, or below a PID namespace's relay and init their first child (the eldest: processes
        the candidate starts come later, and orphans reparented to init later still)."""
        if self._clock_pid is None:
            pid = self.pid
            for _ in range(self._harness_depth):
                kids = _children_of(pid)
                if not kids:
                    return self.pid      # not there yet: ask again next time
                pid = min(kids, key=_start_time)
            self._clock_pid = pid
        return self._clock_pid

    def hello(self) -> protocol.Message:
        return self.request(None)

    @property
    def idle(self) -> bool:
        """Whether the worker may be asked something now: running, no answer of its left unread."""
        return self.ended is None and not self._pending

    def send_only(self, type_: str, body: dict | None = None, tensors=()) -> None:
        """A request whose answer `request(None)` reads later (the worker works meanwhile)."""
        self._credit_judge_time(time.monotonic())
        self._pending.append(type_)
        tensors = _through_host(tensors)   # nothing is lent for an answer read later
        try:
            protocol.send(self.sock, type_, body, tensors)
        except OSError:
            pass   # the worker is gone: reading the answer says how it ended

    def _peek(self) -> bytes | None:
        """The next byte waiting on the socket, left there: None if nothing is waiting, b"" at end
        of file (a broken socket reads as its end)."""
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""

    def _unsolicited(self) -> bool:
        """Bytes already waiting after a whole reply: the worker never sends unasked. (End of file
        is not data: a worker that exits now is reported by the next request, with its status.)"""
        return bool(self._peek())

    def _budget_text(self, deadline: float) -> str:
        return "time limit" if deadline >= self.deadline else "request's time limit"

    def _end(self, reason: str, code: int | None = None):
        self.kill()
        self.ended = WorkerEnded(reason, code)
        raise self.ended

    def _end_from_exit(self):
        code, why = self.launcher.exit_status(self.job, wait=3.0)
        self.kill()
        if why:
            reason = f"the worker was killed: {why}"
        elif code is None:
            reason = "the worker vanished (no exit status: its launcher was killed?)"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            reason = f"the worker was killed by {name}"
        elif code == 0:
            reason = "the worker exited with status 0 without sending a result"
        elif code == wire.HARNESS_FAILED:
            reason = f"the worker's own code raised (exit {code}): {self._last_line() or 'no traceback'}"
        else:
            reason = f"the worker exited with status {code}"
        self.ended = WorkerEnded(reason, code)
        raise self.ended

    def read_prepared(self, timeout: float) -> None:
        """Read its `prepare` answer now, if still unread, and keep it for `take_prepared`."""
        if self.prepared is None and self._pending[:1] == ["prepare"]:
            self.prepared = self.request(None, timeout=timeout)

    def take_prepared(self) -> protocol.Message:
        """Its `prepare` answer: the one read ahead, else read now."""
        msg, self.prepared = self.prepared, None
        return msg if msg is not None else self.request(None)

    @property
    def unread(self) -> int:
        """Answers still to be read with `request(None)`."""
        return len(self._pending)

    def gone(self) -> bool:
        """Its end of the socket is closed (it exited): seen without blocking or reading data."""
        return self._peek() == b""

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def close(self, wait: float = 0.2) -> None:
        """Ask it to leave, give it `wait` seconds to do so on its own (a CUDA context is released
        by the driver as the process exits), then kill its group."""
        if not self.ended:
            try:
                protocol.send(self.sock, "bye")
            except OSError:
                pass
            self.launcher.exit_status(self.job, wait=wait)
        self.kill()
        self.sock.close()

    def requests_s(self) -> dict[str, list]:
        """Round trips to this worker by request type: [count, seconds], in the order first seen
        (where a vet's time goes, for `--verbose` and the bench)."""
        return {k: [n, round(t, 4)] for k, (n, t) in self._round_trips.items()}

    def output(self) -> str:
        """What the candidate printed, bounded; never parsed for results."""
        try:
            with open(self.log, "rb") as fh:
                raw = fh.read(LOG_LIMIT + 1)
        except OSError:
            return ""
        text = raw[:LOG_LIMIT].decode("utf-8", "replace")
        return text + ("\n[... output truncated]" if len(raw) > LOG_LIMIT else "")

    def _last_line(self) -> str:
        """The last line the worker wrote (a traceback's, when its own code raised), bounded; it is
        the worker's word, quoted as such."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(os.fstat(fh.fileno()).st_size - 4096, 0))
                tail = fh.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
        return lines[-1][:300] if lines else ""

    def cleanup(self) -> None:
        import shutil
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def readable(self, path: str) -> str:
        """`path` as this worker should open it: a worker confined under a uid of its own may not be
        able to reach the user's files (a directory of mode 0700 on the way), so it gets a copy in
        a directory of its own that it cannot write (the bytes the judge read, not a later edit)."""
        confined = self.containment.get("confined") or {}
        if confined.get("uid") in (None, os.getuid()):
            return path
        os.makedirs(os.path.join(self.tmpdir, "src"), mode=0o755, exist_ok=True)
        staged = tempfile.mkdtemp(dir=os.path.join(self.tmpdir, "src"))
        os.chmod(staged, 0o755)
        target = os.path.join(staged, os.path.basename(path))
        with open(path, "rb") as src, open(target, "xb") as dst:
            shutil.copyfileobj(src, dst)
        os.chmod(target, 0o644)
        return target

    def readable_spec(self, spec: dict) -> dict:
        """A problem's spec with its file (if any) made readable for this worker (`readable`)."""
        if isinstance(spec.get("files"), dict):   # a problem of several files (GPU MODE): each of them
            spec = {**spec, "files": {name: self.readable(p) for name, p in spec["files"].items()}}
        return {**spec, "path": self.readable(spec["path"])} if isinstance(spec.get("path"), str) else spec
