"""What the worker holds of the requests it answered: a set it was sent lives once, in the place
it was put, and nothing of a request outlives its answer; asked, the worker says what its
allocator holds (its word, shown beside the device's account)."""

from __future__ import annotations

import socket
import weakref

import pytest
import torch

from kernelvet import protocol
from kernelvet.judge import memory_beside
from kernelvet.worker import observe, serve

MIB = 1 << 20


@pytest.fixture
def worker():
    a, b = socket.socketpair()
    yield serve.Worker(a)
    a.close()
    b.close()


def _set_of(t: torch.Tensor) -> tuple[list, list]:
    """A one-tensor set's layout and blobs, its tensor as a loan decodes one (or as a host one)."""
    return [{"t": 0}], [protocol.Blob(str(t.dtype).removeprefix("torch."), tuple(t.shape), t)]


def test_a_host_set_is_copied_where_it_is_placed(worker):
    t = torch.arange(12.0)
    layout, blobs = _set_of(t)
    worker._place_set(3, layout, blobs)
    placed = worker.sets[3][0]
    assert torch.equal(placed, t) and placed.data_ptr() != t.data_ptr()


def test_nothing_of_an_answered_request_is_held_while_the_worker_waits(worker, monkeypatch):
    """The request's own tensors (a set it carried, copied out of lent buffers on a GPU) die with
    its answer: waiting for the next request, the worker holds only the set it placed."""
    carried = torch.arange(64.0)
    alive = weakref.ref(carried)
    layout, blobs = _set_of(carried)
    requests = [protocol.Message("inputs", {"set": 1, "layout": layout}, tuple(blobs))]
    del carried, blobs
    waited = []

    def recv(*a, **k):
        if requests:
            return requests.pop()
        waited.append(alive() is None)   # the next request awaited: the last one's tensors gone?
        return protocol.Message("bye", {})

    monkeypatch.setattr(serve.protocol, "recv", recv)
    monkeypatch.setattr(serve.protocol, "send", lambda *a, **k: None)
    worker.serve()
    assert waited == [True], "the answered request's tensor was still alive while the worker waited"
    assert torch.equal(worker.sets[1][0], torch.arange(64.0))


def test_off_cuda_the_census_is_empty_and_says_nothing(worker):
    assert observe.device_census(torch.device("cpu"), torch.cuda.memory_stats) == {}
    assert memory_beside.census_said({}) == ""


def test_live_storages_counts_each_storage_once_with_its_size():
    big = torch.empty(3 * MIB + 5, dtype=torch.uint8)
    views = [big[:10], big[7:].view(torch.uint8)]   # one storage, however many tensors see it
    found = [n for n, _ in observe.live_storages(torch.device("cpu")) if n == 3 * MIB + 5]
    assert found == [3 * MIB + 5], found
    del big, views


def test_the_workers_word_is_shown_as_its_own_and_a_malformed_one_not_at_all():
    said = memory_beside.census_said({"allocated": 48 << 30, "reserved": 50 << 30,
                                      "storages": [[4 << 30, 6], [256 * MIB, 1]]})
    assert said == (" (the worker says its allocator held 48.0 GiB in tensors and reserved 50.0 GiB, "
                    "its largest storages 4.0 GiB x6, 256.0 MiB x1)"), said
    for bad in (None, [], {"allocated": -1, "reserved": 0, "storages": []}, {"allocated": "1", "reserved": 0},
                {"allocated": 1, "reserved": 1, "storages": "x"}, {"allocated": True, "reserved": 1, "storages": []}):
        assert memory_beside.census_said(bad) == "", bad
    assert "storages" not in memory_beside.census_said(
        {"allocated": 1, "reserved": 1, "storages": [["4", 1], [1, 2, 3]]})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_set_that_came_in_a_lent_buffer_is_placed_as_it_is_not_copied_again(worker):
    worker.device = torch.device("cuda", torch.cuda.current_device())
    t = torch.arange(1 << 20, dtype=torch.float32, device=worker.device)
    layout, blobs = _set_of(t)
    worker._place_set(2, layout, blobs)
    assert worker.sets[2][0].data_ptr() == t.data_ptr()
    host = torch.arange(8.0)
    layout, blobs = _set_of(host)
    worker._place_set(4, layout, blobs)
    assert worker.sets[4][0].is_cuda and torch.equal(worker.sets[4][0].cpu(), host)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_census_counts_each_live_storage_once_by_size():
    dev = torch.device("cuda", torch.cuda.current_device())
    big = torch.empty(96 * MIB, dtype=torch.uint8, device=dev)
    views = [big[:10], big.view(torch.float32)]   # one storage, however many tensors see it
    census = observe.device_census(dev, torch.cuda.memory_stats)
    assert census["allocated"] >= 96 * MIB and census["reserved"] >= census["allocated"]
    assert [96 * MIB, 1] in census["storages"], census
    del big, views


