"""Every way a worker can end is a verdict with a reason; the judge stays alive and answers; and
nothing of the judge's secrets reaches the worker."""

import json
import os
import subprocess
import sys
import time

import pytest

from kernelvet import spawn, vet
from kernelvet.ids import CheckId
from kernelvet.report import Status, Verdict

from .candidates import MATMUL_HEADER, honest_matmul

HONEST_BODY = honest_matmul()


def _worker_finding(report):
    return report.finding(CheckId.WORKER)


def test_hang_at_import_is_rejected_soon_after_the_deadline(write):
    path = write("hang.py", MATMUL_HEADER + "import time\ntime.sleep(3600)\n" + HONEST_BODY)
    t0 = time.monotonic()
    report = vet(path, "matmul", device="cpu", timeout=3)
    assert time.monotonic() - t0 < 3 + 10   # the reference worker's time included
    assert report.verdict is Verdict.REJECT
    assert "timed out" in _worker_finding(report).summary


def test_segfault_is_a_reject_naming_the_signal(write):
    body = HONEST_BODY.replace("return out", "import ctypes; ctypes.string_at(0); return out")
    report = vet(write("segv.py", MATMUL_HEADER + body), "matmul", device="cpu")
    assert report.verdict is Verdict.REJECT
    assert "SIGSEGV" in _worker_finding(report).summary


def test_candidate_exception_is_a_reject_with_its_traceback(write):
    body = HONEST_BODY.replace("return out", "raise ValueError('boom')")
    report = vet(write("raises.py", MATMUL_HEADER + body), "matmul", device="cpu")
    f = _worker_finding(report)
    assert report.verdict is Verdict.REJECT and "ValueError: boom" in f.summary
    assert "raises.py" in f.evidence["traceback"]


def test_forged_stdout_is_captured_never_parsed(write):
    forged = '{"verdict": "pass", "type": "output"}'
    body = HONEST_BODY.replace("return out", f"print({forged!r}, flush=True); return out * 0")
    report = vet(write("forge.py", MATMUL_HEADER + body), "matmul", device="cpu")
    assert report.verdict is Verdict.REJECT
    assert forged in report.candidate_output


def test_worker_inherits_no_secret(write):
    body = HONEST_BODY.replace(
        "return out",
        "import sys; print('ENV', dict(os.environ), 'ARGV', sys.argv, open('/proc/self/cmdline').read(),"
        " 'FDS', sorted(os.listdir('/proc/self/fd')), flush=True); return out")
    report = vet(write("spy.py", MATMUL_HEADER + "import os\n" + body), "matmul", device="cpu", seed=987654321987)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert "ENV" in report.candidate_output
    assert "987654321987" not in report.candidate_output
    assert "seed" not in report.candidate_output.lower()


_SPY = ("import sys, json\n"
        "print('SPY', json.dumps({'env': dict(os.environ), 'argv': sys.argv, 'fds': sorted(os.listdir('/proc/self/fd')),"
        " 'cmdline': open('/proc/self/cmdline', 'rb').read().decode('latin-1'),"
        " 'environ': open('/proc/self/environ', 'rb').read().decode('latin-1')}), flush=True)")
_JUDGE = """
import sys, torch
from kernelvet import spawn, vet
launcher = spawn.Launcher()
print(vet({spy!r}, 'matmul', device='cpu', launcher=launcher).candidate_output)
launcher.close()
"""


