"""The worker's copies of input values in host memory (worker/host_copies.py): compared and put
back a slice at a time, bit for bit."""

import pytest
import torch

from kernelvet import sizes
from kernelvet.worker import host_copies
from kernelvet.worker.bindings import _Bound

BOUND = _Bound()


@pytest.fixture
def small_slices(monkeypatch):
    """Slices of 64 bytes: every tensor below crosses in several."""
    monkeypatch.setattr(host_copies, "STAGING_BYTES", 64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_a_copy_compared_slice_by_slice_tells_any_one_changed_element(small_slices, dtype):
    x = (torch.randn(7, 13) * 100).to(dtype)
    copy = host_copies.copy_of(BOUND, x, on_host=True)
    assert copy is not x and host_copies._same_sliced(BOUND, copy, x)
    for i in (0, 40, 90):   # the first slice, a middle one, the last (a short one)
        y = x.clone()
        y.view(-1)[i] = ~y.view(-1)[i] if dtype == torch.bool else y.view(-1)[i] + 1
        assert not host_copies._same_sliced(BOUND, copy, y)
    assert not host_copies._same_sliced(BOUND, copy, x.reshape(13, 7))   # same elements, another shape


def test_a_nan_with_another_payload_is_a_change(small_slices):
    x = torch.full((40,), float("nan"))
    y = x.clone()
    y.view(torch.int32)[33] ^= 1   # still a NaN, other bits
    assert torch.isnan(y).all() and not host_copies._same_sliced(BOUND, x, y)


def test_where_an_output_still_holds_its_inputs_bits_is_found_slice_by_slice(small_slices):
    before = torch.randn(9, 11)
    after = before.clone()
    after[3:5] = 0
    after[8, 10] = float("nan")
    mask = host_copies._unchanged_sliced(BOUND, before, after)
    assert mask.shape == after.shape and mask.dtype == torch.bool
    assert torch.equal(mask, host_copies.unchanged(BOUND, before, after))   # the same as on one device
    expect = torch.ones(9, 11, dtype=torch.bool)
    expect[3:5] = False
    expect[8, 10] = False
    assert torch.equal(mask, expect)


def test_a_copy_stays_beside_a_cpu_tensor_and_where_it_was_not_asked_to_move():
    x = torch.randn(4, 4).t()   # not contiguous: the copy keeps the values, not the strides' meaning
    for on_host in (False, True):
        copy = host_copies.copy_of(BOUND, x, on_host)
        assert copy.device == x.device and torch.equal(copy, x)
        copy += 1
        assert not torch.equal(copy, x)   # a copy, not a view


def test_the_slices_cover_every_element_once():
    n, item = 1000, 8
    got = list(host_copies._slices(n, item))
    step = sizes.STAGING_BYTES // item
    assert got[0] == (0, min(step, n)) and sum(k for _, k in got) == n
    small = list(host_copies._slices(10, 1 << 30))   # elements wider than a slice: one each
    assert small == [(i, 1) for i in range(10)]


# -- on a CUDA device (GPU tests) ----------------------------------------------------------------

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@CUDA
def test_a_device_tensors_host_copy_is_compared_and_put_back_on_the_device(small_slices):
    x = torch.randn(33, 17, device="cuda")
    copy = host_copies.copy_of(BOUND, x, on_host=True)
    assert copy.device.type == "cpu" and torch.equal(copy, x.cpu())
    assert host_copies.same_bits(BOUND, copy, x)
    y = x.clone()
    y[32, 16] += 1
    assert not host_copies.same_bits(BOUND, copy, y)
    mask = host_copies.unchanged(BOUND, copy, y)
    assert mask.device == y.device and int((~mask).sum()) == 1 and not bool(mask[32, 16])
    host_copies.put_back(BOUND, y, copy)   # across the bus, a slice at a time through the stage
    assert torch.equal(y, x)
    strided = torch.zeros(17, 33, device="cuda").t()
    host_copies.put_back(BOUND, strided, copy)   # a strided destination: one copy
    assert torch.equal(strided, x)


@pytest.mark.gpu
@CUDA
def test_a_host_copy_crosses_through_a_pinned_stage(small_slices):
    x = torch.randn(1000, device="cuda")
    assert host_copies._Stage(BOUND, x, x.device).buf.is_pinned()
    copy = host_copies.copy_of(BOUND, x, on_host=True)
    assert not copy.is_pinned() and torch.equal(copy, x.cpu())   # the copy itself stays pageable
    odd = torch.randn(7, 9, device="cuda").t()   # not contiguous: copied whole
    assert torch.equal(host_copies.copy_of(BOUND, odd, on_host=True), odd.cpu())


def test_slices_through_a_stage_copy_every_element_once(small_slices):
    """The crossing's loop, with a host buffer standing in for the pinned stage (a CPU has none):
    each slice passes through the stage, which holds the last one at the end."""
    src = torch.randn(50)
    stage = host_copies._Stage(BOUND, src, torch.device("cpu"))
    assert stage.buf is None   # nothing crosses on the CPU
    stage.buf = torch.empty(64 // 4)
    dst = torch.full((50,), float("nan"))
    host_copies._sliced_copy(BOUND, dst, src, stage.through, 4)
    assert torch.equal(dst, src) and torch.equal(stage.buf[:2], src[48:])   # the short last slice


def test_a_host_copy_is_put_back_into_a_cpu_tensor_in_one_copy():
    x = torch.randn(6, 5)
    copy = host_copies.copy_of(BOUND, x, on_host=True)
    y = torch.zeros(6, 5)
    host_copies.put_back(BOUND, y, copy)
    assert torch.equal(y, x)
