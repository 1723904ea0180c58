"""Candidates that go after the judge itself, under the default confinement (namespaces of the
worker's own, an unprivileged uid, a read-only file system: SECURITY.md). Each returns zeros and
needs its attack to pass; each must end in `reject` for its zeros (precision), with its attack
failed, the judge alive and the next vet on the same launcher unaffected."""

import json
import os
import signal
import site
import subprocess
import sys
import uuid

import pytest

from kernelvet import sandbox, spares, spawn, vet
from kernelvet.errors import UsageError
from kernelvet.ids import CheckId
from kernelvet.report import Verdict

from .candidates import MATMUL_HEADER, honest_matmul

HEADER = "import os, sys, signal, glob\n" + MATMUL_HEADER
ZEROS = "out.zero_()"     # the cheat each attack is meant to get through
ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def launcher():
    launcher = spawn.Launcher()
    if launcher.sandbox != "namespaces":
        launcher.close()
        pytest.skip(f"this machine gives workers no namespaces of their own ({launcher.sandbox})")
    yield launcher
    launcher.close()


@pytest.fixture
def nobodys_dir():
    import pathlib
    import shutil
    import tempfile
    d = pathlib.Path(tempfile.mkdtemp(prefix="kernelvet-test-", dir="/tmp"))
    os.chown(d, 65534, 65534)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def zeros_with(write, attack: str, name: str = "attack") -> str:
    """A zeros matmul that runs `attack` (module-level source) when imported."""
    return write(f"{name}_{uuid.uuid4().hex[:6]}.py", HEADER + attack + "\n" + honest_matmul(ZEROS))


def assert_rejected_for_its_zeros(report):
    assert report.verdict is Verdict.REJECT, report.dumps()
    assert CheckId.PRECISION in {f.check for f in report.failed}, [f.summary for f in report.failed]


def assert_next_vet_unaffected(launcher):
    from kernelvet.practice import by_name
    honest = by_name("broadcast_matmul")
    report = vet(honest.path, honest.problem_ref, device="cpu", launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert launcher.alive()


def assert_confined(containment: dict):
    assert containment["sandbox"] == "namespaces", containment
    c = containment["confined"]
    assert {"mount", "pid", "net", "ipc", "uts"} <= set(c["namespaces"]), c
    assert c["no_new_privs"] is True and c["groups"] == [] and c["proc"] == "own pid namespace"
    assert all(v.endswith("=0000000000000000") for v in c["capabilities"].split(",")), c
    assert containment["caches"] == "private"
    if ROOT:
        assert c["uid"] != 0 and c["gid"] != 0 and "user" not in c["namespaces"]
    else:
        assert "user" in c["namespaces"]


# -- reaching the judge's process --------------------------------------------------------------

FIND_AND_SIGNAL_SOFT = """
JUDGE = {judge}
SIG = signal.{sig}
try:
    with open({json_path!r}, "w") as fh:
        fh.write('{{"verdict": "pass", "findings": []}}')
    print("WROTE JSON", flush=True)
except OSError as e:
    print("JSON DENIED", e.strerror, flush=True)
targets, pid = set(), os.getpid()
while pid > 1:                                   # the judge by process ancestry
    try:
        with open(f"/proc/{{pid}}/stat") as fh:
            pid = int(fh.read().rsplit(")", 1)[1].split()[1])
    except OSError as e:                         # hidepid: a process of another uid has no entry
        print("ANCESTRY HIDDEN", pid, e.strerror, flush=True)
        break
    targets.add(pid)
targets |= {{int(p) for p in os.listdir("/proc") if p.isdigit()}} | {{JUDGE, os.getppid()}}
for p in sorted(targets - {{os.getpid(), 0}}):
    try:
        os.kill(p, SIG)
        print("SIGNALLED", p, flush=True)
    except OSError as e:
        print("NOT SIGNALLED", p, e.strerror, flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSTOP"])
def test_killing_or_stopping_the_judge_after_forging_its_report(write, tmp_path, sig):
    """Through the CLI, as a user runs it: the candidate knows the judge's pid and the --json path."""
    report_path = tmp_path / "report.json"
    # The CLI's own pid is not known ahead: the candidate finds it by ancestry, and gets the test's
    # pid (the CLI's parent) as well.
    cand = zeros_with(write, FIND_AND_SIGNAL_SOFT.format(judge=os.getpid(), sig=sig, json_path=str(report_path)))
    env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(os.path.dirname(__file__)), "src")}
    run = subprocess.run([sys.executable, "-m", "kernelvet", "check", cand, "--ref", "matmul", "--device", "cpu",
                          "--json", str(report_path), "--timeout", "120", "--verbose"],
                         capture_output=True, text=True, timeout=400, env=env)
    assert run.returncode == 1, (run.returncode, run.stdout[-3000:], run.stderr[-3000:])
    data = json.loads(report_path.read_text())
    assert data["verdict"] == "reject" and data["containment"]["sandbox"] == "namespaces"
    assert_confined(data["containment"])
    assert "precision" in {f["check"] for f in data["findings"] if f["status"] == "fail"}
    out = data["candidate_output"]
    assert "JSON DENIED" in out and "WROTE JSON" not in out, out
    # In its own PID namespace the judge has no pid; its init there is of another uid.
    signalled = [line for line in out.splitlines() if line.startswith("SIGNALLED")]
    assert signalled == [], out
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".kernelvet-report-")]   # no temp left


