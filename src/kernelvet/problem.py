"""Problem: what the candidate must compute, and how the judge draws inputs and the reference.

A problem is KernelBench-shaped (Model, get_inputs, get_init_inputs), from a file, built in, or
made so from a GPU MODE task (formats/gpumode.py).
Everything here runs in the judge (trusted code only).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import os
import weakref
from typing import Any

import torch

from . import as64, crossing, index_ties, metrics, outputs, problems, sizes
from .errors import ProblemError, ReferenceOutOfMemory, UsageError
from .formats import gpumode, gpumode_tolerance, kernelbench, task_yml
from .protocol import DTYPE_SIZES

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
           "float64": torch.float64}
_TRAVELS = {getattr(torch, name) for name in DTYPE_SIZES}   # tensor dtypes the worker protocol carries
_SCALARS = (type(None), bool, int, float, str)              # values that travel as JSON

# Which problem built each reference model, so that reference64 (called by the judge with the model
# alone) can name the problem file; and the models whose determinism has been checked once already.
_WHERE: "weakref.WeakKeyDictionary[torch.nn.Module, Problem]" = weakref.WeakKeyDictionary()
_DETERMINISM_CHECKED: "weakref.WeakSet[torch.nn.Module]" = weakref.WeakSet()


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
    allowed_ops: tuple[str, ...] = ()         # library ops the candidate may call under any policy (ALLOWED_OPS)
    tolerance: float | None = None            # the norm-wise error bound it declares (TOLERANCE); None: its dtype's
    tolerance_from: str | None = None         # where that bound was read

    def to_json(self) -> dict:
        out = {"name": self.name, "source": self.path or "builtin", "flops": self.flops,
               "bytes": self.bytes_moved}
        if self.spec.get("kind") == "gpumode":
            out.update(format="gpumode", case=self.spec["case"])
        if self.tolerance is not None or self.tolerance_from:
            out.update(tolerance=self.tolerance, tolerance_from=self.tolerance_from)
        return out

    def candidate_entry(self, path: str, source: str) -> str:
        """The entry point the candidate must define for this problem's format (from its AST alone)."""
        if self.spec.get("kind") == "gpumode":
            return gpumode.candidate_entry(path, source)
        return kernelbench.candidate_entry(path, source)

    def _where(self) -> str:
        return self.path or f"built-in problem {self.name}"

    def init_inputs(self) -> list:
        got = kernelbench.call_user(self.module.get_init_inputs, self._where(), "get_init_inputs()")
        if not isinstance(got, (list, tuple)):
            raise UsageError(f"{self._where()}: get_init_inputs() must return a list, got {kernelbench.a_kind(got)}")
        for i, x in enumerate(got):  # they travel to the worker: tensors, or JSON values
            if isinstance(x, torch.Tensor):
                self._check_dtype(x, f"get_init_inputs()[{i}]")
            elif not _is_json_value(x):
                raise UsageError(f"{self._where()}: get_init_inputs()[{i}] is {kernelbench.a_kind(x)}; init inputs "
                                 "must be tensors, numbers, strings, None, or lists and dicts of those")
        return list(got)

    def _check_dtype(self, x: torch.Tensor, what: str) -> None:
        if x.dtype not in _TRAVELS:
            raise UsageError(f"{self._where()}: {what} is a {str(x.dtype).removeprefix('torch.')} tensor; "
                             f"supported dtypes: {', '.join(DTYPE_SIZES)}")

    def draw_inputs(self, seed: int, on: torch.device | None = None, keep: bool = False) -> list:
        """One input set, drawn under `seed` with torch's global generator (as KernelBench does).
        `on`: a CUDA device whose generator draws it (get_inputs() under that device), the tensors
        then kept on the host, or with `keep` on that device (a copy of their own either way): on
        the H200's host the CPU generator took 17 s for one 8 GiB set of KernelBench's
        matrix-vector problem, and the copy to the host 1.3 s a set of 1.25 GiB."""
        torch.manual_seed(seed)
        if on is None:
            got = kernelbench.call_user(self.module.get_inputs, self._where(), "get_inputs()")
        else:
            with torch.device(on):
                got = kernelbench.call_user(self.module.get_inputs, self._where(), "get_inputs()")
        if not isinstance(got, (list, tuple)) or not got:
            got = "an empty list" if isinstance(got, (list, tuple)) else kernelbench.a_kind(got)
            raise UsageError(f"{self._where()}: get_inputs() must return a non-empty list, got {got}")
        out = []
        for i, x in enumerate(got):
            if isinstance(x, torch.Tensor):
                self._check_dtype(x, f"get_inputs()[{i}]")
                if on is not None and keep:
                    out.append(x.detach().to(on).contiguous().clone())
                else:   # a host copy of the set's own (never a view of the module's memory)
                    out.append(x.detach().contiguous().clone() if x.device.type == "cpu" else crossing.moved_home(x.detach().contiguous()))
            elif isinstance(x, (bool, int, float)):
                out.append(x)
            else:
                raise UsageError(f"{self._where()}: get_inputs()[{i}] is {kernelbench.a_kind(x)}; "
                                 "inputs must be tensors or numbers")
        if on is not None and on.type == "cuda":   # the drawn tensors, copied: their blocks back to the device
            del got, x
            torch.cuda.empty_cache()
        return out

    def meta_inputs(self) -> list | None:
        """get_inputs() on the meta device (shapes and dtypes, nothing drawn); None where it cannot run there."""
        try:
            with torch.device("meta"):
                return list(self.module.get_inputs())
        except Exception:  # noqa: BLE001 - drawn for real later, and reported there
            return None

    def set_bytes(self) -> int | None:
        """Bytes of one input set, from get_inputs() on the meta device (shapes only: nothing is
        drawn or allocated); None where it cannot run there."""
        got = self.meta_inputs()
        return None if got is None else sum(x.numel() * x.element_size() for x in got if isinstance(x, torch.Tensor))

    def build_model(self, init: list, weight_seed: int) -> torch.nn.Module:
        torch.manual_seed(weight_seed)
        model = kernelbench.call_user(lambda: self.module.Model(*init), self._where(), "Model(*get_init_inputs())")
        if not isinstance(model, torch.nn.Module):
            raise UsageError(f"{self._where()}: Model(*get_init_inputs()) must build a torch.nn.Module, "
                             f"got {kernelbench.a_kind(model)}")
        dropout_off(model)
        _WHERE[model] = self
        return model


