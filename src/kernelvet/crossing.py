"""Big tensors between the host and an accelerator, a slice at a time through one pinned stage.

A pageable copy of a 4 GiB float32 tensor took 2.42 s from an H100 to the host and 0.38 s a slice
at a time through a pinned stage (6.4x); the other way, a comparison against an 8 GiB float64
reference on the host took 0.89 s with the reference crossing pageable and 0.36 s through pinned
staging (bench/compare_crossing.py, bench/results/2026-12-06-h100/compare-crossing/). The driver's
own staging of a pageable copy is the slow part; a stage of CHUNK elements pins little of the host
(a stage the size of a big output would pin as much, and torch's cache of host blocks would keep it).
"""

from __future__ import annotations

import torch

STAGE_PINNED = True   # off: every crossing pageable (bench/compare_crossing.py compares the two)
CHUNK = 1 << 24       # elements one stage holds: 64 MiB in float32, 128 MiB in float64


def _slices(n: int, step: int):
    return (slice(i, min(i + step, n)) for i in range(0, n, step))


def moved(t: torch.Tensor, at: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`t` on `at` in `dtype` (its own if None): staged where it crosses between the host and an
    accelerator, converted on the accelerator's side."""
    dtype = dtype or t.dtype
    if t.device == at:
        return t.to(dtype)
    if at.type == "cpu":
        return moved_home(t, dtype)
    if t.device.type == "cpu":
        return moved_whole(t, at).to(dtype)
    return t.to(at, dtype)


def moved_home(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """An accelerator's tensor in fresh host memory, in `dtype` (its own if None), CHUNK elements at
    a time through one stage (`_through_stage`); one pageable copy where it is small, not contiguous
    (a whole contiguous copy on the device first would take as much of it again), or staging is off."""
    dtype = dtype or t.dtype
    if t.device.type == "cpu" or not STAGE_PINNED or t.numel() <= CHUNK or not t.is_contiguous():
        return t.to("cpu", dtype)
    out = torch.empty(t.shape, dtype=dtype)
    dst = out.view(-1)
    for sl, part in _through_stage(t.view(-1), dtype, CHUNK):
        dst[sl].copy_(part)
    return out


def host_slices(t: torch.Tensor):
    """A contiguous tensor's bytes in order, as memoryviews of one stage of CHUNK float32s' size
    (pinned where it may be), each valid until the next is asked for: an accelerator's output
    written into a message without a host copy of it whole (protocol.send)."""
    for _, part in _through_stage(t.detach().reshape(-1).view(torch.uint8), torch.uint8, 4 * CHUNK):
        yield memoryview(part.numpy())


def _through_stage(src: torch.Tensor, dtype: torch.dtype, elements: int):
    """A flat contiguous tensor `elements` at a time through one host stage of `dtype` (pinned for
    an accelerator's, where pinning is on and to be had): (slice, the stage holding that slice),
    each valid until the next is asked for."""
    size = min(elements, src.numel())
    try:
        stage = torch.empty(size, dtype=dtype, pin_memory=STAGE_PINNED and src.device.type != "cpu")
    except RuntimeError:   # no pinned memory to be had here
        stage = torch.empty(size, dtype=dtype)
    for sl in _slices(src.numel(), max(size, 1)):
        part = stage[:sl.stop - sl.start]
        part.copy_(src[sl])   # synchronous: the stage is read only once it holds the slice
        yield sl, part


def moved_whole(t: torch.Tensor, at: torch.device) -> torch.Tensor:
    """A host tensor on the accelerator `at`, CHUNK elements at a time through `moved_to`'s pinned
    staging."""
    if t.device.type != "cpu" or at.type == "cpu":
        return t.to(at)
    src = t.contiguous().reshape(-1)
    whole = torch.empty(t.shape, dtype=t.dtype, device=at)
    dst = whole.view(-1)
    for sl in _slices(src.numel(), CHUNK):
        dst[sl].copy_(moved_to(src[sl], at))
    return whole


def moved_to(part: torch.Tensor, at: torch.device) -> torch.Tensor:
    """`part` on `at`; from the host's pageable memory to an accelerator, staged through a pinned
    copy. The pinned block is not reused before its copy is done (torch's host allocator records
    the copy's stream)."""
    if not STAGE_PINNED or part.device.type != "cpu" or at.type == "cpu" or part.is_pinned():
        return part.to(at)
    stage = torch.empty(part.shape, dtype=part.dtype, pin_memory=True)
    stage.copy_(part)
    return stage.to(at, non_blocking=True)
