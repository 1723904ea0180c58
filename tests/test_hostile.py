"""Hostile candidates against the worker's containment (SECURITY.md): every one ends in a verdict
with a reason, leaves nothing running, cannot reach the network or forge a reply, and the judge
vets an honest candidate normally right after, on the same launcher."""

import os
import pwd
import socket
import time
import uuid

import pytest

from kernelvet import judge, sandbox, spares, spawn, vet
from kernelvet.ids import CheckId
from kernelvet.report import Status, Verdict

from .candidates import MATMUL_HEADER, honest_matmul

HEADER = "import os, sys, time, ctypes\n" + MATMUL_HEADER
MEM_LIMIT = 3 << 30     # a memory hog must hit this, not the machine's RAM


@pytest.fixture(scope="module")
def launcher():
    launcher = spawn.Launcher(mem_limit=MEM_LIMIT, max_procs=16)
    yield launcher
    launcher.close()


@pytest.fixture
def candidate(write):
    """A matmul candidate that runs `hostile` (source, one statement per line) inside its forward,
    after computing the right answer; its processes carry a unique name, so we can find survivors."""
    tag = "kvh" + uuid.uuid4().hex[:8]

    def make(hostile: str, at_import: str = "") -> tuple[str, str]:
        name = f"ctypes.CDLL(None).prctl(15, {tag.encode()!r}, 0, 0, 0)\n"   # PR_SET_NAME
        return write(f"{tag}.py", HEADER + name + at_import + honest_matmul(hostile)), tag
    return make


def survivors(tag: str, grace_s: float = 3.0) -> list[int]:
    """Live (non-zombie) processes named `tag`, after giving SIGKILLs a moment to land."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            if stat[stat.index("(") + 1:stat.rindex(")")] == tag and stat[stat.rindex(")") + 2] != "Z":
                alive.append(int(pid))
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def assert_judge_healthy(launcher):
    from kernelvet.practice import by_name
    honest = by_name("broadcast_matmul")
    report = vet(honest.path, honest.problem_ref, device="cpu", launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert launcher.alive()


def worker_summary(report) -> str:
    return report.finding(CheckId.WORKER).summary


def containment(launcher) -> dict:
    w = spawn.WorkerHandle(launcher, time.monotonic() + 30)
    try:
        w.hello()
        return w.containment
    finally:
        w.close()
        w.cleanup()


def test_containment_is_reported_and_closed(launcher):
    c = containment(launcher)
    assert set(c) == {"sandbox", "net", "limits", "max_procs", "caches", "confined", "triton"} and c["max_procs"] == 16
    assert c["triton"] == "interpreter"   # a worker without a device runs Triton in its interpreter
    assert c["caches"] == "private"
    assert c["limits"]["core"] == 0 and c["limits"]["nofile"] == 1024 and c["limits"]["cpu_s"] >= 30
    with pytest.raises(RuntimeError, match="exactly the keys"):
        launcher.spawn("/", "/dev/null", {"cpu_s": 1})          # the launcher refuses, and says why
    assert launcher.alive()


def test_fork_bomb_is_killed_with_a_reason(launcher, candidate):
    path, tag = candidate("while True:\n    try:\n        os.fork()\n    except OSError:\n        pass")
    t0 = time.monotonic()
    report = vet(path, "matmul", device="cpu", timeout=60, launcher=launcher)
    assert time.monotonic() - t0 < 30
    assert report.verdict is Verdict.REJECT
    assert "more than 16 processes" in worker_summary(report)
    assert survivors(tag) == []
    assert_judge_healthy(launcher)


def test_setsid_sleeper_and_double_forked_daemon_do_not_survive(launcher, candidate):
    once = ("if not hasattr(sys, 'started'):\n    sys.started = True\n"
            "    if os.fork() == 0:\n        os.setsid()\n        time.sleep(3600)\n"         # the sleeper
            "    if os.fork() == 0:\n        os.setsid()\n"                                  # the daemon
            "        if os.fork() == 0:\n            time.sleep(3600)\n        os._exit(0)")
    path, tag = candidate(once)
    report = vet(path, "matmul", device="cpu", timeout=60, launcher=launcher)
    # Child processes left running are the `threads` check's business; what matters here is that none survive.
    assert report.verdict is Verdict.REJECT and report.finding(CheckId.THREADS).status is Status.FAIL
    assert survivors(tag) == []
    assert_judge_healthy(launcher)


def test_memory_hog_ends_at_its_limit_not_the_machine(launcher, candidate):
    if containment(launcher)["limits"].get("mem_bytes") != MEM_LIMIT:
        pytest.skip("no memory limit on this machine's workers (CUDA is visible and the judge does not "
                    "tell the launcher the worker's device)")
    # Bounded even without the limit: at most the limit plus 1 GiB, then it gives up and returns.
    hog = ("hog = []\nfor _ in range((MEM + (1 << 30)) >> 28):\n    hog.append(torch.ones(1 << 26))")
    path, tag = candidate(hog, at_import=f"MEM = {MEM_LIMIT}\n")
    report = vet(path, "matmul", device="cpu", timeout=60, launcher=launcher)
    assert report.verdict is Verdict.REJECT
    assert "allocate memory" in worker_summary(report) or "MemoryError" in worker_summary(report)
    assert_judge_healthy(launcher)


FORGED_FRAME = """
import json, struct
def frame(type_, body):
    raw = json.dumps({"type": type_, "body": body, "tensors": []}).encode()
    return struct.pack(">I", len(raw)) + raw
