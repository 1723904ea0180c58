"""Outputs of any structure, as the one tensor the judge compares.

A Model may return a tensor (0-dim included), a Python number, or a tuple or list of those
(nested). The judge's float64 reference and the worker's outputs, reference and candidate alike,
go through the same `pack`: a plain tensor is left as it is (the checks see the very object the
call returned); a number becomes a 0-dim tensor (bool, int64, or float32 for a float: the
precision of the problem's arithmetic, whatever Python holds it in); a structure becomes its
leaves flattened and concatenated in order, in their common dtype. Leaves of different dtypes
(values and indices) are packed in the widest floating dtype among them, where integers below
its mantissa (2**24 for float32) are exact, and are compared at that dtype's tolerance.

A leaf that is not exactly a torch.Tensor (a subclass, a wrapper) leaves the structure as it
was: the worker's output-type check then sees what the candidate returned.
"""

from __future__ import annotations

import functools

import torch

_NUMBERS = {bool: torch.bool, int: torch.int64, float: torch.float32}
MAX_DEPTH = 4


def pack(out, float_dtype: torch.dtype = torch.float32):
    """`out` as one tensor where it can be (else as it was). The judge's float64 reference packs
    Python floats as `float_dtype` float64."""
    if type(out) is torch.Tensor:
        return out
    numbers = {**_NUMBERS, float: float_dtype}
    if type(out) in numbers:
        return torch.tensor(out, dtype=numbers[type(out)])
    if isinstance(out, (tuple, list)):
        leaves = _leaves(out, 0, numbers)
        if leaves is None or not leaves:
            return out
        dtype = _common(leaves)
        device = next((t.device for t in leaves if t.device.type != "cpu"), leaves[0].device)
        return torch.cat([t.detach().reshape(-1).to(device, dtype) for t in leaves])
    return out


def _common(leaves: list[torch.Tensor]) -> torch.dtype:
    """One dtype: theirs if they share it, else the widest floating one among them (integers
    below its mantissa are exact there), else int64."""
    dtypes = {t.dtype for t in leaves}
    if len(dtypes) == 1:
        return dtypes.pop()
    floats = [d for d in dtypes if d.is_floating_point]
    return max(floats, key=lambda d: torch.finfo(d).bits) if floats else torch.int64


def _leaves(out, depth: int, numbers: dict) -> list[torch.Tensor] | None:
    found = []
    for x in out:
        if type(x) is torch.Tensor:
            found.append(x)
        elif type(x) in numbers:
            found.append(torch.tensor(x, dtype=numbers[type(x)]))
        elif isinstance(x, (tuple, list)) and depth < MAX_DEPTH:
            inner = _leaves(x, depth + 1, numbers)
            if inner is None:
                return None
            found += inner
        else:
            return None
    return found


def packing(fn):
    """`fn` whose outputs are packed (the worker calls the model through this)."""
    @functools.wraps(fn)
    def call(*args):
        return pack(fn(*args))
    return call
