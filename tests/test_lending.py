"""Lent device buffers on the wire and in the loans, with host tensors standing in for device memory."""

import time

import pytest
import torch

from kernelvet import codec, lending, protocol
from kernelvet.protocol import Blob, Message, ProtocolError


def test_a_lent_blob_travels_as_a_spec_without_bytes(pair):
    a, b = pair
    protocol.send(a, "output", {}, [Blob("float32", (1024, 1024), b"", lent=2), codec.to_blob(torch.ones(3))])
    msg = protocol.recv(b, deadline=None, max_blob_bytes=1 << 30)
    assert msg.tensors[0].lent == 2 and msg.tensors[0].data == b"" and msg.tensors[0].shape == (1024, 1024)
    assert msg.tensors[1].lent is None and codec.from_blob(msg.tensors[1]).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("spec", [{"lent": -1}, {"lent": 64}, {"lent": "0"}, {"lent": 0, "fd": 0}])
def test_a_bad_lent_index_is_a_protocol_violation(spec):
    with pytest.raises(ProtocolError):
        protocol._validate_spec({"dtype": "float32", "shape": [4], "nbytes": 16, **spec})


class _Buffer:
    """A lent buffer's stand-in: its size and what it holds."""

    def __init__(self, raw):
        self.raw, self.size, self.nbytes, self.closed = raw, raw.numel(), raw.numel(), False

    def tensor(self, dtype, shape):
        return lending.devshare.typed(self.raw, dtype, shape).clone()

    def host_tensor(self, dtype, shape):
        self.to_host = True
        return lending.devshare.typed(self.raw, dtype, shape).clone()

    def close(self):
        self.closed = True


class _FullDevice(_Buffer):
    """A room whose copy in the judge's device memory finds the device full."""

    def tensor(self, dtype, shape):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")


def _loan(n_inputs=1, rooms=2, room_bytes=64):
    loan = lending.JudgeLoan(torch.device("cpu"))
    loan.buffers = [_Buffer(torch.zeros(room_bytes, dtype=torch.uint8)) for _ in range(n_inputs + rooms)]
    loan.first_room = n_inputs
    return loan


def _reply(*blobs):
    return Message("output", {}, tuple(blobs))


def test_a_reply_is_read_from_the_rooms_it_names():
    loan = _loan()
    loan.buffers[2].raw[:16].copy_(torch.arange(4, dtype=torch.float32).view(torch.uint8))
    msg = loan.received(_reply(Blob("float32", (4,), b"", lent=2)))
    assert codec.from_blob(msg.tensors[0]).tolist() == [0.0, 1.0, 2.0, 3.0]
    loan.close()
    assert all(b.closed for b in [*loan.buffers]) and loan.buffers == []


def test_a_room_the_device_has_no_room_to_copy_is_copied_to_the_host():
    """An honest worker's allocator cache can fill the device while the judge copies an output out
    of its room (an H100, level 1's conv 2-D: 70 GiB of the worker's beside an 8 GiB output): the
    reply is read, through the host, not ended as the judge's own out-of-memory."""
    loan = _loan()
    loan.buffers[2] = _FullDevice(torch.zeros(64, dtype=torch.uint8))
    loan.buffers[2].raw[:16].copy_(torch.arange(4, dtype=torch.float32).view(torch.uint8))
    got = codec.from_blob(loan.received(_reply(Blob("float32", (4,), b"", lent=2))).tensors[0])
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0] and loan.buffers[2].to_host
    loan.buffers[2].raw.zero_()   # a copy: what the worker writes into the room later is not in it
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("blobs", [
    [Blob("float32", (4,), b"", lent=0)],                                       # an input buffer, not a room
    [Blob("float32", (4,), b"", lent=1), Blob("float32", (4,), b"", lent=1)],   # one room named twice
    [Blob("float32", (17,), b"", lent=1)],                                      # more than the room holds
    [Blob("float32", (4,), b"", lent=3)],                                       # no such buffer
])
def test_a_reply_that_misnames_a_room_is_a_protocol_violation(blobs):
    with pytest.raises(ProtocolError):
        _loan().received(_reply(*blobs))


