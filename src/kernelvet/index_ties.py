"""Argmax and argmin ties: a documented exception to exact integer comparison.

Where the reference's output is the result of an argmax or argmin, any index whose value equals
the extreme is as right as the one torch picked (its first). The judge records, while it computes
the float64 reference, which argmax/argmin produced the output and over what values
(`Recorder`), and `mismatches` counts only indices whose value is not the extreme. The values
are the reference's own, in float64: the candidate's float32 inputs converted exactly, so an
equal value there is an equal value in the candidate's arithmetic.
"""

from __future__ import annotations

import dataclasses

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_OPS = {"aten::argmax": "max", "aten::argmin": "min"}


@dataclasses.dataclass(frozen=True)
class Ties:
    values: torch.Tensor   # what the index runs over, float64 (flattened when the op had no dim)
    dim: int
    keepdim: bool


class Recorder(TorchDispatchMode):
    """Every argmax/argmin of one forward: its output and what it ran over."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[torch.Tensor, Ties]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func._schema.name in _OPS and isinstance(out, torch.Tensor):
            x = args[0]
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            keepdim = bool(args[2] if len(args) > 2 else kwargs.get("keepdim", False))
            if dim is None:
                x, dim, keepdim = x.reshape(-1), 0, False
            self.seen.append((out, Ties(x.detach(), int(dim) % max(x.dim(), 1), keepdim)))
        return out

    def ties_of(self, out: torch.Tensor) -> Ties | None:
        for t, ties in self.seen:
            if t is out or (t.shape == out.shape and t.data_ptr() == out.data_ptr() and t.numel()):
                return ties
        return None


def mismatches(out: torch.Tensor, ref: torch.Tensor, ties: Ties) -> int:
    """Elements of `out` that are not an index of the extreme (ref holds torch's own choice)."""
    values = ties.values.to(ref.device)
    o = out.to(ref.device, torch.int64)
    r = ref.to(torch.int64)
    n = values.shape[ties.dim] if values.dim() else 1
    valid = (o >= 0) & (o < n)
    oc, rc = o.clamp(0, max(n - 1, 0)), r
    if not ties.keepdim and values.dim():
        oc, rc, valid = oc.unsqueeze(ties.dim), rc.unsqueeze(ties.dim), valid.unsqueeze(ties.dim)
    got, want = values.gather(ties.dim, oc), values.gather(ties.dim, rc)
    ok = valid & ((got == want) | (torch.isnan(got) & torch.isnan(want)))
    return int((~ok).sum().item())
