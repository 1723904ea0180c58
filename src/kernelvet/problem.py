"""Problem: what the candidate must compute, and how the judge draws inputs and the reference.

A problem is KernelBench-shaped (Model, get_inputs, get_init_inputs), from a file or built in.
Everything here runs in the judge (trusted code only).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Any

import torch

from . import problems
from .errors import UsageError
from .formats import kernelbench

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float64": torch.float64}


@dataclasses.dataclass(frozen=True)
class Problem:
    name: str
    spec: dict            # how a worker rebuilds the reference Model (JSON-able, no secrets)
    module: Any           # namespace with Model, get_inputs, get_init_inputs
    path: str | None = None
    flops: float | None = None
    bytes_moved: float | None = None
    forbidden: frozenset[str] | None = None   # None: derive from the ops the reference dispatches
    output_arg: int | None = None             # index of an input that is the output buffer (OUTPUT_ARG)

    def to_json(self) -> dict:
        return {"name": self.name, "source": self.path or "builtin", "flops": self.flops,
                "bytes": self.bytes_moved}

    def _where(self) -> str:
        return self.path or f"built-in problem {self.name}"

    def init_inputs(self) -> list:
        got = kernelbench.call_user(self.module.get_init_inputs, self._where(), "get_init_inputs()")
        if not isinstance(got, (list, tuple)):
            raise UsageError(f"{self._where()}: get_init_inputs() must return a list, got {type(got).__name__}")
        return list(got)

    def draw_inputs(self, seed: int) -> list:
        """One input set, drawn under `seed` with torch's global generator (as KernelBench does)."""
        torch.manual_seed(seed)
        got = kernelbench.call_user(self.module.get_inputs, self._where(), "get_inputs()")
        if not isinstance(got, (list, tuple)) or not got:
            raise UsageError(f"{self._where()}: get_inputs() must return a non-empty list, "
                             f"got {type(got).__name__}")
        out = []
        for i, x in enumerate(got):
            if isinstance(x, torch.Tensor):
                out.append(x.detach().to("cpu").contiguous().clone())
            elif isinstance(x, (bool, int, float)):
                out.append(x)
            else:
                raise UsageError(f"{self._where()}: get_inputs()[{i}] is a {type(x).__name__}; "
                                 "inputs must be tensors or numbers")
        return out

    def build_model(self, init: list, weight_seed: int) -> torch.nn.Module:
        torch.manual_seed(weight_seed)
        return kernelbench.call_user(lambda: self.module.Model(*init), self._where(), "Model(*get_init_inputs())")


def reference64(model: torch.nn.Module, inputs: list, device: str) -> torch.Tensor:
    """The reference output in float64 (where the op allows it), computed by the judge."""
    m64 = copy.deepcopy(model).to(device=device, dtype=torch.float64)
    args = [_to64(x, device) for x in inputs]
    with torch.no_grad():
        out = m64(*args)
    if not isinstance(out, torch.Tensor):
        raise UsageError(f"the reference Model returned {type(out).__name__}; "
                         "only single-tensor outputs are supported")
    return out.detach()


def _to64(x, device):
    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.double() if x.is_floating_point() else x
    return x


def load_problem(ref: str, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> Problem:
    """`ref` is a built-in problem name or a path to a KernelBench reference file."""
    if ref in problems.BUILTIN:
        tdtype = _DTYPES.get(dtype or "float32")
        if tdtype is None:
            raise UsageError(f"--dtype {dtype!r} is not one of {', '.join(_DTYPES)}")
        try:
            mod = problems.make(ref, shape, tdtype)
        except ValueError as exc:
            raise UsageError(f"--shape: {exc}") from None
        spec = {"kind": "builtin", "name": ref, "shape": list(shape or problems.default_shape(ref)),
                "dtype": dtype or "float32"}
        return Problem(mod.NAME, spec, mod, None, mod.FLOPS, mod.BYTES)
    if not ref.endswith(".py") and not os.path.exists(ref):
        raise UsageError(f"--ref {ref!r} is neither a built-in problem ({', '.join(problems.BUILTIN)}) "
                         "nor a problem file")
    if shape or dtype:
        raise UsageError("--shape and --dtype apply to built-in problems; a problem file sets its own")
    mod = kernelbench.load_reference(ref)
    path = os.path.abspath(ref)
    output_arg = getattr(mod, "OUTPUT_ARG", None)
    if output_arg is not None and (type(output_arg) is not int or output_arg < 0):
        raise UsageError(f"{ref}: OUTPUT_ARG must be the index of the output-buffer input, got {output_arg!r}")
    return Problem(os.path.basename(ref), {"kind": "file", "path": path}, mod, path,
                   getattr(mod, "FLOPS", None), getattr(mod, "BYTES", None), output_arg=output_arg)


def load_reference_module(spec: dict):
    """Used by a reference worker: rebuild the trusted reference from its spec."""
    if spec["kind"] == "builtin":
        return problems.make(spec["name"], tuple(spec["shape"]), _DTYPES[spec["dtype"]])
    return kernelbench.load_reference(spec["path"])