def dropout_off(model: torch.nn.Module) -> None:
    """Dropout modules in eval mode (the rest of the model as it is: a BatchNorm in training mode
    keeps normalising by its batch). A reference that drops at random cannot judge anyone, and a
    candidate built from the same Model gets the same treatment in its worker."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()


def _is_json_value(x, depth: int = 0) -> bool:
    if isinstance(x, _SCALARS):
        return True
    if depth < 8 and isinstance(x, (list, tuple)):
        return all(_is_json_value(v, depth + 1) for v in x)
    if depth < 8 and isinstance(x, dict):
        return all(isinstance(k, str) and _is_json_value(v, depth + 1) for k, v in x.items())
    return False


def reference64(model: torch.nn.Module, inputs: list, device: str) -> torch.Tensor:
    """The reference output in float64 (where the op allows it), computed by the judge.

    The reference is the problem's: if it cannot take its own inputs or returns no tensor, the
    problem file is malformed (UsageError); if it raises or gives two answers for one input set,
    the problem failed (ProblemError, an `error` verdict). Either message names the problem file.
    """
    where = _where_of(model)
    m64 = _model64(model, device)
    _check_signature(m64, inputs, where)
    out = _forward64(m64, inputs, device, where)
    _deterministic_once(model, m64, inputs, device, where, out)
    return out


def _where_of(model: torch.nn.Module) -> str:
    """The problem file that built the reference `model`, for messages."""
    prob = _WHERE.get(model)
    return prob._where() if prob else "the reference Model"


def _deterministic_once(model, m64, inputs: list, device, where: str, out: torch.Tensor) -> None:
    """The first float64 output of `model` (`out`, on `inputs`) made again and compared: once per
    model (_check_same)."""
    if model not in _DETERMINISM_CHECKED:
        before = _rng_states(device)
        again = _forward64(m64, inputs, device, where)
        if any(not torch.equal(a, b) for a, b in zip(before, _rng_states(device))):
            raise ProblemError(f"{where}: the reference Model.forward is nondeterministic: it draws random numbers "
                               "(torch's random generator advanced during a call), so its output is not a function "
                               "of its inputs and weights alone and it cannot judge anyone (random draws, dropout in "
                               "training mode, or a random module such as RReLU in training mode, inside forward?)")
        _check_same(out, again, where)
        _DETERMINISM_CHECKED.add(model)


def _rng_states(device) -> list[torch.Tensor]:
    """The states of torch's generators a forward on `device` may draw from: the host's, and the device's."""
    states = [torch.random.get_rng_state()]
    dev = torch.device(device)
    if dev.type == "cuda":
        states.append(torch.cuda.get_rng_state(dev))
    return states