def _worker_loan(room_sizes):
    loan = lending.WorkerLoan.__new__(lending.WorkerLoan)
    loan.device = torch.device("cpu")
    loan.maps = [_Buffer(torch.zeros(n, dtype=torch.uint8)) for n in room_sizes]
    loan.free_rooms = list(range(len(room_sizes)))
    return loan


def test_a_worker_puts_outputs_in_rooms_while_they_last_and_the_rest_through_the_host():
    loan = _worker_loan([16, 64])
    big, small, other = torch.arange(16.0), torch.arange(4.0), torch.arange(8.0)
    out = loan.encode([Blob("float32", (16,), big), Blob("float32", (4,), small), Blob("float32", (8,), other)])
    assert [b.lent for b in out] == [1, 0, None]   # the room that fits, then the next; none left for the third
    assert torch.equal(loan.maps[1].raw[:64].view(torch.float32), big)
    assert codec.from_blob(out[2]).tolist() == other.tolist()


def test_a_worker_reads_only_the_lent_buffers_that_hold_its_inputs():
    loan = _worker_loan([16, 16])
    loan.free_rooms = [1]
    loan.maps[0].raw.copy_(torch.arange(4, dtype=torch.float32).view(torch.uint8))
    msg = loan.decode(_reply(Blob("float32", (4,), b"", lent=0)))
    got = codec.from_blob(msg.tensors[0])
    assert got.tolist() == [0.0, 1.0, 2.0, 3.0] and got.data_ptr() != loan.maps[0].raw.data_ptr()   # a copy
    for bad in (Blob("float32", (4,), b"", lent=1), Blob("float32", (8,), b"", lent=0)):
        with pytest.raises(lending.devshare.DeviceShareError):
            loan.decode(_reply(bad))


def test_rooms_follow_the_outputs_a_reply_carries():
    assert lending.rooms_for("call", {"set": 1}) == 1
    assert lending.rooms_for("time", {"sets": [1, 2, 1], "unseen": [100]}) == 3
    assert lending.rooms_for("time", {"sets": [1], "unseen": [100], "layout": []}) == 1   # a pair request
    assert lending.rooms_for("loop", {"set": 300, "fetch": False}) == 0
    assert lending.rooms_for("inputs", {"set": 1}) == 0


def test_a_judge_without_cuda_lends_nothing(monkeypatch):
    from kernelvet import spawn
    w = spawn.WorkerHandle.__new__(spawn.WorkerHandle)
    w._lend_ok, w.room_bytes, w.device = None, 1 << 30, "cuda:0"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert w._loan("call", {"set": 1}, [Blob("uint8", (4 << 20,), bytes(4 << 20))]) is None
    w._lend_ok = False
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert w._loan("call", {"set": 1}, []) is None


def _handle(sock):
    """A worker handle on one end of a socket pair, with no process behind it."""
    from kernelvet import spawn
    w = spawn.WorkerHandle.__new__(spawn.WorkerHandle)
    w.sock, w.pid, w.ended, w._pending, w._greeted = sock, 1 << 30, None, [], True   # a pid no process has
    w.deadline, w.max_blob_bytes, w._round_trips, w._lend_ok, w.room_bytes = time.monotonic() + 30, 1 << 30, {}, False, 0
    w.launcher = None
    return w


def test_a_reply_naming_a_lent_buffer_when_none_was_lent_ends_the_worker(pair):
    from kernelvet import spawn
    a, b = pair
    w = _handle(a)
    # the worker's answer, written before the request: it names a room nobody lent
    protocol.send(b, "output", {"wall_s": 0.1}, [Blob("float32", (1 << 20,), b"", lent=0)])
    with pytest.raises(spawn.WorkerEnded, match="names a lent buffer, but none was lent"):
        w.request("call", {"set": 1})
    assert w.ended is not None