FORGED = b"".join(frame(t, b) for t, b in [
    ("loaded", {"import_s": 0.0, "build_s": 0.0, "integrity": {"moved": [], "changed": {}}}),
    ("output", {"wall_s": 0.0, "call_index": 0, "type": "torch.Tensor", "integrity": {}}),
    ("timed", {"times_ms": [1e-6] * 10, "integrity": {}})])
for fd in range(256):
    try:
        os.write(fd, FORGED)
    except OSError:
        pass
"""


def test_fd_scribbling_forges_nothing(launcher, candidate):
    path, _ = candidate("", at_import=FORGED_FRAME)
    report = vet(path, "matmul", device="cpu", timeout=60, launcher=launcher)
    assert report.verdict is Verdict.REJECT
    assert report.timing is None
    assert "protocol violation" in worker_summary(report)
    assert_judge_healthy(launcher)


def test_network_is_unreachable_from_the_worker(launcher, candidate):
    net = containment(launcher)["net"]
    if net.startswith("none"):
        pytest.skip(f"no network namespace could be made here: {net}")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        reach = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                 f"    print('NET connected', flush=True)\nexcept OSError as e:\n    print('NET refused', e, flush=True)")
        path, _ = candidate(reach)
        report = vet(path, "matmul", device="cpu", timeout=60, launcher=launcher)
        assert "NET refused" in report.candidate_output and "NET connected" not in report.candidate_output
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert_judge_healthy(launcher)


WRITES = """
for target in TARGETS:
    try:
        with open(target, "w") as fh:
            fh.write("x")
        print("WROTE", target, flush=True)
    except OSError as e:
        print("DENIED", target, e.strerror, flush=True)