def test_worker_sees_nothing_of_the_judges_start(write):
    """The launcher hands its workers none of the judge's environment, arguments or descriptors:
    not in os.environ or sys.argv, nor in what /proc shows of the process. (A launcher forked from
    the judge would have to zero the strings it started with to pass this.)"""
    spy = write("spy.py", MATMUL_HEADER + "import os\n" + honest_matmul(_SPY))
    proc = subprocess.run([sys.executable, "-c", _JUDGE.format(spy=spy), "--judge-arg-pl4nted"],
                          env={**os.environ, "KV_PLANTED": "pl4nted"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "SPY" in proc.stdout and "pl4nted" not in proc.stdout.lower(), proc.stdout
    spied = json.loads(proc.stdout.split("SPY ", 1)[1].splitlines()[0])
    assert os.path.basename(spied["argv"][0]) == "launcher.py" and len(spied["argv"]) == 3   # its socket, its mode
    from kernelvet.launcher import CACHE_ENV
    assert not set(spied["env"]) - set(spawn.worker_env()) - {"TMPDIR", "HOME", "TRITON_INTERPRET"} - set(CACHE_ENV), \
        spied["env"]
    assert len(spied["fds"]) <= 5, spied["fds"]   # stdin, stdout, stderr, its socket, listdir's own


def test_worker_parent_is_not_the_judge():
    launcher = spawn.shared_launcher()
    w = spawn.WorkerHandle(launcher, time.monotonic() + 30)
    try:
        hello = w.hello().body
        def parent(pid):
            with open(f"/proc/{pid}/stat") as fh:
                return int(fh.read().rsplit(")", 1)[1].split()[1])
        ancestors = [parent(w.pid)]
        while ancestors[-1] not in (launcher.proc.pid, os.getpid(), 1, 0):
            ancestors.append(parent(ancestors[-1]))
        assert hello["ppid"] != os.getpid() and ancestors[-1] == launcher.proc.pid
        if "pid" in ((w.containment.get("confined") or {}).get("namespaces") or ()):
            # its own PID namespace: pid 2 under an init, under a relay the launcher forked
            assert (hello["pid"], hello["ppid"]) == (2, 1) and len(ancestors) == 3
        else:
            assert hello["pid"] == w.pid and hello["ppid"] == launcher.proc.pid
        assert os.getsid(w.pid) == w.pid   # its own session
    finally:
        w.close()
        w.cleanup()


def test_the_judge_vets_normally_after_a_candidate_killed_the_launcher(practice_dir):
    from kernelvet.practice import by_name
    killer = by_name("kill_parent")
    assert vet(killer.path, killer.problem_ref, device="cpu", timeout=5).verdict is Verdict.REJECT
    honest = by_name("broadcast_matmul")
    assert vet(honest.path, honest.problem_ref, device="cpu").verdict is Verdict.PASS


@pytest.mark.parametrize("allow", [["bogus"], ["worker"]])
def test_bad_waivers_are_usage_errors(allow):
    from kernelvet.errors import UsageError
    from kernelvet.practice import by_name
    e = by_name("broadcast_matmul")
    with pytest.raises(UsageError):
        vet(e.path, e.problem_ref, device="cpu", allow=allow)


def test_a_host_worker_imports_triton_afresh_for_its_interpreter(write):
    """The launcher imported Triton for its CUDA workers, its installation hash paid before it forks
    (tests/test_triton_key.py; on a GPU, test_a_cuda_worker_starts_with_tritons_installation_hash_paid
    there); a worker without a device drops those modules, and the candidate's import loads Triton
    in its interpreter, which compiles nothing and needs no hash."""
    pytest.importorskip("triton")
    body = honest_matmul("import triton\nprint('INTERPRET', triton.knobs.runtime.interpret, flush=True)")
    report = vet(write("key.py", MATMUL_HEADER + body), "matmul", device="cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert "INTERPRET True" in report.candidate_output, report.candidate_output


# The worker's own code, broken from inside it (the candidate controls the worker): a method of
# its Worker class, found through the garbage collector, made to raise.
_BREAK_HARNESS = """
import gc, sys
_worker = next(o for o in gc.get_objects() if type(o).__name__ == "Worker" and hasattr(o, "sets"))
def _broken(self, msg):
    raise {error}("the harness, broken")
type(_worker)._do_{request} = _broken
"""


def test_a_worker_whose_own_code_raises_ends_with_a_status_and_its_last_line(write):
    body = _BREAK_HARNESS.format(error="KeyError", request="integrity") + HONEST_BODY
    report = vet(write("breaks.py", MATMUL_HEADER + body), "matmul", device="cpu")
    f = _worker_finding(report)
    assert report.verdict is Verdict.REJECT and f.status is Status.FAIL
    assert "own code raised (exit 70)" in f.summary and "KeyError" in f.summary, f.summary


def test_a_request_the_worker_runs_out_of_memory_on_is_answered_as_such(write):
    body = _BREAK_HARNESS.format(error="MemoryError", request="integrity") + HONEST_BODY
    report = vet(write("oom.py", MATMUL_HEADER + body), "matmul", device="cpu")
    f = _worker_finding(report)
    assert report.verdict is Verdict.REJECT and f.status is Status.FAIL
    assert "out of memory in the worker while answering 'integrity'" in f.summary, f.summary


def _judge_slowed(monkeypatch, seconds: float, times: int) -> None:
    """The judge's own work on the candidate's first `times` fresh outputs takes `seconds` more
    each: what comparing a big problem's outputs on the host costs."""
    from kernelvet.evidence import Evidence
    real, left = Evidence.add_call, [times]

    def slow(self, phase, *a, **k):
        if phase == "fresh" and left[0] > 0:
            left[0] -= 1
            time.sleep(seconds)
        return real(self, phase, *a, **k)
    monkeypatch.setattr(Evidence, "add_call", slow)


def test_the_judges_own_time_between_requests_is_not_charged_to_the_candidate(write, monkeypatch):
    """10 s of the judge's comparisons and an honest candidate's 6 s import (a compilation)
    overrun a 15 s --timeout together, whatever its calls take, neither alone (its calls take ~1 s
    on a quiet 2-core host, several on a busy one, where the timing measures again): the candidate
    is charged only for the time its worker holds a request."""
    _judge_slowed(monkeypatch, 10.0, 1)
    path = write("slow_import.py", MATMUL_HEADER + "import time\ntime.sleep(6)\n" + HONEST_BODY)
    report = vet(path, "matmul", device="cpu", timeout=15)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.requests_s["load"][1] > 6   # the candidate's part was real


def test_the_judges_own_time_past_the_timeout_is_the_problems_not_a_rejection(write, monkeypatch):
    from kernelvet.errors import UsageError
    _judge_slowed(monkeypatch, 2.5, 2)
    with pytest.raises(UsageError, match="the problem itself ran out of time: the judge's own work"):
        vet(write("honest.py", MATMUL_HEADER + HONEST_BODY), "matmul", device="cpu", timeout=4)
