"""Which tensors of a request travel in device buffers the judge lends (devshare.py), on each side.

Judge side (`JudgeLoan`, one per request): a tensor blob of LEND_MIN_BYTES or more goes in a
buffer of its own, and the request gets empty rooms for the outputs its reply carries, each the
size of the problem's output; a reply blob that names a room is copied out of it and checked
against it (the room's size bounds what the worker may say is there). Everything is freed when
the reply is in. What the worker says is in a room is as much a claim as bytes through the host.
Worker side (`WorkerLoan`): the buffers mapped, the request's lent tensors copied out, outputs
copied into rooms (or, with no room left, through the host), every mapping closed after the reply.
"""

from __future__ import annotations

import dataclasses

import torch

from . import codec, devshare
from .protocol import Blob, Message, ProtocolError

FREE_SHARE = 0.25   # of the device's free memory, what one request's buffers may take

# Outputs a reply to each request may carry (a timing run's: one per set it times; a pair
# request's: one, its carried set's)
ROOMS = {"call": 1, "probe": 1, "loop": 1, "lend": 1}


def worth_lending(blobs, rooms: int, room_bytes: int) -> bool:
    """Whether a request carrying `blobs`, whose reply carries `rooms` outputs of `room_bytes`
    at most, has anything a loan would carry."""
    return any(_big(b) for b in blobs) or bool(rooms) and room_bytes >= devshare.LEND_MIN_BYTES


def _big(b: Blob) -> bool:
    return b.lent is None and b.nbytes >= devshare.LEND_MIN_BYTES


def rooms_for(type_: str, body: dict) -> int:
    if type_ == "time" and "layout" in body:   # a pair request: its carried set's output alone
        return len(body.get("unseen") or ())
    if type_ == "time":
        return len(set(body.get("sets") or ()) | set(body.get("unseen") or ()))
    if type_ == "loop" and not body.get("fetch"):
        return 0
    return ROOMS.get(type_, 0)


@dataclasses.dataclass
class JudgeLoan:
    device: torch.device
    buffers: list = dataclasses.field(default_factory=list)
    blobs: list = dataclasses.field(default_factory=list)
    first_room: int = 0
    used: set = dataclasses.field(default_factory=set)

    @classmethod
    def make(cls, device: torch.device, blobs, rooms: int, room_bytes: int) -> "JudgeLoan | None":
        """The loan for a request carrying `blobs` whose reply carries `rooms` outputs of at most
        `room_bytes` each; None when nothing in it is worth lending."""
        if not worth_lending(blobs, rooms, room_bytes):
            return None
        big = {id(b) for b in blobs if _big(b)}
        if room_bytes < devshare.LEND_MIN_BYTES:
            rooms = 0
        budget = FREE_SHARE * torch.cuda.mem_get_info(device)[0]
        loan = cls(device)
        try:
            for b in blobs:
                if id(b) in big and budget >= b.nbytes:
                    budget -= b.nbytes
                    lent = loan._new(b.nbytes)
                    lent.fill(b.data)   # host bytes, or a set the judge keeps on the device
                    loan.blobs.append(Blob(b.dtype, b.shape, b"", lent=len(loan.buffers) - 1))
                else:
                    loan.blobs.append(through_host([b])[0])
            loan.first_room = len(loan.buffers)
            for _ in range(rooms):
                if budget < room_bytes:
                    break
                budget -= room_bytes
                loan._new(room_bytes).fill(b"")
            torch.cuda.synchronize(device)   # the worker's process reads them on streams of its own
        except BaseException:
            loan.close()
            raise
        return loan

    def _new(self, nbytes: int) -> devshare.Lent:
        lent = devshare.Lent(nbytes, self.device)
        self.buffers.append(lent)
        return lent

    def specs(self) -> list:
        return [{**b.spec(), "room": i >= self.first_room} for i, b in enumerate(self.buffers)]

    def received(self, msg: Message) -> Message:
        """The reply with each blob that names a room replaced by a copy of what that room holds."""
        if not any(b.lent is not None for b in msg.tensors):
            return msg
        out = []
        for b in msg.tensors:
            if b.lent is None:
                out.append(b)
                continue
            if not self.first_room <= b.lent < len(self.buffers) or b.lent in self.used:
                raise ProtocolError(f"a blob names lent buffer {b.lent}, which is not a room of this request "
                                    "or was named already")
            room = self.buffers[b.lent]
            if b.nbytes > room.size:
                raise ProtocolError(f"a blob of {b.nbytes} bytes says it is in a room of {room.size}")
            self.used.add(b.lent)
            out.append(Blob(b.dtype, b.shape, _copied(room, codec.dtype_from_name(b.dtype), b.shape)))
        return Message(msg.type, msg.body, tuple(out))

    def close(self) -> None:
        for b in self.buffers:
            b.close()
        self.buffers = []


def _copied(room, dtype, shape) -> torch.Tensor:
    """What a room holds, copied into the judge's own device memory while the worker can no longer
    change it, else, where the device has no room for the copy now, into the host's: an honest
    worker's allocator may hold the rest of the device in outputs it freed (70 GiB of an H100 beside
    a judge copying an 8 GiB output); Evidence.add_call moves it to where it is compared, once more
    after the worker gives its cache back where the device is still full."""
    try:
        return room.tensor(dtype, shape)
    except torch.OutOfMemoryError:
        return room.host_tensor(dtype, shape)


class WorkerLoan:
    def __init__(self, specs: list, device: torch.device):
        self.device, self.maps, self.free_rooms = device, [], []
        try:
            for i, spec in enumerate(specs):
                if not isinstance(spec, dict):
                    raise devshare.DeviceShareError("a lent buffer's spec is not an object")
                self.maps.append(devshare.Mapped(spec, device))
                if spec.get("room"):
                    self.free_rooms.append(i)
        except BaseException:
            self.close()
            raise

    def decode(self, msg: Message) -> Message:
        """The request with its lent tensors copied into this process's own device memory."""
        out = []
        for b in msg.tensors:
            if b.lent is None:
                out.append(b)
                continue
            if not 0 <= b.lent < len(self.maps) or b.lent in self.free_rooms or b.nbytes > self.maps[b.lent].nbytes:
                raise devshare.DeviceShareError(f"a blob names lent buffer {b.lent}, which does not hold it")
            t = devshare.typed(self.maps[b.lent].raw, codec.dtype_from_name(b.dtype), b.shape).clone()
            out.append(Blob(b.dtype, b.shape, t))
        return Message(msg.type, msg.body, tuple(out))

    def encode(self, blobs) -> list:
        """Outputs into the request's rooms while they last; the rest through the host."""
        out, copied = [], False
        for b in blobs:
            t = b.data if isinstance(b.data, torch.Tensor) else None
            room = self._room_for(t) if t is not None else None
            if room is not None:
                devshare.typed(self.maps[room].raw, t.dtype, t.shape).copy_(t)
                out.append(Blob(b.dtype, b.shape, b"", lent=room))
                copied = True
            else:
                out.append(codec.to_sent_blob(t) if t is not None else b)
        if copied and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return out

    def _room_for(self, t: torch.Tensor) -> int | None:
        need = t.numel() * t.element_size()
        for i in self.free_rooms:
            if need <= self.maps[i].nbytes:
                self.free_rooms.remove(i)
                return i
        return None

    def close(self) -> None:
        if self.maps and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        for m in self.maps:
            m.close()
        self.maps = []


def through_host(blobs) -> list:
    """Blobs of a message with nothing lent for them: every device tensor they hold through the host."""
    return [codec.to_sent_blob(b.data) if isinstance(b.data, torch.Tensor) else b for b in blobs]
