"""Messages between judge and worker: a JSON header plus raw tensor bytes. Never pickle.

Frame: 4-byte big-endian header length, the UTF-8 JSON header, then the blobs it announces.
The header is an object {"type": str, "body": {...}, "tensors": [{"dtype", "shape", "nbytes"}]}.
Everything a worker sends is hostile until `decode_*` has validated it: sizes are bounded
before anything is read, dtypes come from a closed list, shapes must match byte counts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import select
import socket
import struct
import time
from typing import Any, Sequence

MAX_HEADER_BYTES = 4 << 20

# Closed list: the judge only ever builds tensors of these dtypes from worker bytes.
DTYPE_SIZES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message of the protocol."""


class PeerClosed(ProtocolError):
    """The peer closed the channel (or died) before a whole message arrived."""


class Timeout(Exception):
    """No whole message arrived before the deadline."""


@dataclasses.dataclass(frozen=True)
class Blob:
    """A tensor as data: dtype name, shape, raw little-endian bytes (C order)."""

    dtype: str
    shape: tuple[int, ...]
    data: bytes | memoryview

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclasses.dataclass(frozen=True)
class Message:
    type: str
    body: dict
    tensors: tuple[Blob, ...] = ()


def send(sock: socket.socket, type_: str, body: dict | None = None, tensors: Sequence[Blob] = ()) -> None:
    header = {
        "type": type_,
        "body": body or {},
        "tensors": [{"dtype": b.dtype, "shape": list(b.shape), "nbytes": len(b.data)} for b in tensors],
    }
    raw = json.dumps(header, allow_nan=True).encode()
    if len(raw) > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {len(raw)} bytes exceeds {MAX_HEADER_BYTES}")
    sock.sendall(struct.pack(">I", len(raw)) + raw)
    for b in tensors:
        sock.sendall(b.data)


def recv(sock: socket.socket, *, deadline: float | None, max_blob_bytes: int,
         allowed: dict[str, frozenset[str]] | None = None) -> Message:
    """Read one message. `allowed` maps message types to the body keys they may carry."""
    n = struct.unpack(">I", _read_exact(sock, 4, deadline))[0]
    if n > MAX_HEADER_BYTES:
        raise ProtocolError(f"announced header of {n} bytes exceeds {MAX_HEADER_BYTES}")
    try:
        header = json.loads(_read_exact(sock, n, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or set(header) != {"type", "body", "tensors"}:
        raise ProtocolError("header must be an object with exactly type, body, tensors")
    type_, body, specs = header["type"], header["body"], header["tensors"]
    if not isinstance(type_, str) or not isinstance(body, dict) or not isinstance(specs, list):
        raise ProtocolError("header fields have the wrong types")
    if allowed is not None:
        if type_ not in allowed:
            raise ProtocolError(f"unexpected message type {type_!r}")
        extra = set(body) - allowed[type_]
        if extra:
            raise ProtocolError(f"message {type_!r} carries unknown fields {sorted(extra)}")
    blobs_meta = [_validate_spec(s) for s in specs]
    total = sum(m[2] for m in blobs_meta)
    if total > max_blob_bytes:
        raise ProtocolError(f"message announces {total} tensor bytes, more than the {max_blob_bytes} allowed")
    blobs = tuple(Blob(d, shape, _read_exact(sock, nbytes, deadline)) for d, shape, nbytes in blobs_meta)
    return Message(type_, body, blobs)


def _validate_spec(spec: Any) -> tuple[str, tuple[int, ...], int]:
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "nbytes"}:
        raise ProtocolError("tensor spec must have exactly dtype, shape, nbytes")
    dtype, shape, nbytes = spec["dtype"], spec["shape"], spec["nbytes"]
    if dtype not in DTYPE_SIZES:
        raise ProtocolError(f"tensor dtype {dtype!r} is not one the judge accepts")
    if (not isinstance(shape, list) or len(shape) > 16
            or not all(type(d) is int and 0 <= d < 2**40 for d in shape)):
        raise ProtocolError(f"bad tensor shape {shape!r}")
    if type(nbytes) is not int or nbytes != math.prod(shape) * DTYPE_SIZES[dtype]:
        raise ProtocolError(f"tensor of shape {shape} and dtype {dtype} cannot be {nbytes!r} bytes")
    return dtype, tuple(shape), nbytes


def _read_exact(sock: socket.socket, n: int, deadline: float | None) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout()
            ready, _, _ = select.select([sock], [], [], left)
            if not ready:
                raise Timeout()
        try:
            k = sock.recv_into(view[got:], min(n - got, 1 << 24))
        except (ConnectionResetError, BrokenPipeError):
            k = 0
        if k == 0:
            raise PeerClosed(f"channel closed after {got} of {n} bytes")
        got += k
    return bytes(buf)
