"""The reference implementation's own error on an input set it never ran on in the worker, made
by the judge when a check would fail an output on that set.

A candidate is held to a few times the reference's error (metrics.tolerance), measured on the
sets the reference ran on. Where a problem's conditioning moves from set to set (deep networks
of small copies: DenseNet's float32 error moved 10-10,000x between draws), a set the reference
never ran on can be much harder than those, and an honest output there would read as wrong. So
a failing output on such a set is held instead to a few times the reference's own error on that
very set, computed here: the judge's copy of the reference, in the problem's dtype, on the
judge's copy of the set. The candidate reaches none of it. The bound only ever widens, and never
past what a reference error at the problem's ceiling would allow (metrics.on_set)."""

from __future__ import annotations

import contextlib
import copy

import torch

from .. import as64, metrics, outputs


def error_on(model: torch.nn.Module, inputs: list, ref64: torch.Tensor, device: torch.device,
             floor: float, tf32_off: bool) -> float | None:
    """The relative error of `model`'s own output on `inputs` (run on `device`) against `ref64`;
    None where it cannot be had (the run failed, ran out of memory, or returned no tensor)."""
    try:
        return _error_on(model, inputs, ref64, device, floor, tf32_off)
    except Exception:  # noqa: BLE001 - the bound then stays what the sets the reference ran on gave
        return None
    finally:
        if device.type == "cuda":   # the forward's blocks back to the device: the worker shares it
            torch.cuda.empty_cache()


def _error_on(model, inputs, ref64, device, floor, tf32_off) -> float | None:
    memo: dict = {}
    m = copy.deepcopy(model, memo)   # a forward may write its own buffers (BatchNorm's statistics)
    as64.rebind_closures(m, memo)
    m = m.to(device)
    args = [x.to(device).clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad(), _cudnn_tf32(device, not tf32_off):
        out = outputs.pack(m(*args))
    if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.shape != ref64.shape:
        return None
    return metrics.rel_error(out.detach(), ref64, floor)


@contextlib.contextmanager
def _cudnn_tf32(device: torch.device, allowed: bool):
    """cuDNN's TF32 as the worker's reference ran it (reference.py: off where the problem is
    judged in float32 proper)."""
    if device.type != "cuda":
        yield
        return
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = allowed
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before