# The float64 copies of a reference's parameters, by model and device, each with the versions of
# its source and of itself: a big model's weights (KernelBench's 32768 x 32768 Linear, 4 GiB) are
# copied and converted once, not once for every input set's reference. Everything else of the
# model (buffers, attributes) is copied afresh for each reference, as before.
_PARAMS64: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()


def _model64(model: torch.nn.Module, device) -> torch.nn.Module:
    """A float64 copy of `model` on `device`, its parameters shared with the model's earlier
    copies there for as long as neither the model's parameter nor the copy changed in place
    (a forward that writes into its own weights gets a fresh copy next time)."""
    params = list(model.parameters())
    by_device = _PARAMS64.setdefault(model, {})
    cached = by_device.get(str(device))
    if cached is None or any(p._version != v or c._version != cv for p, (c, v, cv) in zip(params, cached)):
        with torch.no_grad():
            cached = []
            for p in params:
                c = torch.nn.Parameter(p.detach().to(device=device, dtype=torch.float64 if p.is_floating_point()
                                                     else p.dtype), p.requires_grad)
                cached.append((c, p._version, c._version))
        by_device[str(device)] = cached
    memo = {id(p): c for p, (c, _, _) in zip(params, cached)}
    m64 = copy.deepcopy(model, memo)
    as64.rebind_closures(m64, memo)
    return m64.to(device=device, dtype=torch.float64)


def _forward64(m64: torch.nn.Module, inputs: list, device: str, where: str) -> torch.Tensor:
    rec = None
    try:
        args = [_to64(x, device) for x in inputs]   # in float64 on the device: out of memory too, first
        with torch.no_grad(), as64.Factories64():
            out = outputs.pack(m64(*args), torch.float64)
        if isinstance(out, torch.Tensor) and not (out.is_floating_point() or out.is_complex()):
            # Index outputs only: the forward again under the recorder of argmax/argmin ties (a
            # dispatch mode, which costs a float reference time and imports Dynamo in the judge).
            rec = index_ties.Recorder()
            with torch.no_grad(), as64.Factories64(), rec:
                out = outputs.pack(m64(*args), torch.float64)
    except Exception as exc:  # noqa: BLE001 - the problem's own failure, reported against its file
        if sizes.is_out_of_memory(exc):   # the machine's limit, not a mistake in the file
            held = sizes.device_memory_note(device)
            raise ReferenceOutOfMemory(
                f"{os.path.basename(where)}: the float64 reference (Model.forward) ran out of memory on {device} "
                f"({type(exc).__name__}{': ' + held if held else ''}); this machine has too little memory for "
                "the problem's sizes") from None
        at = kernelbench.at(where, kernelbench.user_line(exc, where))
        raise ProblemError(f"{at}: the reference Model.forward failed on its own inputs: "
                           f"{type(exc).__name__}: {exc}") from None
    if not isinstance(out, torch.Tensor):
        raise UsageError(f"{where}: the reference Model.forward returned {kernelbench.a_kind(out)}; "
                         "expected a tensor, a number, or a tuple or list of those")
    if out.dtype not in _TRAVELS:
        raise UsageError(f"{where}: the reference Model.forward returned a {str(out.dtype).removeprefix('torch.')} "
                         f"tensor; supported dtypes: {', '.join(DTYPE_SIZES)}")
    out = out.detach()
    ties = rec.ties_of(out) if rec is not None and isinstance(out, torch.Tensor) else None
    if ties is not None:   # an argmax/argmin output: metrics.rel_error accepts any index of the extreme
        out.index_ties = ties
    return out


def _check_signature(m64: torch.nn.Module, inputs: list, where: str) -> None:
    """forward must accept get_inputs()'s values: a mismatch is the problem file's mistake."""
    if type(m64).forward is torch.nn.Module.forward:
        raise UsageError(f"{where}: Model defines no forward method")
    try:
        sig = inspect.signature(m64.forward)
    except (TypeError, ValueError):  # no introspectable signature: let the call decide
        return
    try:
        sig.bind(*inputs)
    except TypeError as exc:
        line = kernelbench.def_line(type(m64).forward, where)
        raise UsageError(f"{kernelbench.at(where, line)}: Model.forward{sig} does not accept the {len(inputs)} "
                         f"input(s) that get_inputs() returns: {exc}") from None


