"""The reference in float64, whole: what a dtype cast of the module alone misses.

`Module.to(float64)` converts the parameters and buffers a module registers. Two things of a
reference's own escape it, and mix float32 into the float64 forward (a dtype error, or float32
rounding in the yardstick):
  - functions stored on a module that close over its submodules (minGPT's
    `self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))`, KernelBench's level 3 problem 44): a deep
    copy shares the function, which still calls the float32 originals. `rebind_closures` gives the
    copy its own functions, closed over the copied submodules.
  - tensors the forward makes without a dtype (`torch.zeros(b, h)`, `torch.randn(...)`,
    `torch.tensor(0.5)`): they come in the default dtype, float32. `Factories64` makes each such
    floating tensor float64 (a random one drawn as the default dtype first, then cast), in this
    thread only.
"""

from __future__ import annotations

import types

import torch
from torch.overrides import TorchFunctionMode

# Factories whose floating result takes the default dtype when no dtype is given: those that make
# values are asked again for float64 (`torch.tensor(0.3)` exact, not float32's 0.3 widened); those
# that draw them have their draw widened (the values the float32 reference would draw).
_MAKERS = frozenset({torch.empty, torch.zeros, torch.ones, torch.full, torch.arange, torch.linspace, torch.logspace,
                     torch.eye, torch.tensor, torch.as_tensor, torch.scalar_tensor})
_DRAWERS = frozenset({torch.rand, torch.randn, torch.normal})


class Factories64(TorchFunctionMode):
    """Inside: a floating tensor a factory makes in the default dtype (no dtype asked for) is float64."""

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if (kwargs.get("dtype") is not None or not isinstance(out, torch.Tensor)
                or out.dtype != torch.get_default_dtype() or out.dtype == torch.float64):
            return out
        if func in _MAKERS:
            return func(*args, **{**kwargs, "dtype": torch.float64})
        if func in _DRAWERS:
            return out.to(torch.float64)
        return out


def rebind_closures(copied: torch.nn.Module, memo: dict) -> None:
    """Each function stored on a module of `copied` (a deep copy made with `memo`) that closes over
    objects the copy duplicated is replaced by the same function closed over the duplicates."""
    for module in copied.modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and value.__closure__:
                cells = tuple(types.CellType(memo.get(id(_contents(c)), _contents(c))) for c in value.__closure__)
                if any(a.cell_contents is not _contents(b) for a, b in zip(cells, value.__closure__)):
                    fn = types.FunctionType(value.__code__, value.__globals__, value.__name__,
                                            value.__defaults__, cells)
                    fn.__kwdefaults__ = value.__kwdefaults__
                    vars(module)[name] = fn


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:   # an empty cell (a name bound after the function was made)
        return None
