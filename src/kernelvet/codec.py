"""torch.Tensor <-> protocol.Blob. Bytes only: no pickle, no storage sharing."""

from __future__ import annotations

import torch

from .protocol import Blob, DTYPE_SIZES, ProtocolError

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


def to_blob(t: torch.Tensor) -> Blob:
    """Copy a tensor's values out as C-order bytes (any device, any strides)."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    return Blob(dtype_name(t.dtype), tuple(t.shape), data)


def from_blob(b: Blob) -> torch.Tensor:
    """A fresh, writable tensor holding the blob's values; owns its memory."""
    dtype = dtype_from_name(b.dtype)
    if not b.data:
        return torch.empty(b.shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(b.data), dtype=torch.uint8)
    return raw.view(dtype).reshape(b.shape)