def _check_same(a: torch.Tensor, b: torch.Tensor, where: str) -> None:
    """Two float64 runs on one input set must agree: a reference that draws random numbers (or
    runs dropout in training mode) cannot judge anyone."""
    if _same(a, b):
        return
    detail = (f"shapes {tuple(a.shape)} and {tuple(b.shape)}" if a.shape != b.shape
              else f"relative difference {metrics.rel_error(a, b):.3g}")
    raise ProblemError(f"{where}: the reference Model.forward is nondeterministic: two calls on the same inputs "
                       f"differ ({detail}); it must depend only on its inputs and weights (random draws or "
                       "dropout in training mode inside forward?)")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return torch.allclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True) or metrics.rel_error(a, b) <= 1e-9


def _to64(x, device):
    if isinstance(x, torch.Tensor):  # a copy: a reference that writes its inputs must not change them
        # one allocation, in float64 where it is floating (not a copy, then its float64 copy)
        return x.to(device=device, dtype=torch.float64 if x.is_floating_point() else x.dtype, copy=True)
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
    path, case = gpumode.split_ref(ref)
    if not path.endswith(".py") and not os.path.exists(path):
        raise UsageError(f"--ref {ref!r} is neither a built-in problem ({', '.join(problems.BUILTIN)}) "
                         "nor a problem file or GPU MODE task directory")
    if shape or dtype:
        raise UsageError("--shape and --dtype apply to built-in problems; a problem file sets its own")
    if gpumode.is_task(path):
        return _load_gpumode(path, case)
    if case is not None:
        raise UsageError(f"{ref}: :{case[0]}.{case[1]} names a case of a GPU MODE task; {path} is a KernelBench file")
    mod = kernelbench.load_reference(ref)
    path = os.path.abspath(ref)
    output_arg = getattr(mod, "OUTPUT_ARG", None)
    if output_arg is not None and (type(output_arg) is not int or output_arg < 0):
        raise UsageError(f"{ref}: OUTPUT_ARG must be the index of the output-buffer input, got {output_arg!r}")
    allowed = getattr(mod, "ALLOWED_OPS", ())
    if isinstance(allowed, str) or not isinstance(allowed, (list, tuple)) \
            or not all(isinstance(op, str) for op in allowed):
        raise UsageError(f"{ref}: ALLOWED_OPS must be a list of op names such as ['conv2d'], got {allowed!r}")
    tolerance = getattr(mod, "TOLERANCE", None)
    if tolerance is not None and (type(tolerance) not in (int, float) or not 0 <= tolerance < math.inf):
        raise UsageError(f"{ref}: TOLERANCE must be a relative error bound such as 1e-3, got {tolerance!r}")
    return Problem(os.path.basename(ref), {"kind": "file", "path": path}, mod, path,
                   _count(mod, "FLOPS", ref), _count(mod, "BYTES", ref), output_arg=output_arg,
                   allowed_ops=tuple(allowed), tolerance=None if tolerance is None else float(tolerance),
                   tolerance_from=None if tolerance is None else "TOLERANCE")


def _load_gpumode(path: str, wanted) -> Problem:
    """A GPU MODE task (its directory, or its reference.py with task.yml beside it), as a problem."""
    reference, yml = gpumode.locate(path)
    task = task_yml.read(yml) if yml else None
    files = gpumode.task_files(reference, task)
    module, tree = gpumode.import_reference(reference, files)
    label, case = gpumode.pick_case(task, wanted, reference)
    skeleton = gpumode.probe(gpumode.namespace(module, case, None, reference), reference)
    spec = {"kind": "gpumode", "path": reference, "files": files, "case": case, "skeleton": skeleton}
    declared = gpumode_tolerance.read(tree, vars(module))
    name = f"{os.path.basename(os.path.dirname(reference))}:{label}"
    return Problem(name, spec, gpumode.namespace(module, case, skeleton, reference), reference,
                   tolerance=declared.tolerance, tolerance_from=declared.source)


def _count(mod, name: str, ref: str) -> float | None:
    """FLOPS or BYTES as a problem file states them: a positive finite number, or absent (counted)."""
    value = getattr(mod, name, None)
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{ref}: {name} must be a positive number (what one call does), got {value!r}")
    return float(value)


def load_reference_module(spec: dict):
    """Used by a reference worker: rebuild the trusted reference from its spec."""
    if spec["kind"] == "builtin":
        return problems.make(spec["name"], tuple(spec["shape"]), _DTYPES[spec["dtype"]])
    if spec["kind"] == "gpumode":
        return gpumode.build(spec)
    return kernelbench.load_reference(spec["path"])
