"""Messages between judge and worker: a JSON header plus raw tensor bytes. Never pickle.

Frame: 4-byte big-endian header length, the UTF-8 JSON header, then the blobs it announces.
The header is an object {"type": str, "body": {...}, "tensors": [{"dtype", "shape", "nbytes"}]}.
Everything a worker sends is hostile until `recv` has validated it: sizes are bounded
before anything is read, dtypes come from a closed list, shapes must match byte counts.

A blob whose spec carries "lent" has its bytes in a CUDA device buffer the judge lent for the
request (lending.py); its body names the buffers. A blob of FD_MIN_BYTES or more travels as a sealed memfd (its spec carries "fd": the index of
the descriptor passed with the header), not through the socket: at 8192 x 8192 float32 the
socket's copies cost ~0.6 s a tensor, and a vet moves dozens. The receiver accepts only a
memfd sealed against writes and resizing, of exactly the announced size: its bytes cannot change
after the sender let go of them. It maps it copy-on-write, so a writable tensor costs no copy.
"""

from __future__ import annotations

import array
import dataclasses
import json
import math
import mmap
import os
import select
import socket
import stat
import struct
import time
from typing import Any, Sequence

MAX_HEADER_BYTES = 4 << 20
FD_MIN_BYTES = 1 << 20   # blobs this large travel as sealed memfds (where the OS has them)
MAX_FDS = 64             # descriptors one message may carry; the kernel closes any beyond
MAX_LENT = 64            # lent device buffers one request may name

try:
    import fcntl
    _SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    MEMFD = hasattr(os, "memfd_create")
except (ImportError, AttributeError):   # not Linux: every blob travels through the socket
    MEMFD = False

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
    data: object   # bytes, bytearray, memoryview or a private mapping (received); a device tensor once decoded
    lent: int | None = None   # the bytes are in this lent device buffer of the request (lending.py)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of its values, by dtype and shape (a lent blob carries none of them itself)."""
        return self.numel * DTYPE_SIZES[self.dtype]


@dataclasses.dataclass(frozen=True)
class Message:
    type: str
    body: dict
    tensors: tuple[Blob, ...] = ()


def send(sock: socket.socket, type_: str, body: dict | None = None, tensors: Sequence[Blob] = ()) -> None:
    """One message. A blob's data is bytes, or a contiguous tensor (codec.to_sent_blob), whose bytes
    are read a slice at a time as they are written."""
    specs, fds, after = [], [], []   # after: the bytes that follow the header, in order
    try:
        for b in tensors:
            if b.lent is not None:
                specs.append({"dtype": b.dtype, "shape": list(b.shape), "nbytes": b.nbytes,
                              "lent": b.lent})
                continue
            tensor = _is_tensor(b.data)
            spec = {"dtype": b.dtype, "shape": list(b.shape), "nbytes": b.nbytes if tensor else len(b.data)}
            if MEMFD and spec["nbytes"] >= FD_MIN_BYTES and len(fds) < MAX_FDS:
                spec["fd"] = len(fds)
                fds.append(_sealed_memfd(b.data))
            else:
                after.append(b.data)
            specs.append(spec)
        raw = json.dumps({"type": type_, "body": body or {}, "tensors": specs}, allow_nan=True).encode()
        if len(raw) > MAX_HEADER_BYTES:
            raise ProtocolError(f"header of {len(raw)} bytes exceeds {MAX_HEADER_BYTES}")
        head = struct.pack(">I", len(raw)) + raw
        if fds:   # the descriptors ride with the header's first bytes
            sent = sock.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            sock.sendall(head[sent:])
        else:
            sock.sendall(head)
    finally:
        for fd in fds:   # the message in flight holds its own references
            os.close(fd)
    for data in after:
        for view in _byte_views(data):
            sock.sendall(view)


def _is_tensor(data) -> bool:
    return hasattr(data, "untyped_storage")


def _byte_views(data):
    """`data`'s bytes as memoryviews, in order: a tensor's a slice at a time (crossing.host_slices)."""
    if _is_tensor(data):
        from . import crossing
        yield from crossing.host_slices(data)
    else:
        yield memoryview(data).cast("B")


