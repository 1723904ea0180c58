"""Big tensors between the host and an accelerator a slice at a time through a pinned stage:
the same values as one pageable copy, in the dtype asked for."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import torch

from kernelvet import codec, crossing, protocol

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
@pytest.mark.parametrize("memfd", [True, False])
def test_a_device_output_sent_with_nothing_lent_arrives_whole(monkeypatch, memfd):
    """A worker's big device output with no room lent for it (codec.to_sent_blob) is written into
    its message a pinned stage at a time: the judge reads the output's bytes."""
    monkeypatch.setattr(crossing, "CHUNK", 4099)
    monkeypatch.setattr(protocol, "MEMFD", memfd and protocol.MEMFD)
    t = torch.randn(1_000_003, device="cuda")
    blob = codec.to_sent_blob(t)
    assert blob.data is not None and isinstance(blob.data, torch.Tensor)
    a, b = socket.socketpair()
    try:
        sender = threading.Thread(target=protocol.send, args=(a, "output", {}, [blob]))
        sender.start()
        msg = protocol.recv(b, deadline=time.monotonic() + 30, max_blob_bytes=1 << 24)
        sender.join()
    finally:
        a.close()
        b.close()
    assert torch.equal(codec.from_blob(msg.tensors[0]), t.cpu())


@pytest.mark.gpu
@CUDA
def test_a_whole_host_tensor_crosses_to_the_device_a_slice_at_a_time(monkeypatch):
    monkeypatch.setattr(crossing, "CHUNK", 4099)
    t = torch.randn(300, 70).t()   # not contiguous
    moved = crossing.moved_whole(t, torch.device("cuda"))
    assert moved.device.type == "cuda" and moved.shape == t.shape and torch.equal(moved.cpu(), t)
