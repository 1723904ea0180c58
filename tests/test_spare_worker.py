"""The spare worker a vet starts for the next one (CUDA only in use; a CPU worker stands in here,
since the hand-over is the same): started on a thread, waited for, taken once, prepared."""

import contextlib
import time

import pytest

from kernelvet import spares, spawn


@pytest.fixture(autouse=True)
def _cpu_spares(monkeypatch):
    """CPU workers get spares here (in use: CUDA only), since the hand-over is the same."""
    monkeypatch.setattr(spares, "SPARE_FOR", ("cuda", "cpu"))


def _start_spare_soon(launcher) -> None:
    """What a vet's end does for the next vet when it has no worker of its own to end."""
    spares.after_vet(launcher, None, "cpu", 2.0, prepare_next=True)


def _spare_pid(launcher) -> int:
    spares._coming[id(launcher)].join()
    return spares._spares[id(launcher)][0].pid


@contextlib.contextmanager
def _taken(launcher, flush_factor=2.0):
    """The worker the next vet would get, closed afterwards."""
    w = spares.take(launcher, "cpu", flush_factor, time.monotonic() + 60)
    try:
        yield w
    finally:
        w.close()
        w.cleanup()


def test_a_spare_started_on_a_thread_is_taken_once_and_in_step():
    launcher = spawn.shared_launcher()
    _start_spare_soon(launcher)
    pid = _spare_pid(launcher)
    with _taken(launcher) as w:
        assert w.pid == pid
        assert id(launcher) not in spares._spares and id(launcher) not in spares._coming
        assert w.unread == 1   # its `prepared` answer: read by the vet, after the judge's own work
        assert w.request(None).type == "prepared"
        assert w.request("integrity").type == "state"
    with _taken(launcher) as fresh:   # none left: a new worker, asked to prepare too
        assert fresh.pid != pid and fresh.unread == 1
        prepared = fresh.request(None)
        assert prepared.type == "prepared" and prepared.body["device"]["type"] == "cpu"


def test_the_next_vet_waits_for_a_spare_still_being_started():
    launcher = spawn.shared_launcher()
    _start_spare_soon(launcher)
    coming = spares._coming[id(launcher)]
    with _taken(launcher) as w:   # at once: it must join the thread, then take what it made
        assert not coming.is_alive() and id(launcher) not in spares._spares
        assert w.request(None).type == "prepared" and w.request("integrity").type == "state"


def test_a_spare_prepared_for_another_flush_size_is_not_used():
    launcher = spawn.shared_launcher()
    _start_spare_soon(launcher)
    pid = _spare_pid(launcher)
    with _taken(launcher, flush_factor=4.0) as w:
        assert w.pid != pid and id(launcher) not in spares._spares
        assert w.request(None).body["flush_bytes"] == 0   # a CPU worker holds none
        assert w.request("integrity").type == "state"


def test_a_spare_that_died_is_replaced():
    launcher = spawn.shared_launcher()
    _start_spare_soon(launcher)
    pid = _spare_pid(launcher)
    spare = spares._spares[id(launcher)][0]
    spare.request(None)
    spare.kill()
    deadline = time.monotonic() + 10
    while not spare.gone() and time.monotonic() < deadline:
        time.sleep(0.01)
    with _taken(launcher) as w:
        assert w.pid != pid and w.unread == 1
        assert w.request(None).type == "prepared" and w.request("integrity").type == "state"


def test_the_worker_of_a_vet_is_ended_off_its_clock_and_the_next_vet_waits_for_that():
    launcher = spawn.shared_launcher()
    w = spawn.WorkerHandle(launcher, time.monotonic() + 60, device="cpu")
    w.hello()
    spares.after_vet(launcher, w, "cpu", 2.0, prepare_next=False)
    with _taken(launcher) as fresh:
        assert id(launcher) not in spares._coming
        assert w.gone() or w.sock.fileno() == -1   # closed before the next vet got its worker
        assert fresh.pid != w.pid and fresh.request(None).type == "prepared"
        assert fresh.request("integrity").type == "state"


