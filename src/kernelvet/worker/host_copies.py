"""Copies of input values the worker compares or puts back, in host memory where the judge's plan
asks (sizes.Holding.copies_on_host: a problem whose input sets leave the device no room for them).

A checked call's inputs as they were before it (did the call write them?) and a seen set's own
values while an unseen set visits its storages (put back after the unseen rep) are each a whole
input set. On the device they cost two sets' worth of memory; on the host each crosses the bus
twice, and is compared or put back a slice (sizes.STAGING_BYTES) at a time on the device. Each
crossing goes a slice at a time through one pinned stage (`_Stage`), as the judge's do
(crossing.py): on an H100 a pageable copy of a 4 GiB tensor to the host took 2.42 s, staged 0.38
s. Only the harness's bound primitives touch them (bindings.py).
"""

from __future__ import annotations

import torch

from ..metrics import INT_OF_WIDTH
from ..sizes import STAGING_BYTES
from .bindings import _Bound, _same_bits


def copy_of(bound: _Bound, t: torch.Tensor, on_host: bool) -> torch.Tensor:
    """A copy of `t`'s values: in host memory where asked and `t` is on CUDA, else beside it."""
    if not (on_host and t.device.type == "cuda"):
        return bound.clone(t)
    host = bound.empty(t.shape, dtype=t.dtype, device="cpu")
    if not t.is_contiguous():   # a strided tensor's values: one pageable copy, as before
        bound.copy_(host, t)
        return host
    src = _flat_words(bound, t)
    _sliced_copy(bound, _flat_words(bound, host), src, _Stage(bound, src, t.device).through, t.element_size())
    return host


def put_back(bound: _Bound, dst: torch.Tensor, copy: torch.Tensor) -> None:
    """`copy`'s values (same shape and dtype) into `dst`, in stream order: from a host copy to a
    contiguous device tensor a slice at a time through the stage, else in one copy."""
    if copy.device == dst.device or not dst.is_contiguous():
        bound.copy_(dst, copy)
        return
    wc = _flat_words(bound, copy)
    _sliced_copy(bound, _flat_words(bound, dst), wc, _Stage(bound, wc, dst.device).through, dst.element_size())


def _sliced_copy(bound: _Bound, dst: torch.Tensor, src: torch.Tensor, via, itemsize: int) -> None:
    """Flat `src` into flat `dst` a slice at a time, each slice as `via` (a stage's) gives it."""
    for start, n in _slices(src.numel(), itemsize):
        bound.copy_(bound.narrow(dst, 0, start, n), via(bound.narrow(src, 0, start, n)))


def same_bits(bound: _Bound, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN payloads included) of `a` and `b`, where `a` may be a host copy of
    the device tensor `b` (compared on `b`'s device, a slice at a time)."""
    if a.device == b.device:
        return _same_bits(bound, a, b)
    return _same_sliced(bound, a, b)


def _same_sliced(bound: _Bound, a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    wa, wb = _flat_words(bound, a), _flat_words(bound, b)
    stage = _Stage(bound, wa, b.device)
    for start, n in _slices(wa.numel(), a.element_size()):
        if not bound.equal(_staged(bound, stage, wa, start, n, b.device), bound.narrow(wb, 0, start, n)):
            return False
    return True


def unchanged(bound: _Bound, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """Where `after`'s elements hold the bits `before`'s hold: a bool tensor of `after`'s shape on
    its device; `before` (same shape and dtype) may be a host copy."""
    if before.device == after.device:
        return bound.view(_flat_words(bound, before) == _flat_words(bound, after), after.shape)
    return _unchanged_sliced(bound, before, after)


def _unchanged_sliced(bound: _Bound, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    wa, wb = _flat_words(bound, before), _flat_words(bound, after)
    same = bound.empty((wb.numel(),), dtype=torch.bool, device=after.device)
    stage = _Stage(bound, wa, after.device)
    for start, n in _slices(wb.numel(), after.element_size()):
        bound.copy_(bound.narrow(same, 0, start, n),
                    _staged(bound, stage, wa, start, n, after.device) == bound.narrow(wb, 0, start, n))
    return bound.view(same, after.shape)


def _flat_words(bound: _Bound, t: torch.Tensor) -> torch.Tensor:
    """`t`'s bits, flat, as integers of its width (bool as it is)."""
    t = t.contiguous()
    if t.dtype != torch.bool:
        t = bound.view(t, INT_OF_WIDTH[t.element_size()])
    return bound.view(t, (-1,))


def _slice_elements(itemsize: int) -> int:
    """Elements of `itemsize` bytes in one slice (and in the stage it crosses through)."""
    return max(1, STAGING_BYTES // itemsize)


def _slices(n: int, itemsize: int):
    """(start, length) of the slices of `n` elements of `itemsize` bytes, STAGING_BYTES each at most."""
    step = _slice_elements(itemsize)
    for start in range(0, n, step):
        yield start, min(step, n - start)


def _staged(bound: _Bound, stage: _Stage, host: torch.Tensor, start: int, n: int, device) -> torch.Tensor:
    """Elements [start, start + n) of the flat host tensor `host`, copied to `device`."""
    part = bound.empty((n,), dtype=host.dtype, device=device)
    bound.copy_(part, stage.through(bound.narrow(host, 0, start, n)))
    return part


class _Stage:
    """One pinned host buffer of a slice's size, for the slices of one crossing: each slice is
    copied through it synchronously (the copy to or from the device waits for its stream), so it
    is free again when the next slice comes. None where the slices do not cross to or from a CUDA
    `device`, or the host has no pinned memory to give: each slice then crosses as it is."""

    def __init__(self, bound: _Bound, flat: torch.Tensor, device: torch.device):
        self.bound, self.buf = bound, None
        if device.type == "cuda":
            n = min(flat.numel(), _slice_elements(flat.element_size()))
            try:
                self.buf = bound.empty((n,), dtype=flat.dtype, device="cpu", pin_memory=True)
            except RuntimeError:
                self.buf = None

    def through(self, part: torch.Tensor) -> torch.Tensor:
        """A slice's values in the stage, valid until the next slice: a device slice on its way to
        the host, or a host slice on its way to the device."""
        if self.buf is None:
            return part
        staged = self.bound.narrow(self.buf, 0, 0, part.numel())
        self.bound.copy_(staged, part)
        return staged