def _sealed_memfd(data) -> int:
    """A memfd holding `data`, sealed: nobody, the sender included, can change or resize it."""
    fd = os.memfd_create("kernelvet-blob", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        for view in _byte_views(data):
            done = 0
            while done < len(view):
                done += os.write(fd, view[done:done + (1 << 30)])
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _mapped(fd: int, nbytes: int) -> mmap.mmap:
    """A peer's memfd, mapped copy-on-write, once it is shown sealed and of the announced size."""
    if not MEMFD:
        raise ProtocolError("a blob came as a descriptor, which this platform does not take")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise ProtocolError("a blob's descriptor is not a memfd") from None
    if seals & _SEALS != _SEALS:
        raise ProtocolError("a blob's memfd is not sealed against writes and resizing")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size != nbytes or nbytes == 0:
        raise ProtocolError(f"a blob's memfd holds {st.st_size} bytes, not the {nbytes} announced")
    return mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def recv(sock: socket.socket, *, deadline: float | None, max_blob_bytes: int,
         allowed: dict[str, frozenset[str]] | None = None) -> Message:
    """Read one message. `allowed` maps message types to the body keys they may carry (wire.py's
    `Body`s: then each field's kind and bounds are checked too)."""
    fds: list[int] = []   # descriptors that came with the header; every one closed before returning
    try:
        n = struct.unpack(">I", _read_exact(sock, 4, deadline, fds))[0]
        if n > MAX_HEADER_BYTES:
            raise ProtocolError(f"announced header of {n} bytes exceeds {MAX_HEADER_BYTES}")
        try:
            header = json.loads(_read_exact(sock, n, deadline, fds))
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
            why = allowed[type_].problem(body) if hasattr(allowed[type_], "problem") else None
            if why:
                raise ProtocolError(f"message {type_!r}: {why}")
        blobs_meta = [_validate_spec(s) for s in specs]
        total = sum(m[2] for m in blobs_meta)
        if total > max_blob_bytes:
            raise ProtocolError(f"message announces {total} tensor bytes, more than the {max_blob_bytes} allowed")
        used = [m[3] for m in blobs_meta if m[3] is not None]
        if len(set(used)) != len(used) or any(i >= len(fds) for i in used):
            raise ProtocolError(f"blobs name descriptors {used}, but {len(fds)} came, each usable once")
        blobs = tuple(Blob(d, shape, b"", lent=lent) if lent is not None else
                      Blob(d, shape, _read_exact(sock, nbytes, deadline) if fd is None else _mapped(fds[fd], nbytes))
                      for d, shape, nbytes, fd, lent in blobs_meta)
        return Message(type_, body, blobs)
    finally:
        for fd in fds:
            os.close(fd)


def _validate_spec(spec: Any) -> tuple[str, tuple[int, ...], int, int | None, int | None]:
    if (not isinstance(spec, dict) or not {"dtype", "shape", "nbytes"} <= set(spec) <= {"dtype", "shape", "nbytes", "fd", "lent"}
            or {"fd", "lent"} <= set(spec)):
        raise ProtocolError("tensor spec must have exactly dtype, shape, nbytes (and fd, for a memfd, or lent)")
    dtype, shape, nbytes, fd, lent = spec["dtype"], spec["shape"], spec["nbytes"], spec.get("fd"), spec.get("lent")
    if dtype not in DTYPE_SIZES:
        raise ProtocolError(f"tensor dtype {dtype!r} is not one the judge accepts")
    if (not isinstance(shape, list) or len(shape) > 16
            or not all(type(d) is int and 0 <= d < 2**40 for d in shape)):
        raise ProtocolError(f"bad tensor shape {shape!r}")
    if type(nbytes) is not int or nbytes != math.prod(shape) * DTYPE_SIZES[dtype]:
        raise ProtocolError(f"tensor of shape {shape} and dtype {dtype} cannot be {nbytes!r} bytes")
    if fd is not None and (type(fd) is not int or not 0 <= fd < MAX_FDS):
        raise ProtocolError(f"bad descriptor index {fd!r}")
    if lent is not None and (type(lent) is not int or not 0 <= lent < MAX_LENT):
        raise ProtocolError(f"bad lent buffer index {lent!r}")
    return dtype, tuple(shape), nbytes, fd, lent


_ANC_BYTES = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)


def _read_exact(sock: socket.socket, n: int, deadline: float | None, fds: list | None = None) -> bytearray:
    """`n` bytes; with `fds`, descriptors passed with them are appended there (others the kernel drops)."""
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
            if fds is None:
                k = sock.recv_into(view[got:], min(n - got, 1 << 24))
            else:
                k, anc, _flags, _ = sock.recvmsg_into([view[got:]], _ANC_BYTES, getattr(socket, "MSG_CMSG_CLOEXEC", 0))
                for level, kind, data in anc:
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                        fds.extend(array.array("i", data[:len(data) - len(data) % 4]))
        except (ConnectionResetError, BrokenPipeError):
            k = 0
        if k == 0:
            raise PeerClosed(f"channel closed after {got} of {n} bytes")
        got += k
    return buf
