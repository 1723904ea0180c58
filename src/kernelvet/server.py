"""`kernelvet serve`: a judge that stays up, so that `kernelvet check` pays no start-up.

A cold `kernelvet check` imports torch, waits for the launcher to import torch, Triton and the
dispatcher's tracing machinery, and for a worker to start CUDA, all for a vet that costs far less
through a warm Python API (both measured in bench/results/*/cost/). The server is that API kept
warm: it owns the launcher, a worker made ready ahead of each request, and (as any judge) the
secret seeds.
`kernelvet check` asks it first (unless `--no-server`) and prints what comes back; when no server
of its own code listens, it vets in its own process as before.

Wire: one request per connection over a Unix stream socket. Client -> server, one JSON line:
{"code": code_id(), "argv": [...], "cwd": DIR, "columns": N, "color": bool}. Server -> client,
one JSON line: {"exit": code, "out": text, "err": text}, or {"refused": why} (the client then
vets itself). The socket sits in a directory only its user can enter (0700: checked by both
sides, since a socket elsewhere could be anyone's), and the server answers only peers of its
own uid (SO_PEERCRED).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

from .errors import UsageError

_REQUEST_KEYS = frozenset({"code", "argv", "cwd", "columns", "color"})
_MAX_REQUEST = 1 << 20
_PEERCRED = struct.Struct("3i")


def socket_path(given: str | None = None) -> str:
    """--socket, else $KERNELVET_SOCKET, else a per-user path under $XDG_RUNTIME_DIR or the temp dir."""
    if given:
        return os.path.abspath(given)
    if os.environ.get("KERNELVET_SOCKET"):
        return os.path.abspath(os.environ["KERNELVET_SOCKET"])
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return os.path.join(base, f"kernelvet-{os.getuid()}", "serve.sock")


def code_id() -> str:
    """This installation of kernelvet: its version and its source files (path, size, mtime). A
    server started before an upgrade, or before an edit, refuses the client, which vets itself."""
    from . import __version__
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256(__version__.encode())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(f for f in filenames if f.endswith(".py")):
            st = os.stat(os.path.join(dirpath, name))
            h.update(f"{os.path.relpath(os.path.join(dirpath, name), root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:32]


def is_private(directory: str) -> bool:
    """A directory of ours that no one else can enter or write."""
    try:
        st = os.stat(directory, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def forward(argv: list[str]) -> int | None:
    """Run `kernelvet check ARGV` in a listening server of this code; None if there is none (or it
    refused, or it went away): the caller then vets in its own process."""
    path = socket_path()
    if not os.path.exists(path) or not is_private(os.path.dirname(path)):
        return None
    size = _terminal_columns()
    req = {"code": code_id(), "argv": list(argv), "cwd": os.getcwd(), "columns": size,
           "color": sys.stdout.isatty() and not os.environ.get("NO_COLOR")}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(path)
        sock.settimeout(None)   # a vet takes as long as it takes (its own --timeout bounds it)
        sock.sendall(json.dumps(req).encode() + b"\n")
        line = sock.makefile("rb").readline()
    except OSError:
        return None
    finally:
        sock.close()
    try:
        reply = json.loads(line)
    except ValueError:
        return None
    if not isinstance(reply, dict) or not isinstance(reply.get("exit"), int):
        return None
    sys.stdout.write(str(reply.get("out", "")))
    sys.stderr.write(str(reply.get("err", "")))
    return reply["exit"]


def start_background(*, device: str, sandbox: str) -> str | None:
    """`kernelvet serve` for this device and sandbox mode, detached from this process (its own
    session: it outlives this command and stops after its idle time); its output goes to a log
    beside its socket. Returns the log's path; None if a server (of other code) listens there."""
    path = socket_path()
    directory = _private_dir(path)
    if _listening(path):
        return None
    log = os.path.join(directory, "serve.log")
    with open(log, "ab") as fh:
        subprocess.Popen([sys.executable, "-m", "kernelvet", "serve", "--socket", path, "--device", device,
                          "--sandbox", sandbox], stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                         start_new_session=True, close_fds=True)
    return log


def _terminal_columns() -> int:
    import shutil
    return shutil.get_terminal_size((100, 24)).columns