@pytest.mark.parametrize("device, driver, visible, want", [
    ("cuda", False, None, "cuda:0"), ("cuda:3", False, None, "cuda:3"), ("cpu", True, None, None),
    ("auto", True, None, "cuda:0"), ("auto", True, "1", "cuda:0"), ("auto", True, "-1", None), ("auto", True, "", None),
    ("auto", False, None, None), ("cuda:x", True, None, None), ("tpu", True, None, None)])
def test_the_device_the_cli_starts_a_spare_for_before_it_has_torch(monkeypatch, device, driver, visible, want):
    """As `devices.resolve` would give it (cuda:N, the first visible device for auto), or None:
    no spare (a CPU run, a device string the vet will refuse)."""
    real = spares.os.path.exists
    monkeypatch.setattr(spares.os.path, "exists", lambda p: driver if p == "/dev/nvidiactl" else real(p))
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert spares.guess_device(device) == want


def test_a_spare_started_during_a_vet_is_ready_before_its_clocks_and_taken_by_the_next():
    """start_early forks the next worker on a thread; ready() waits for it and reads its `prepared`
    answer ahead (nothing of its start-up runs once the clocks do); the next vet takes it, the
    answer kept; a second start_early while one is there starts nothing."""
    launcher = spawn.shared_launcher()
    spares.wait_after_vet(launcher)
    spares._spares.pop(id(launcher), None)
    assert spares.start_early(launcher, "cpu", 2.0)
    assert not spares.start_early(launcher, "cpu", 2.0)   # one is coming
    spares.ready(launcher)
    w = spares._spares[id(launcher)][0]
    assert w.unread == 0 and w.prepared is not None and w.prepared.type == "prepared"
    assert not spares.start_early(launcher, "cpu", 2.0)   # one is there
    spares.after_vet(launcher, None, "cpu", 2.0, prepare_next=True)   # keeps it: no second spare
    with _taken(launcher) as taken:
        assert taken.pid == w.pid
        assert taken.take_prepared().type == "prepared" and taken.prepared is None
        assert taken.request("integrity").type == "state"


def test_an_early_spare_left_unwaited_by_a_vet_that_stopped_early_is_the_next_vets():
    launcher = spawn.shared_launcher()
    spares.wait_after_vet(launcher)
    spares._spares.pop(id(launcher), None)
    assert spares.start_early(launcher, "cpu", 2.0)
    spares.after_vet(launcher, None, "cpu", 2.0, prepare_next=True)   # the vet ended before its clocks
    with _taken(launcher) as w:
        assert id(launcher) not in spares._early and id(launcher) not in spares._spares
        assert w.unread == 1 and w.take_prepared().type == "prepared"
        assert w.request("integrity").type == "state"
    with _taken(launcher) as fresh:   # that one was the only spare
        assert fresh.pid != w.pid and fresh.take_prepared().type == "prepared"


def test_vets_with_early_spares_wait_for_them_before_their_clocks_and_judge_as_before(tmp_path):
    from kernelvet import vet
    from kernelvet.report import Verdict
    from .test_problem_data import QUICK, as_candidate, problem, write
    text = problem("return xs[0] * 2 + 1", "return [torch.randn(64, 64)]", head="")
    ref = write(tmp_path, "affine.py", "import torch\n" + text)
    honest = write(tmp_path, "h.py", "import torch\n" + as_candidate(text))
    zeros = write(tmp_path, "z.py", "import torch\n" + as_candidate(text, "return torch.zeros_like(xs[0])"))
    launcher = spawn.shared_launcher()
    allow = ["library-call", "timers"]   # microsecond calls on a busy host: the data checks decide
    first = vet(honest, ref, device="cpu", settings=QUICK, allow=allow, launcher=launcher)
    second = vet(zeros, ref, device="cpu", settings=QUICK, allow=allow, launcher=launcher)
    third = vet(honest, ref, device="cpu", settings=QUICK, allow=allow, launcher=launcher, prepare_next=False)
    assert first.verdict is Verdict.PASS and third.verdict is Verdict.PASS, [f.summary for f in third.failed]
    assert second.verdict is Verdict.REJECT
    assert "spare-wait" in first.phases_s and "spare-wait" not in second.phases_s   # stopped before its clocks
    assert "spare-wait" not in third.phases_s   # no next vet
