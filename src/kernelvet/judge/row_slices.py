"""The float64 reference of a big batch, made a slice of rows at a time.

Made whole, a float64 reference holds its inputs and every intermediate in float64 at once:
KernelBench's InstanceNorm (7 GiB a set) needed 63 GiB of the device for it, beside the worker's
sets and outputs, more than an H200 has. A reference whose rows (dim 0 of every tensor input and
of its output) are computed independently of one another gives the same answer a slice at a time,
each slice's output moved at once to where the checks compare, in the dtype kept there; so the
judge asks, on two rows of the problem's own inputs, whether they are (`batch_rows`).
"""

from __future__ import annotations

import math
import weakref

import torch

from ..errors import ReferenceOutOfMemory
from ..problem import _deterministic_once, _forward64, _model64, _where_of

# How near the two rows computed together must be to the rows computed apart: float64 arithmetic
# that blocks by the batch's size moves the last few bits, a reduction over the batch moves them all
AGREE_RTOL = 1e-9

_ROWS: "weakref.WeakKeyDictionary[torch.nn.Module, int]" = weakref.WeakKeyDictionary()


def batch_rows(model: torch.nn.Module, inputs: list, device) -> int:
    """The rows the reference's batch may be cut into (dim 0 of every tensor input and of its
    output, one tensor), or 1 where it may not: the forward of two rows must equal the forwards
    of each row alone. Meta inputs (shapes only) are probed with values drawn in [0, 1). Kept
    per model: the answer is the problem's."""
    if model in _ROWS:
        return _ROWS[model]
    rows = _probe(model, inputs, device)
    _ROWS[model] = rows
    return rows


def _probe(model, inputs, device) -> int:
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if not tensors or any(x.dim() == 0 for x in tensors):
        return 1
    batch = tensors[0].shape[0]
    if batch < 2 or any(x.shape[0] != batch for x in tensors):
        return 1
    if any(x.is_meta and not x.is_floating_point() for x in tensors):
        return 1   # indices or labels: no values to probe with
    two = [_two_rows(x, device) if isinstance(x, torch.Tensor) else x for x in inputs]
    where = _where_of(model)
    try:
        m64 = _model64(model, device)
        both = _forward64(m64, two, device, where)
        apart = [_forward64(m64, [x[i:i + 1] if isinstance(x, torch.Tensor) else x for x in two], device, where)
                 for i in (0, 1)]
    except Exception:  # noqa: BLE001 - a forward that takes no slice (a view by the batch's size): whole
        return 1
    if not both.is_floating_point() or both.dim() == 0 or both.shape[0] != 2:
        return 1
    if any(a.shape != (1, *both.shape[1:]) or a.dtype != both.dtype for a in apart):
        return 1
    joined = torch.cat(apart)
    scale = float(both.abs().max()) if both.numel() else 0.0
    agree = torch.allclose(both, joined, rtol=AGREE_RTOL, atol=AGREE_RTOL * scale, equal_nan=True)
    return batch if agree else 1


def _two_rows(x: torch.Tensor, device) -> torch.Tensor:
    if x.is_meta:
        return torch.rand((2, *x.shape[1:]), dtype=x.dtype, device=device)
    return x[:2]


def reference64_in_slices(model: torch.nn.Module, inputs: list, device, slices: int,
                          keep_on: torch.device, keep_dtype: torch.dtype | None) -> torch.Tensor:
    """The float64 reference of `inputs`, made on `device` in `slices` slices of rows, each kept on
    `keep_on` in `keep_dtype` (None: float64) as it is made; the whole, joined there.

    A slice that runs out of memory is made again in slices of half as many rows, down to one row.
    The plan's slices follow from an estimate of what the worker holds beside them (its outputs,
    its allocator's cache), which the candidate decides: on an 80 GB H100, KernelBench's 1-D max
    pooling (3 GiB sets, planned at 68 GiB of the device) ran out in its first slice of half its
    rows, the judge holding 24 GiB and 2.4 GiB of the device free."""
    where = _where_of(model)
    batch = next(x for x in inputs if isinstance(x, torch.Tensor)).shape[0]
    step = math.ceil(batch / max(slices, 1))
    m64 = _model64(model, device)
    whole = None   # written slice by slice where it is kept (no second copy of it to join the slices)
    lo = 0
    while lo < batch:
        part = [x[lo:lo + step] if isinstance(x, torch.Tensor) else x for x in inputs]
        try:
            out = _forward64(m64, part, device, where)
            if whole is None:
                _deterministic_once(model, m64, part, device, where, out)
                whole = torch.empty((batch, *out.shape[1:]), dtype=keep_dtype or out.dtype, device=keep_on)
        except ReferenceOutOfMemory:
            if step == 1:
                raise
            out = None
        if out is None:   # out of the handler, so that the failed slice's tensors are let go first
            part, step = None, math.ceil(step / 2)
            _give_back_cache(device)
            continue
        whole[lo:lo + out.shape[0]].copy_(out)
        lo += out.shape[0]
        del out
    return whole


def _give_back_cache(device) -> None:
    """The judge's allocator cache on `device` back to the device, for the next, smaller slice."""
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()
