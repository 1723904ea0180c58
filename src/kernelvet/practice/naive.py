"""The naive bench of the tutorial, kept deliberately naive: the one the cheats were written to beat.

It runs the candidate in a process of its own, times it with events on the default stream (host
perf_counter on the CPU), and compares with allclose against a reference computed in the same
process, on one fixed input. No other checks. Its verdict is whatever it prints last on stdout.

    python -m kernelvet.practice.naive CANDIDATE PROBLEM DEVICE

`--serve` is the same bench as a fork server, so that `import torch` is paid once per practice
run rather than once per entry (seconds each on a GPU host). It never initialises CUDA itself, so
its forks may. One request per line on stdin, one reply per line on stdout:

    -> {"candidate": PATH, "problem": REF, "device": DEV, "timeout": SECONDS}
    <- {"child": PID}                       the fork about to run it: its own session, whose id is PID
    <- {"believed": B, "speedup": S}        or {"believed": null, "speedup": null, "note": WHY}

The child writes its result to a pipe (its stdout goes nowhere, its stderr to a file whose last
line a failure's note quotes); anything unparsable there is no verdict. After each request the
server kills the child's process group, everything left in its session, and anything re-parented
to the server (it is a child subreaper): nothing a candidate starts outlives its request. A
candidate can still kill the server; the runner notices and starts another.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback

import torch

from kernelvet import reaper

WARMUP, REPS = 3, 20
_TICK_S = 0.01             # how often the server looks for its child's exit while it reads the pipe
_MAX_RESULT = 1 << 16      # bytes of a child's result kept: a verdict is one short line
# The tutorial's typical bench: "a loose allclose with atol=1e-3" (rtol the same) for float32.
# A half-format output cannot be held closer than its own rounding, so those keep the usual 5e-2.
TOLERANCE = {torch.float16: 5e-2, torch.bfloat16: 5e-2}
FLOAT32_TOLERANCE = 1e-3


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _problem(ref: str):
    from kernelvet import problems
    if ref in problems.BUILTIN:
        return problems.make(ref)
    return _load(ref, "naive_reference")


def _time(fn, inputs, device) -> float:
    """Milliseconds per call: events on the default stream (CUDA), or the host clock."""
    for _ in range(WARMUP):
        fn(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()   # "That helper is already wrong": it only drains the default stream
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(REPS):
            fn(*inputs)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / REPS
    t0 = time.perf_counter()
    for _ in range(REPS):
        fn(*inputs)
    return (time.perf_counter() - t0) * 1e3 / REPS


def run(candidate: str, ref: str, device: str) -> dict:
    prob = _problem(ref)
    torch.manual_seed(0)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
    init = prob.get_init_inputs()
    torch.manual_seed(0)
    model = prob.Model(*init).to(device)
    ref_out = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    ref_ms = _time(model, inputs, device)
    torch.manual_seed(0)
    new = _load(candidate, "naive_candidate").ModelNew(*init).to(device)
    cand_ms = _time(new, inputs, device)
    out = new(*inputs)
    tol = TOLERANCE.get(ref_out.dtype, FLOAT32_TOLERANCE)
    believed = bool(torch.allclose(out, ref_out, atol=tol, rtol=tol))
    return {"believed": believed, "speedup": ref_ms / cand_ms if cand_ms > 0 else float("inf"),
            "candidate_ms": cand_ms, "reference_ms": ref_ms}


def serve() -> None:
    """The fork server: paid imports once, then one forked child per request line, until stdin ends."""
    importlib.import_module("kernelvet.problems")   # imported only: make() builds tensors, in the child
    try:
        importlib.import_module("triton")
    except Exception:  # noqa: BLE001 - a broken triton must not stop CPU benches
        pass
    reaper.become_subreaper()
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            args = (str(req["candidate"]), str(req["problem"]), str(req["device"]))
            timeout = float(req["timeout"])
        except (ValueError, KeyError, TypeError):
            _reply(_no_verdict("a malformed request"))
            continue
        _reply(_bench(*args, timeout))


def _reply(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def _no_verdict(note: str) -> dict:
    return {"believed": None, "speedup": None, "note": note}


def _bench(candidate: str, ref: str, device: str, timeout: float) -> dict:
    """One request: fork, tell the runner the child's pid, let the child start, collect, clean up."""
    fd, err_path = tempfile.mkstemp(prefix="kernelvet-naive-", suffix=".err")
    res_r, res_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(res_r)
        os.close(go_w)
        _child(candidate, ref, device, fd, res_w, go_r)
    for f in (fd, res_w, go_r):
        os.close(f)
    try:
        # The runner learns the pid before the candidate exists: it cleans up if the candidate kills us.
        _reply({"child": pid})
        os.write(go_w, b"g")
        os.close(go_w)
        status, data = _wait(pid, res_r, timeout)
        return _verdict(status, data, err_path, timeout)
    finally:
        _clean_up(pid)
        os.close(res_r)
        os.unlink(err_path)