def test_signals_from_the_worker_reach_nothing_of_the_judges(launcher, write, tmp_path):
    cand = zeros_with(write, FIND_AND_SIGNAL_SOFT.format(judge=os.getpid(), sig="SIGSTOP",
                                                         json_path=str(tmp_path / "r.json")))
    report = vet(cand, "matmul", device="cpu", timeout=120, launcher=launcher)
    assert_rejected_for_its_zeros(report)
    assert_confined(report.containment)
    out = report.candidate_output
    assert "SIGNALLED" not in out.replace("NOT SIGNALLED", ""), out
    assert f"NOT SIGNALLED {os.getpid()}" in out, out     # the judge's pid means nothing in there
    assert not (tmp_path / "r.json").exists()
    assert_next_vet_unaffected(launcher)


def test_a_worker_that_stops_itself_ends_at_the_judges_deadline(launcher, write):
    """The judge's deadline is its own: a stopped worker answers nothing, and is killed."""
    stop = write("stop.py", HEADER + honest_matmul("os.kill(os.getpid(), signal.SIGSTOP)"))
    report = vet(stop, "matmul", device="cpu", timeout=8, launcher=launcher)
    assert report.verdict is Verdict.REJECT
    assert "timed out" in report.finding(CheckId.WORKER).summary, report.finding(CheckId.WORKER)
    assert_next_vet_unaffected(launcher)


CONNECT = """
try:
    c = __import__("socket").socket(__import__("socket").AF_UNIX)
    c.connect({path!r})
    print("UNIX connected", flush=True)
except OSError as e:
    print("UNIX refused", e.strerror, flush=True)
"""


