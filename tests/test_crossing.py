"""Big tensors between the host and an accelerator a slice at a time through a pinned stage:
the same values as one pageable copy, in the dtype asked for."""

from __future__ import annotations

import pytest
import torch

from kernelvet import codec, crossing

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_on_the_host_a_tensor_stays_itself_or_is_converted():
    t = torch.randn(5, 3, dtype=torch.float64)
    assert crossing.moved_home(t) is t
    assert crossing.moved(t, torch.device("cpu")) is t
    got = crossing.moved(t, torch.device("cpu"), torch.float32)
    assert got.dtype == torch.float32 and torch.equal(got, t.float())


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("dtype", [None, torch.float32])
def test_a_device_tensor_comes_home_a_slice_at_a_time(monkeypatch, dtype):
    monkeypatch.setattr(crossing, "CHUNK", 4099)
    t = torch.randn(300, 70, dtype=torch.float64, device="cuda")   # 5 slices and a part
    got = crossing.moved(t, torch.device("cpu"), dtype)
    assert got.device.type == "cpu" and got.shape == t.shape and got.dtype == (dtype or t.dtype)
    assert not got.is_pinned()
    assert torch.equal(got, t.to("cpu", dtype or t.dtype))
    strided = t.t()   # not contiguous: one pageable copy, the same values
    assert torch.equal(crossing.moved_home(strided), strided.cpu())


@pytest.mark.gpu
@CUDA
def test_a_worker_blob_of_a_device_output_holds_its_bytes(monkeypatch):
    """codec.to_blob of a big device output (the worker's reply with no lent room): through the stage."""
    monkeypatch.setattr(crossing, "CHUNK", 4099)
    t = torch.randn(100_003, device="cuda")
    assert torch.equal(codec.from_blob(codec.to_blob(t)), t.cpu())


@pytest.mark.gpu
@CUDA
def test_a_whole_host_tensor_crosses_to_the_device_a_slice_at_a_time(monkeypatch):
    monkeypatch.setattr(crossing, "CHUNK", 4099)
    t = torch.randn(300, 70).t()   # not contiguous
    moved = crossing.moved_whole(t, torch.device("cuda"))
    assert moved.device.type == "cuda" and moved.shape == t.shape and torch.equal(moved.cpu(), t)