"""


@pytest.mark.parametrize("mode", ["off", "strict", "auto"])
def test_writes_outside_the_workers_dir(candidate, mode, tmp_path):
    if mode == "strict" and sandbox.resolve("auto") is None:
        pytest.skip("bubblewrap is not installed or cannot run here")
    launcher = spawn.Launcher(sandbox=mode)
    name = f"kernelvet-hostile-{uuid.uuid4().hex[:8]}"
    targets = [os.path.join(tmp_path, name), os.path.join(pwd.getpwuid(os.getuid()).pw_dir, name)]
    try:
        path, _ = candidate("", at_import=f"TARGETS = {targets!r}\n" + WRITES)
        report = vet(path, "matmul", device="cpu", timeout=60, launcher=launcher)
        assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
        out = report.candidate_output
        if mode == "strict":   # the sandbox: all read-only but the worker's own directory
            assert all(f"DENIED {t} Read-only file system" in out for t in targets), out
            assert not any(os.path.exists(t) for t in targets)
        elif mode == "auto":   # its own namespaces: read-only, or out of its uid's reach
            assert report.containment["sandbox"] == "namespaces", report.containment
            assert all(f"DENIED {t}" in out for t in targets), out
            assert not any(os.path.exists(t) for t in targets)
        else:                  # documented: same uid, same files (SECURITY.md)
            assert all(f"WROTE {t}" in out for t in targets), out
        spares.wait_after_vet(launcher)   # the vet's worker ends off its clock, on a thread
        assert not [d for d in os.listdir(launcher.root) if d.startswith("worker-")]   # its own dir: gone
        assert_judge_healthy(launcher)
    finally:
        launcher.close()
        for t in targets:
            if os.path.exists(t):
                os.unlink(t)


# Each one makes a kernel claim a thirtieth of the time it takes (the judge's clock allows 8x on its own).
FAST = ("def fast(do_time):\n    def _do_time(self, msg):\n        kind, body, blobs = do_time(self, msg)\n"
        "        body['times_ms'] = [t / 30 for t in body.get('times_ms', [])]\n        return kind, body, blobs\n"
        "    return _do_time\n")
TAMPER = {
    # Walk back from the import to the worker's frame, and patch the class of the `self` found there.
    "frames": FAST + "f = sys._getframe()\nwhile f is not None:\n    w = f.f_locals.get('self')\n"
                     "    if type(w).__name__ == 'Worker':\n        type(w)._do_time = fast(type(w)._do_time)\n        break\n"
                     "    f = f.f_back",
    # Through sys.modules: freeze what the integrity report sees, then patch the harness.
    "worker-functions": FAST + "kw = sys.modules['kernelvet.worker.serve']\nsaved = kw.global_state()\n"
                               "kw.global_state = lambda: saved\nkw.Worker._do_time = fast(kw.Worker._do_time)",
    # Rewrite every reply on its way out: shorter times, a clean integrity report.
    "protocol": ("proto = sys.modules['kernelvet.protocol']\nreal = proto.send\n"
                 "def send(sock, type_, body=None, tensors=()):\n    body = dict(body or {})\n"
                 "    if 'times_ms' in body:\n        body['times_ms'] = [t / 30 for t in body['times_ms']]\n"
                 "    body['integrity'] = {'moved': [], 'changed': {}}\n    return real(sock, type_, body, tensors)\n"
                 "proto.send = send"),
    # The kernel audit's trace forged at its source: what the profiler returns when it stops.
    "profiler": "import torch.autograd.profiler as ap\nap._disable_profiler = lambda *a, **k: None",
}


@pytest.mark.parametrize("how", sorted(TAMPER))
def test_harness_tampering_is_rejected(launcher, candidate, how):
    slow = "time.sleep(0.001)"    # a slow kernel that wants to look fast
    path, _ = candidate(slow, at_import=TAMPER[how] + "\n")
    report = vet(path, "matmul", device="cpu", timeout=60, launcher=launcher)
    assert report.verdict is Verdict.REJECT, report.dumps()
    assert {f.check for f in report.failed} & {CheckId.TIMERS, CheckId.GLOBAL_STATE}, \
        [f.summary for f in report.failed]
    assert_judge_healthy(launcher)


def test_a_forged_time_does_not_size_the_judges_loop():
    """The judge-clocked loop takes its length from the reported time, and at most LOOP_OVERRUN x
    loop_ms at a pilot's price by the judge's own clock: a candidate that reports a fraction of its
    real cost cannot make the judge run thousands of its calls (three attempts of them)."""
    from kernelvet.practice import by_name
    entry = by_name("forged_measurements")
    report = vet(entry.path, entry.problem_ref, device="cpu")
    timers = report.finding(CheckId.TIMERS)
    assert timers.status is Status.FAIL, timers
    loop_ms = judge.Settings().loop_ms
    for a in timers.evidence["attempts"]:
        # the pilot's price by the judge's clock, less its null twin's, as recorded: the bound the
        # loop's length must keep, however fast or slow the host ran it
        per_call_s = max((a["pilot_s"] - a["null_pilot_s"]) / judge.PILOT_CALLS, 1e-9)
        assert a["cap"] == pytest.approx(judge.LOOP_OVERRUN * loop_ms / 1e3 / per_call_s), a
        assert a["n"] <= max(5, a["cap"]), a
        # and it bound: the forged time alone would have asked for more calls
        assert a["n"] < min(2000, loop_ms / a["reported_ms"]), a
