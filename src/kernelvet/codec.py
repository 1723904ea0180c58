"""torch.Tensor <-> protocol.Blob. Bytes only: no pickle, no storage sharing (device buffers are
lent by the judge, never shared from a tensor's storage: devshare.py)."""

from __future__ import annotations

import mmap

import torch

from . import crossing
from .devshare import LEND_MIN_BYTES
from .protocol import FD_MIN_BYTES, Blob, DTYPE_SIZES, ProtocolError

_BY_NAME = {name: getattr(torch, name) for name in DTYPE_SIZES}
_NAME_OF = {dt: name for name, dt in _BY_NAME.items()}


def dtype_name(dtype: torch.dtype) -> str:
    try:
        return _NAME_OF[dtype]
    except KeyError:
        raise ProtocolError(f"dtype {dtype} cannot travel between judge and worker") from None


def dtype_from_name(name: str) -> torch.dtype:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ProtocolError(f"unknown dtype {name!r}") from None


def to_blob(t: torch.Tensor, device_ok: bool = False) -> Blob:
    """A tensor's values as C-order bytes (any device, any strides). A contiguous CPU tensor's blob
    is a read-only view of its memory (`protocol.send` copies it): send it before changing `t`.
    `device_ok`: a big CUDA tensor's blob holds the tensor itself, for the worker's reply to put in
    a lent room or else through the host (lending.WorkerLoan.encode, lending.through_host)."""
    t = t.detach()
    if device_ok and t.device.type == "cuda" and t.numel() * t.element_size() >= LEND_MIN_BYTES:
        return Blob(dtype_name(t.dtype), tuple(t.shape), t)
    if t.device.type == "cpu" and t.is_contiguous():
        flat = t.reshape(-1)
    elif t.device.type != "cpu" and t.is_contiguous():   # a big one through a pinned stage
        flat = crossing.moved_home(t).reshape(-1)
    else:
        flat = torch.empty(t.numel(), dtype=t.dtype)
        if flat.numel():
            flat.copy_(t.reshape(-1))
    data = memoryview(flat.view(torch.uint8).numpy()).toreadonly() if flat.numel() else b""
    return Blob(dtype_name(t.dtype), tuple(t.shape), data)


def to_sent_blob(t: torch.Tensor) -> Blob:
    """A blob for a message with nothing lent for it. A big contiguous accelerator tensor stays
    itself: protocol.send writes it into its memfd a slice at a time (crossing.host_slices), no host
    copy of it whole beside the message (a 4 GiB output each, in a worker's timing reply of three).
    Anything else as `to_blob`."""
    t = t.detach()
    if t.device.type != "cpu" and t.is_contiguous() and t.numel() * t.element_size() >= FD_MIN_BYTES:
        return Blob(dtype_name(t.dtype), tuple(t.shape), t)
    return to_blob(t)


def from_blob(b: Blob) -> torch.Tensor:
    """A writable tensor holding the blob's values. A received blob's buffer (a bytearray, or a
    copy-on-write mapping of a sealed memfd) is the tensor's memory, not copied: decode it once. A
    blob that came in a lent device buffer holds its copy already (lending.py)."""
    if isinstance(b.data, torch.Tensor):
        return b.data
    dtype = dtype_from_name(b.dtype)
    if not len(b.data):
        return torch.empty(b.shape, dtype=dtype)
    data = b.data if isinstance(b.data, (bytearray, mmap.mmap)) else bytearray(b.data)
    raw = torch.frombuffer(data, dtype=torch.uint8)
    return raw.view(dtype).reshape(b.shape)
