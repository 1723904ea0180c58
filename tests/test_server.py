"""`kernelvet serve` and the client in `kernelvet check`: the same verdicts, exit codes and files
as an in-process vet; a client of other code, or a socket someone else could own, is not served."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from kernelvet import practice, server

HONEST = practice.by_name("softmax").path
CHEAT = practice.by_name("copy_input").path


def _env(sock_path):
    return {**os.environ, "KERNELVET_SOCKET": str(sock_path), "PYTHONPATH": os.pathsep.join(sys.path)}


def _check(sock_path, *argv, cwd):
    return subprocess.run([sys.executable, "-m", "kernelvet", "check", *map(str, argv)], env=_env(sock_path),
                          cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server on a private socket, for the module; stopped (SIGTERM) afterwards."""
    d = tmp_path_factory.mktemp("serve")
    path = d / "private" / "serve.sock"
    proc = subprocess.Popen([sys.executable, "-m", "kernelvet", "serve", "--device", "cpu", "--sandbox", "off",
                             "--idle", "300"], env=_env(path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 120
    while _server_pid(path) is None:   # listening, not only bound
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() else "slow"
        time.sleep(0.1)
    yield path
    proc.terminate()
    proc.wait(timeout=30)
    assert not path.exists()   # the socket is removed on SIGTERM


def test_a_served_check_passes_writes_its_json_and_says_where_it_ran(served, tmp_path):
    proc = _check(served, HONEST, "--ref", "softmax", "--device", "cpu", "--json", "report.json", "--verbose",
                  cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stdout and "served by kernelvet serve" in proc.stdout
    report = json.loads((tmp_path / "report.json").read_text())   # relative to the client's directory
    assert report["verdict"] == "pass" and report["timing"]["median_ms"] > 0


def test_a_served_cheat_is_rejected_with_exit_1(served, tmp_path):
    proc = _check(served, CHEAT, "--ref", "matmul", "--device", "cpu", cwd=tmp_path)
    assert proc.returncode == 1 and "identity" in proc.stdout


def test_a_served_usage_error_is_one_line_with_exit_2(served, tmp_path):
    proc = _check(served, HONEST, "--ref", "no-such-problem", "--device", "cpu", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("kernelvet: error:") and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr + proc.stdout


def test_no_server_vets_in_process(served, tmp_path):
    proc = _check(served, HONEST, "--ref", "softmax", "--device", "cpu", "--no-server", "--verbose", cwd=tmp_path)
    assert proc.returncode == 0 and "served by" not in proc.stdout and "start-up" in proc.stdout
    steps = proc.stdout.split("the launcher's own steps, seconds each: ", 1)[1].splitlines()[0]
    assert steps.startswith("import torch ")   # the first step, where most of a cold start goes


def test_a_client_of_other_code_is_refused_and_the_server_stays_up(served):
    def ask(req):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(served))
            s.sendall(json.dumps(req).encode() + b"\n")
            return json.loads(s.makefile("rb").readline())
    req = {"code": "0" * 32, "argv": ["check", HONEST, "--ref", "softmax"], "cwd": "/", "columns": 80, "color": False}
    assert "refused" in ask(req)
    assert "refused" in ask({"argv": "check"})
    req = {**req, "code": server.code_id(), "argv": ["show", "x.json"]}
    assert ask(req)["exit"] == 2   # `check` only


def test_sigterm_during_a_served_check_stops_the_server(monkeypatch, tmp_path):
    """The SIGTERM handler's exception passes through a served check: `_run_check` turns SystemExit
    (argparse's --help) into the check's exit code, which would have kept the server listening."""
    from kernelvet import cli

    def terminated_mid_vet(*args, **kwargs):
        server._stop(signal.SIGTERM, None)
    monkeypatch.setattr(cli, "vet_and_render", terminated_mid_vet)
    req = {"code": server.code_id(), "argv": ["check", HONEST, "--ref", "softmax", "--device", "cpu"],
           "cwd": str(tmp_path), "columns": 80, "color": False}
    with pytest.raises(server._Stopped):
        server._run_check(req, io.StringIO(), io.StringIO())


def test_a_socket_in_a_directory_others_can_enter_is_not_used(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    (shared / "serve.sock").touch()
    monkeypatch.setenv("KERNELVET_SOCKET", str(shared / "serve.sock"))
    assert not server.is_private(str(shared))
    assert server.forward(["check", HONEST, "--ref", "softmax"]) is None


def test_an_idle_server_exits_and_removes_its_socket(tmp_path):
    path = tmp_path / "p" / "serve.sock"
    proc = subprocess.run([sys.executable, "-m", "kernelvet", "serve", "--device", "cpu", "--sandbox", "off",
                           "--idle", "1"], env=_env(path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "idle, exiting" in proc.stdout, proc.stdout + proc.stderr
    assert not path.exists()


def _server_pid(path) -> int | None:
    """The pid of whatever listens on `path` (SO_PEERCRED), None if nothing does."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(path))
            return server._PEERCRED.unpack(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                         server._PEERCRED.size))[0]
    except OSError:
        return None


def test_check_serve_starts_a_server_that_serves_the_next_check(tmp_path):
    path = tmp_path / "auto" / "serve.sock"
    try:
        first = _check(path, HONEST, "--ref", "softmax", "--device", "cpu", "--sandbox", "off", "--serve",
                       cwd=tmp_path)
        assert first.returncode == 0 and "started kernelvet serve in the background" in first.stderr, first.stderr
        deadline = time.monotonic() + 120
        while _server_pid(path) is None:
            assert time.monotonic() < deadline, (path.parent / "serve.log").read_text()
            time.sleep(0.1)
        second = _check(path, HONEST, "--ref", "softmax", "--device", "cpu", "--serve", "--verbose", cwd=tmp_path)
        assert second.returncode == 0 and "started" not in second.stderr, second.stderr
        assert f"kernelvet serve (pid {_server_pid(path)})" in second.stdout
        # a second server on the same socket is refused while the first lives
        again = subprocess.run([sys.executable, "-m", "kernelvet", "serve", "--device", "cpu", "--sandbox", "off"],
                               env=_env(path), capture_output=True, text=True, timeout=120)
        assert again.returncode == 2 and "already listens" in again.stderr, again.stderr
    finally:   # the detached server, whatever failed above
        pid = _server_pid(path)
        if pid is not None:
            os.kill(pid, 15)
    deadline = time.monotonic() + 30
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not path.exists()


def test_serve_starts_nothing_where_a_server_of_other_code_listens(tmp_path, monkeypatch):
    """`check --serve` after a refusal: the socket is taken (by a server of other code, here a bare
    listener), so no second server is started; it would only fail on the lock."""
    d = tmp_path / "other"
    d.mkdir(mode=0o700)
    path = d / "serve.sock"
    monkeypatch.setenv("KERNELVET_SOCKET", str(path))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(path))
        other.listen(1)
        assert server.start_background(device="cpu", sandbox="off") is None
    assert not (d / "serve.log").exists()
