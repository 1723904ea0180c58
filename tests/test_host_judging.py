"""Where the judge compares, and what it knows of the device without touching it.

A small CUDA problem is judged on the host (no CUDA context in the judge); a large one, or one
whose reference runs only on the device, on the device. The device's description and the flush
size come from the worker's first answer, checked here as the judge takes them."""

import pytest
import torch

from kernelvet import devices, judge, spawn
from kernelvet.errors import HarnessError

CUDA = torch.device("cuda", 0)   # a name only: nothing here starts CUDA
H200 = {"type": "cuda", "index": 0, "name": "NVIDIA H200", "capability": "9.0", "memory_bytes": 150 << 30,
        "multiprocessors": 132, "l2_bytes": 60 << 20}


class _MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


class _OnlyOnTheDevice(torch.nn.Module):
    def forward(self, a, b):
        return a.to("cuda") @ b.to("cuda")


def _pair(n):
    return [torch.rand(n, n), torch.rand(n, n)]


def test_a_small_cuda_problem_is_judged_on_the_host_with_its_first_reference_made_there():
    sample = _pair(256)
    where, first = judge._judged_on(CUDA, 2 * 256 ** 3, _MatMul(), sample)
    assert where == torch.device("cpu") and first.dtype == torch.float64 and first.device.type == "cpu"
    torch.testing.assert_close(first, sample[0].double() @ sample[1].double())


@pytest.mark.parametrize("flops, n", [(2 * 512 ** 3, 512), (None, 64), (1e6, 1100)])
def test_a_large_or_uncounted_cuda_problem_is_judged_on_the_device(flops, n):
    """Too many FLOPs, FLOPs unknown, or too many input elements (2 x 1100^2 > 2^20)."""
    assert judge._judged_on(CUDA, flops, _MatMul(), _pair(n)) == (CUDA, None)


def test_a_reference_that_runs_only_on_the_device_is_judged_there():
    assert judge._judged_on(CUDA, 1e6, _OnlyOnTheDevice(), _pair(16)) == (CUDA, None)


def test_a_cpu_run_is_judged_on_the_host_whatever_its_size():
    assert judge._judged_on(torch.device("cpu"), None, _MatMul(), _pair(8)) == (torch.device("cpu"), None)
    assert judge.host_judges(torch.device("cpu"), None) and not judge.host_judges(CUDA, None)
    assert judge.host_judges(CUDA, judge.HOST_JUDGE_FLOPS) and not judge.host_judges(CUDA, judge.HOST_JUDGE_FLOPS + 1)


def test_the_flush_buffer_is_twice_the_l2_and_at_least_256_mib():
    assert devices.flush_bytes(H200, 2.0) == devices.FLUSH_MIN_BYTES
    assert devices.flush_bytes({**H200, "name": "Some Future GPU", "l2_bytes": 200 << 20}, 2.0) == 400 << 20
    assert devices.flush_bytes({**H200, "l2_bytes": None}, 8.0) == 8 * (60 << 20)   # from the peak table
    assert devices.flush_bytes({"type": "cpu", "name": "x", "cores": 2}, 2.0) == 0


@pytest.mark.parametrize("bad", [
    None, [], {**H200, "type": "cpu"}, {**H200, "extra": 1}, {**H200, "multiprocessors": True},
    {**H200, "name": 7}, {**H200, "l2_bytes": 1.5},
])
def test_a_malformed_device_description_is_refused(bad):
    with pytest.raises(ValueError):
        devices.checked_description(bad, CUDA)
    assert devices.checked_description(H200, CUDA) == H200


class _Msg:
    def __init__(self, body):
        self.type, self.body = "prepared", body


class _Worker:
    def __init__(self, answer):
        self.answer = answer

    def request(self, type_):
        if isinstance(self.answer, Exception):
            raise self.answer
        return _Msg(self.answer)

    def take_prepared(self):   # no answer read ahead: read now
        return self.request(None)

    def output(self):
        return "worker log"


def test_the_judge_takes_the_workers_first_answer_as_the_devices_description():
    got = judge._prepared(_Worker({"start_s": 0.5, "device": H200, "flush_bytes": 256 << 20}), CUDA, 2.0)
    assert got == {"spare_start_s": 0.5, "device_info": H200}


@pytest.mark.parametrize("answer, says", [
    (spawn.CandidateRaised("prepare", "starting cuda:0: RuntimeError: no device", ""), "could not start cuda:0"),
    (spawn.WorkerEnded("the worker was killed by SIGKILL"), "ended while starting cuda:0"),
    ({"start_s": 0.1, "device": {**H200, "type": "cpu"}, "flush_bytes": 0}, "malformed"),
    ({"start_s": 0.1, "device": H200, "flush_bytes": -1}, "malformed"),
    ({"start_s": 0.1, "device": H200, "flush_bytes": 64 << 20}, "malformed"),   # not what 2 x its L2 calls for
])
def test_a_worker_that_cannot_start_or_describe_its_device_is_a_harness_error(answer, says):
    with pytest.raises(HarnessError, match=says):
        judge._prepared(_Worker(answer), CUDA, 2.0)


def test_the_device_is_resolved_without_initialising_cuda_in_the_judge(monkeypatch):
    """`torch.cuda.is_available()` runs cuInit (0.6-1.2 s on the H200's host); the count comes from
    NVML through `torch.cuda.device_count()` instead."""
    def cuinit():
        raise AssertionError("cuInit in the judge")
    monkeypatch.setattr(torch.cuda, "is_available", cuinit)
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert devices.resolve("auto") == CUDA and devices.resolve("cuda") == CUDA
    with pytest.raises(devices.UsageError, match="only 1 CUDA devices"):
        devices.resolve("cuda:1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert devices.resolve("auto") == torch.device("cpu")
    with pytest.raises(devices.UsageError, match="no CUDA device"):
        devices.resolve("cuda")


def test_a_judge_that_has_started_cuda_judges_a_small_problem_on_the_device(monkeypatch):
    """A warm API loop or `kernelvet serve` has its context already: comparing there is faster."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert judge._judged_on(CUDA, 2 * 256 ** 3, _MatMul(), _pair(256)) == (CUDA, None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where CUDA cannot start")
def test_a_worker_that_cannot_start_its_device_says_so_before_any_candidate_exists():
    """The real worker, asked to prepare a CUDA device on a machine without one: a `failed` answer
    to `prepare`, which the judge reports as the device not starting (not as a candidate's fault)."""
    import time
    from kernelvet import spares
    launcher = spawn.shared_launcher()
    w = spares.take(launcher, "cuda:0", 2.0, time.monotonic() + 60)
    try:
        with pytest.raises(HarnessError, match="could not start cuda:0"):
            judge._prepared(w, CUDA, 2.0)
    finally:
        w.close()
        w.cleanup()