def serve(given_path: str | None, *, device: str, sandbox: str, idle_s: float) -> int:
    """Listen until `idle_s` pass without a request (or SIGTERM / Ctrl-C); one request at a time."""
    path = socket_path(given_path)
    _private_dir(path)
    # One server per socket, for as long as it lives: two started at once (`check --serve` from two
    # shells) would otherwise both bind, the second unlinking the first's socket.
    lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        raise UsageError(f"a kernelvet server already listens on {path} (or is starting)") from None
    if _listening(path):
        raise UsageError(f"a kernelvet server already listens on {path}")
    if os.path.exists(path):
        os.unlink(path)   # a stale socket of a server that was killed
    from . import cli, judge, render
    me = code_id()
    render.preload()   # before any candidate runs: the judge imports nothing after
    launcher = cli._launcher(sandbox)
    judge.warm_judge(device)   # its CUDA context started: it judges every problem on the device
    judge.prepare(launcher, device)   # also checks --device: a bad one is the user's mistake, exit 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    signal.signal(signal.SIGTERM, _stop)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(16)
        sock.settimeout(idle_s)
        print(f"kernelvet serve: listening on {path} (device {device}, sandbox {launcher.sandbox}); "
              f"exits after {idle_s:g} s without a request", flush=True)
        while True:
            try:
                conn, _ = sock.accept()
            except socket.timeout:
                print("kernelvet serve: idle, exiting", flush=True)
                return 0
            with conn:
                _handle(conn, me)
    except _Stopped:
        return 0
    finally:
        sock.close()
        try:
            os.unlink(path)
        except OSError:
            pass


class _Stopped(BaseException):
    """SIGTERM, raised in the main thread. Not SystemExit: a served check turns SystemExit (argparse's
    --help) into that check's exit code and the server would go on listening."""


def _stop(*_):
    raise _Stopped


def _private_dir(path: str) -> str:
    """The socket's directory, made if need be (0700); UsageError if it is not ours alone."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if not is_private(directory):
        raise UsageError(f"{path}: its directory must be yours and private (mode 0700)")
    return directory


def _listening(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _handle(conn: socket.socket, me: str) -> None:
    try:
        _pid, uid, _gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
        if uid != os.getuid():
            return
        conn.settimeout(10.0)
        line = conn.makefile("rb").readline(_MAX_REQUEST)
        conn.settimeout(None)
        reply = _answer(line, me)
        conn.sendall(json.dumps(reply).encode() + b"\n")
    except OSError:
        pass   # the client went away (Ctrl-C): its vet is over anyway


def _answer(line: bytes, me: str) -> dict:
    try:
        req = json.loads(line)
    except ValueError:
        return {"refused": "not a JSON request"}
    if not isinstance(req, dict) or set(req) != _REQUEST_KEYS or not isinstance(req["argv"], list) \
            or not all(isinstance(a, str) for a in req["argv"]) or not isinstance(req["cwd"], str):
        return {"refused": f"a request has exactly the keys {sorted(_REQUEST_KEYS)}"}
    if req["code"] != me:
        return {"refused": "this server runs another version of kernelvet"}
    out, err = io.StringIO(), io.StringIO()
    code = _run_check(req, out, err)
    return {"exit": code, "out": out.getvalue(), "err": err.getvalue()}


def _run_check(req: dict, out, err) -> int:
    from rich.console import Console
    from . import cli
    from .problem import load_problem
    columns = req["columns"] if isinstance(req["columns"], int) and 20 <= req["columns"] <= 1000 else 100
    console = Console(file=out, width=columns, force_terminal=bool(req["color"]), no_color=not req["color"])

    def run() -> int:
        args = cli._parser().parse_args(req["argv"])
        if args.command != "check":
            raise UsageError("kernelvet serve runs `kernelvet check` only")
        try:
            os.chdir(req["cwd"])
        except OSError as exc:
            raise UsageError(f"cannot enter the client's directory {req['cwd']}: {exc.strerror}") from None
        if args.json:
            cli._check_writable(args.json)
        t0 = time.monotonic()
        prob = load_problem(args.ref, args.shape, args.dtype)
        code = cli.vet_and_render(args, prob, cli._launcher(args.sandbox), prepare_next=True, console=console)
        if args.verbose:
            console.print(f"served by kernelvet serve (pid {os.getpid()}): {time.monotonic() - t0:.2f} s")
        return code

    try:
        return cli.guarded(run, err)
    except SystemExit as exc:   # argparse's --help from a client that did not parse first
        return exc.code if isinstance(exc.code, int) else cli.EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - one bad request must not take the server down
        print(f"kernelvet serve: internal error: {type(exc).__name__}: {exc}", file=err)
        return cli.EXIT_HARNESS