def _loss_mean(n: int) -> torch.Tensor:
    """mse_loss's mean: a 0-dim tensor whose storage is its whole elementwise buffer (n floats)."""
    out = torch.nn.functional.mse_loss(torch.rand(n), torch.rand(n))
    assert out.dim() == 0 and out.untyped_storage().nbytes() == 4 * n, "the op no longer returns such a view"
    return out


def test_recent_outputs_are_held_by_the_storage_they_keep_alive(worker, monkeypatch):
    """An output that is a view of a large buffer keeps the whole buffer alive: the outputs the
    worker holds (for storage reuse) are counted by their storages, within HELD_BYTES. Counted by
    their elements, eight 0-dim losses of an H100's Huber problem kept 32 GiB alive."""
    monkeypatch.setattr(worker, "HELD_BYTES", 3 * MIB)
    for _ in range(6):
        worker.calls += 1
        worker._keep(_loss_mean(MIB // 4))   # 1 MiB each
    kept = sum(t.untyped_storage().nbytes() for _, t in worker.held)
    assert 0 < kept <= 3 * MIB, kept


def test_timed_outputs_waiting_for_their_check_are_counted_by_their_storages(worker, monkeypatch):
    """A timing run checks its queued outputs once they keep OUTPUTS_HELD_BYTES alive: a 0-dim
    loss that is a view of an input-sized buffer counts as that buffer."""
    from kernelvet.worker import _Reps
    monkeypatch.setattr(_Reps, "OUTPUTS_HELD_BYTES", 3 * MIB)
    n = MIB // 4
    worker.fn = lambda p, t: torch.nn.functional.mse_loss(p, t)
    worker.sets[1] = [torch.rand(n), torch.rand(n)]
    worker.paint = False
    rec = _Reps(worker, sync_every=32)
    queued = []
    for _ in range(8):
        rec.rep(1, seen=True)
        queued.append(len(rec._pending))
    assert max(queued) <= 3, queued
    rec.collect()
    assert len(rec.times) == 8 and rec.verdicts()


def test_a_rep_reads_its_inputs_without_copying_them_where_copies_are_kept_off_the_device():
    """Before each timed rep the worker reads every input (seen and unseen sets alike). Where the
    plan keeps the worker's copies on the host, it sums their bits in their own width: a copy per
    rep was a set's worth of the device the plan does not count, and a 16 GiB pooling input's
    reference ran out of memory in its timing run."""
    import types
    from kernelvet.worker import _Reps
    copied, summed = [], []

    def sum_(x, dtype):
        assert dtype == x.dtype, "summed in a wider type: a copy of the input at that width"
        summed.append(x.nbytes)
    bound = types.SimpleNamespace(clone=lambda x: copied.append(x.nbytes), view=torch.Tensor.view, sum=sum_)
    rec = _Reps.__new__(_Reps)
    rec.cuda, rec.wake_pool, rec.lead_s, rec.saved_on_host = False, False, 0.0, True
    rec.w = types.SimpleNamespace(bound=bound, sets={1: [torch.rand(1000), torch.rand(4, 3).t(), 3.0]},
                                  _paint_for_call=lambda s: None)
    assert rec._before_call(1)[2] == 3.0
    assert copied == [] and summed == [4000, 48]
    rec.w.sets[2] = [torch.rand(3, dtype=torch.complex128)]   # no integer as wide: copied
    rec._before_call(2)
    assert copied == [48]
    rec.saved_on_host = False   # copies on the device, in the plan: as before
    rec._before_call(1)
    assert copied == [48, 4000, 48]