def test_unix_sockets_of_the_host_are_out_of_reach(launcher, write, nobodys_dir):
    """A socket anyone may connect to (an agent's, a bus's, a server's): the network namespace does
    not cover sockets bound to paths, so the worker may open no new connection at all."""
    import socket as socketlib
    path = str(nobodys_dir / "open.sock")
    os.chmod(nobodys_dir, 0o777)
    server = socketlib.socket(socketlib.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(1)
    server.setblocking(False)
    try:
        report = vet(zeros_with(write, CONNECT.format(path=path)), "matmul", device="cpu", timeout=120,
                     launcher=launcher)
        assert_rejected_for_its_zeros(report)
        assert "UNIX refused" in report.candidate_output and "UNIX connected" not in report.candidate_output
        assert report.containment["confined"]["seccomp"]
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert_next_vet_unaffected(launcher)


# -- reading the judge's memory ----------------------------------------------------------------

READ_JUDGE = """
JUDGE, LAUNCHER = {judge}, {launcher}
pids = {{JUDGE, LAUNCHER, os.getppid()}} | {{int(p) for p in os.listdir("/proc") if p.isdigit()}}
for p in sorted(pids - {{os.getpid()}}):
    for what in ("mem", "environ", "cmdline", "maps"):
        try:
            with open(f"/proc/{{p}}/{{what}}", "rb") as fh:
                data = fh.read(4096)
            print("READ", p, what, len(data), flush=True)
        except OSError as e:
            print("DENIED", p, what, e.strerror, flush=True)
"""


def test_reading_the_judges_memory_environment_or_command_line(launcher, write):
    cand = zeros_with(write, READ_JUDGE.format(judge=os.getpid(), launcher=launcher.proc.pid))
    report = vet(cand, "matmul", device="cpu", timeout=120, launcher=launcher)
    assert_rejected_for_its_zeros(report)
    out = report.candidate_output
    for pid in (os.getpid(), launcher.proc.pid):
        for what in ("mem", "environ", "cmdline"):
            assert f"DENIED {pid} {what}" in out, out
    # Only its own namespace's init (pid 1, another uid) is there to try; nothing of it is readable
    # but what /proc shows every process about every other (its command line is the launcher's).
    assert "READ 1 mem" not in out and "READ 1 environ" not in out, out
    assert_next_vet_unaffected(launcher)


def test_the_judge_and_launcher_are_not_dumpable(launcher):
    # Not dumpable: /proc/PID belongs to root whatever the process's uid.
    assert os.stat(f"/proc/{os.getpid()}").st_uid == 0
    assert os.stat(f"/proc/{launcher.proc.pid}").st_uid == 0
    import ctypes
    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0   # PR_GET_DUMPABLE in the judge


# -- writing the judge's code ------------------------------------------------------------------

def _judge_code_targets() -> dict[str, str]:
    import kernelvet
    import kernelvet.render
    pkg = os.path.dirname(kernelvet.__file__)
    return {"late import": kernelvet.render.__file__,                   # the renderer, imported by the judge
            "installed package": os.path.join(pkg, "__init__.py"),
            "new module": os.path.join(pkg, "kv_planted.py"),
            "sitecustomize": os.path.join(site.getsitepackages()[0], "sitecustomize.py"),
            "usercustomize": os.path.join(os.path.dirname(os.__file__), "sitecustomize.py")}


WRITE_CODE = """
TARGETS = {targets!r}
for what, path in TARGETS.items():
    try:
        with open(path, "a") as fh:
            fh.write("\\nimport os as _kv; _kv.environ['KV_PLANTED'] = '1'\\n")
        print("WROTE", what, flush=True)
    except OSError as e:
        print("DENIED", what, e.strerror, flush=True)
"""


def test_writing_into_the_judges_imports_the_package_or_sitecustomize(launcher, write):
    targets = _judge_code_targets()
    before = {k: (os.path.getsize(p) if os.path.exists(p) else None) for k, p in targets.items()}
    cand = zeros_with(write, WRITE_CODE.format(targets=targets))
    try:
        report = vet(cand, "matmul", device="cpu", timeout=120, launcher=launcher)
        assert_rejected_for_its_zeros(report)
        out = report.candidate_output
        assert all(f"DENIED {what}" in out for what in targets), out
        after = {k: (os.path.getsize(p) if os.path.exists(p) else None) for k, p in targets.items()}
        assert after == before
        assert_next_vet_unaffected(launcher)
    finally:   # if confinement failed, leave the machine as it was
        for k, p in targets.items():
            if before[k] is None and os.path.exists(p):
                os.unlink(p)
            elif before[k] is not None and os.path.getsize(p) != before[k]:
                with open(p, "r+b") as fh:
                    fh.truncate(before[k])


# -- compile caches ----------------------------------------------------------------------------

POISON = """
MARK = {mark!r}
SHARED = {shared!r}
own = [os.environ[k] for k in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH")]
print("OWN", own, flush=True)
for d in own + SHARED:
    try:
        os.makedirs(os.path.join(d, MARK), exist_ok=True)
        with open(os.path.join(d, MARK, "module.so"), "w") as fh:
            fh.write("planted")
        print("PLANTED", d, flush=True)
    except OSError as e:
        print("DENIED", d, e.strerror, flush=True)
"""
LOOK = """
MARK = {mark!r}
for k in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "HOME", "TMPDIR"):
    d = os.environ[k]
    found = glob.glob(os.path.join(d, "**", MARK), recursive=True)
    print("FOUND" if found else "CLEAN", k, flush=True)
"""


def test_a_poisoned_compile_cache_never_reaches_the_next_vet(launcher, write):
    mark = "kv-poison-" + uuid.uuid4().hex[:8]
    home = os.path.expanduser("~")
    shared = [os.path.join(home, ".triton", "cache"), os.path.join(home, ".cache", "torch_extensions"),
              os.environ.get("TRITON_CACHE_DIR", os.path.join(home, ".triton", "cache"))]
    first = zeros_with(write, POISON.format(mark=mark, shared=shared), "poison")
    report = vet(first, "matmul", device="cpu", timeout=120, launcher=launcher)
    assert_rejected_for_its_zeros(report)
    out = report.candidate_output
    assert out.count("PLANTED") == 4, out                     # its own caches, in its own directory
    assert all(f"DENIED {d}" in out for d in shared), out     # the user's: out of reach
    assert not any(os.path.exists(os.path.join(d, mark)) for d in shared)
    spares.wait_after_vet(launcher)
    # The next candidate, on the same launcher, sees none of it (an honest one: it must pass).
    second = write("looks.py", HEADER + LOOK.format(mark=mark) + "\n" + honest_matmul())
    report = vet(second, "matmul", device="cpu", timeout=120, launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert "FOUND" not in report.candidate_output and report.candidate_output.count("CLEAN") == 6
    assert_next_vet_unaffected(launcher)


# -- choosing the confinement ------------------------------------------------------------------

def test_no_confinement_is_refused_in_one_line_unless_off(monkeypatch):
    from kernelvet import namespaces
    monkeypatch.setattr(namespaces, "probe", lambda cuda=False: "unshare: Operation not permitted")
    monkeypatch.setattr(sandbox, "resolve", lambda mode: None)
    with pytest.raises(UsageError) as exc:
        sandbox.choose("auto")
    assert "\n" not in str(exc.value) and "--sandbox off" in str(exc.value)
    with pytest.raises(UsageError, match="namespaces"):
        sandbox.choose("namespaces")
    assert sandbox.choose("off") == ("off", None)


def test_cli_refuses_to_run_unconfined_with_exit_2(write, tmp_path, monkeypatch):
    from kernelvet import cli, namespaces
    monkeypatch.setattr(namespaces, "probe", lambda cuda=False: "unshare: Operation not permitted")
    monkeypatch.setattr(sandbox, "resolve", lambda mode: None)
    monkeypatch.setattr(spawn, "_shared", {})
    import io
    err = io.StringIO()
    code = cli.guarded(lambda: cli.COMMANDS["check"](cli._parser().parse_args(
        ["check", zeros_with(write, ""), "--ref", "matmul", "--device", "cpu", "--no-server"])), err)
    assert code == 2 and err.getvalue().count("\n") == 1 and "refusing" in err.getvalue(), err.getvalue()


def test_sandbox_off_is_recorded_in_the_report(write):
    off = spawn.Launcher(sandbox="off")
    try:
        report = vet(zeros_with(write, ""), "matmul", device="cpu", timeout=120, launcher=off)
        assert report.containment["sandbox"] == "off" and report.containment["confined"] is None
        assert report.to_json()["containment"]["sandbox"] == "off"
    finally:
        off.close()


def test_the_worker_runs_the_bytes_the_judge_read(launcher, write):
    """A worker of another uid cannot reach a candidate in a private directory: it gets a copy,
    which it cannot change, made when the judge asked for its import."""
    if not ROOT:
        pytest.skip("only a worker of another uid gets a copy")
    path = write("private.py", HEADER + "print('FILE', __file__, flush=True)\n" + honest_matmul())
    os.chmod(os.path.dirname(path), 0o700)
    report = vet(path, "matmul", device="cpu", timeout=120, launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert "FILE " in report.candidate_output and path not in report.candidate_output


# -- CUDA (run on the GPU machine: `pytest -m gpu tests/test_confinement.py`) --------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["triton_gemm_ieee", "cuda_tiled_gemm"])
def test_cuda_honest_gemms_pass_confined(launcher, name):
    """Device nodes, driver libraries, Triton's and the extension builder's private caches: an
    honest Triton GEMM and an inline CUDA GEMM pass under the default confinement."""
    from kernelvet.practice import by_name
    entry = by_name(name)
    report = vet(entry.path, entry.problem_ref, device="cuda", timeout=entry.timeout, launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    c = report.containment
    assert c["sandbox"] == "namespaces" and c["caches"] == "private", c
    if ROOT:   # the host's PID and IPC namespaces (CUDA IPC), a uid of its own, the judge hidden
        assert "pid" not in c["confined"]["namespaces"] and "ipc" not in c["confined"]["namespaces"]
        assert c["confined"]["proc"] == "hidepid=invisible" and c["confined"]["uid"] != 0


@pytest.mark.gpu
def test_a_cuda_worker_can_neither_see_nor_signal_nor_read_the_judge(launcher, write):
    attack = (READ_JUDGE.format(judge=os.getpid(), launcher=launcher.proc.pid)
              + FIND_AND_SIGNAL_SOFT.format(judge=os.getpid(), sig="SIGSTOP", json_path="/nonexistent/r.json"))
    zeros = ("\nclass ModelNew(nn.Module):\n    def forward(self, A, B):\n"
             "        return torch.zeros(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)\n")
    path = write("cuda_attack.py", HEADER + attack + zeros)
    report = vet(path, "matmul", device="cuda", timeout=120, launcher=launcher)
    assert_rejected_for_its_zeros(report)
    out = report.candidate_output
    assert "SIGNALLED" not in out.replace("NOT SIGNALLED", ""), out
    for pid in (os.getpid(), launcher.proc.pid):
        assert f"DENIED {pid} mem" in out and f"DENIED {pid} environ" in out, out
    assert os.path.exists(f"/proc/{os.getpid()}")   # and the judge runs on


def test_as_another_user_the_worker_gets_a_user_namespace(nobodys_dir):
    """The path a non-root user takes: unprivileged user namespaces, where the kernel allows them
    (tried here by a child that gives up root first)."""
    if not ROOT:
        pytest.skip("needs root to become another user for the test")
    from kernelvet import namespaces
    tmp_path = nobodys_dir
    cwd = tmp_path / "w"
    cwd.mkdir()
    os.chown(cwd, 65534, 65534)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            os.setsid()
            took = namespaces.enter(str(cwd), cuda=False)
            try:
                open(os.path.join(os.path.dirname(str(cwd)), "outside"), "w").close()
                took["wrote_outside"] = True
            except OSError:
                took["wrote_outside"] = False
            took["judge_visible"] = os.path.exists(f"/proc/{os.getppid() or 0}/environ") and os.getppid() > 1
            os.write(w, json.dumps(took).encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(w, json.dumps({"refused": f"{type(exc).__name__}: {exc}"}).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    took = json.loads(data)
    if took.get("refused", "").startswith("Unconfinable: unshare"):
        pytest.skip(f"this kernel refuses unprivileged user namespaces: {took['refused']}")
    assert {"user", "mount", "pid", "net", "ipc", "uts"} <= set(took["namespaces"]), took
    assert took["uid"] == 65534 and took["no_new_privs"] is True
    assert all(v.endswith("=0000000000000000") for v in took["capabilities"].split(",")), took
    assert took["wrote_outside"] is False and took["judge_visible"] is False
    assert not (tmp_path / "outside").exists()


def test_the_report_replaces_whatever_was_at_its_path_whole(tmp_path):
    from kernelvet import cli
    target = tmp_path / "r.json"
    target.write_text('{"verdict": "pass", "forged": true}')
    os.chmod(target, 0o444)          # and a file the judge could not even open for writing
    cli._write(str(target), '{"verdict": "reject"}')
    assert json.loads(target.read_text()) == {"verdict": "reject"}
    assert sorted(os.listdir(tmp_path)) == ["r.json"]      # no temporary file left beside it
    r, w = os.pipe()                 # not a regular file: written in place
    try:
        cli._write(f"/proc/self/fd/{w}", '{"verdict": "pass"}')
        assert os.read(r, 100) == b'{"verdict": "pass"}\n'
    finally:
        os.close(r)
        os.close(w)
