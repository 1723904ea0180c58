"""The spare worker a vet starts for the next one (CUDA only in use; a CPU worker stands in here,
since the hand-over is the same): started on a thread, waited for, taken once, prepared."""

import contextlib
import time

import torch

from kernelvet import judge, spawn


class _CudaLike:
    """Passes the spare path's CUDA test but names the CPU to the worker."""
    type = "cuda"

    def __str__(self):
        return "cpu"


def _start_spare_soon(launcher) -> None:
    """What a vet's end does for the next vet when it has no worker of its own to end."""
    judge._after_vet(launcher, None, _CudaLike(), 0, prepare_next=True)


def _spare_pid(launcher) -> int:
    judge._spares_coming[id(launcher)].join()
    return judge._spares[id(launcher)][0].pid


@contextlib.contextmanager
def _taken(launcher, flush_bytes=0):
    """The worker the next vet would get, closed afterwards."""
    w = judge._take_worker(launcher, torch.device("cpu"), flush_bytes, time.monotonic() + 60)
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
        assert id(launcher) not in judge._spares and id(launcher) not in judge._spares_coming
        assert w.unread == 1   # its `prepared` answer: read by the vet, after the judge's own work
        assert w.request(None).type == "prepared"
        assert w.request("integrity").type == "state"
    with _taken(launcher) as fresh:   # none left: a new worker
        assert fresh.pid != pid


def test_the_next_vet_waits_for_a_spare_still_being_started():
    launcher = spawn.shared_launcher()
    _start_spare_soon(launcher)
    coming = judge._spares_coming[id(launcher)]
    with _taken(launcher) as w:   # at once: it must join the thread, then take what it made
        assert not coming.is_alive() and id(launcher) not in judge._spares
        assert w.request(None).type == "prepared" and w.request("integrity").type == "state"


def test_a_spare_with_a_smaller_flush_buffer_is_not_used():
    launcher = spawn.shared_launcher()
    _start_spare_soon(launcher)
    pid = _spare_pid(launcher)
    with _taken(launcher, flush_bytes=1 << 40) as w:
        assert w.pid != pid and id(launcher) not in judge._spares
        assert w.request("integrity").type == "state"


def test_a_spare_that_died_is_replaced():
    launcher = spawn.shared_launcher()
    _start_spare_soon(launcher)
    pid = _spare_pid(launcher)
    spare = judge._spares[id(launcher)][0]
    spare.request(None)
    spare.kill()
    deadline = time.monotonic() + 10
    while not spare.gone() and time.monotonic() < deadline:
        time.sleep(0.01)
    with _taken(launcher) as w:
        assert w.pid != pid and w.unread == 0
        assert w.request("integrity").type == "state"


def test_the_worker_of_a_vet_is_ended_off_its_clock_and_the_next_vet_waits_for_that():
    launcher = spawn.shared_launcher()
    w = spawn.WorkerHandle(launcher, time.monotonic() + 60, device="cpu")
    w.hello()
    judge._after_vet(launcher, w, torch.device("cpu"), 0, prepare_next=True)   # CPU: no spare
    with _taken(launcher) as fresh:
        assert id(launcher) not in judge._spares_coming
        assert w.gone() or w.sock.fileno() == -1   # closed before the next vet got its worker
        assert fresh.pid != w.pid and fresh.request("integrity").type == "state"