def _child(candidate: str, ref: str, device: str, err_fd: int, res_w: int, go_r: int) -> None:
    """In the fork: its own session, stdout to nowhere, stderr to the file; the result to the pipe."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err_fd, 2)
        if os.read(go_r, 1) != b"g":
            os._exit(code)   # the server died before the runner heard of us
        sys.argv = [sys.argv[0], candidate, ref, device]
        result = run(candidate, ref, device)
        os.write(res_w, (json.dumps(result) + "\n").encode())
        code = 0
    except SystemExit as exc:   # sys.exit() in a candidate ends the child as it would end a process
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:  # noqa: BLE001 - the traceback's last line is the runner's note
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, fd: int, seconds: float) -> tuple[int | None, bytes]:
    """The child's wait status (None if it still runs at the deadline) and what it wrote to `fd`.
    The pipe is read while waiting (a full pipe would block the child); its EOF alone proves
    nothing, since a process the candidate forked may hold the write end."""
    deadline = time.monotonic() + seconds
    data, fds = b"", [fd]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            os.set_blocking(fd, False)
            return status, data + _drain(fd)
        left = deadline - time.monotonic()
        if left <= 0:
            return None, data
        if select.select(fds, [], [], min(left, _TICK_S))[0]:
            chunk = os.read(fd, 1 << 16)
            data = (data + chunk)[-_MAX_RESULT:]
            fds = fds if chunk else []


def _drain(fd: int) -> bytes:
    try:
        return os.read(fd, _MAX_RESULT)
    except BlockingIOError:
        return b""


def _verdict(status: int | None, data: bytes, err_path: str, timeout: float) -> dict:
    if status is None:
        return _no_verdict(f"hung past {timeout:.0f} s: no verdict")
    last = data.decode(errors="replace").strip().splitlines()[-1:] or [""]
    try:
        got = json.loads(last[0])
        return {"believed": bool(got["believed"]), "speedup": got.get("speedup")}
    except (ValueError, KeyError, TypeError):
        err = _last_line(err_path)[:160]
        return _no_verdict(f"no verdict (exit {os.waitstatus_to_exitcode(status)}){': ' + err if err else ''}")


def _last_line(path: str) -> str:
    with open(path, "rb") as fh:
        fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
        return (fh.read().decode(errors="replace").strip().splitlines() or [""])[-1]


def _clean_up(pid: int) -> None:
    """Kill the child's group, whatever else is in its session, and strays re-parented to us (a
    process that left the session); reap them all. While the session has members its id, the
    child's pid, is not handed to a new process, so the scan cannot hit a stranger."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    reaper.kill_session(pid)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass   # reaped already, by _wait
    reaper.sweep(set())
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
        sys.exit(0)
    result = run(sys.argv[1], sys.argv[2], sys.argv[3])
    sys.stdout.flush()
    print(json.dumps(result))
