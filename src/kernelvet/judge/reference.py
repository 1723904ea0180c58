"""The problem's side of a vet: the reference's run in the worker (after the worker's first
answer, which describes the device), and the judge's own work on the problem (its FLOPs, its
inputs, the lazily made float64 references) within the vet's time."""

from __future__ import annotations

import hashlib
import math
import re
import threading
import time

import torch

from .. import devices, metrics, sizes, spawn
from ..checks.source_scan import _CONV_OPS
from ..dispatch_modes import defer_dynamo
from ..errors import HarnessError, UsageError
from ..problem import Problem
from . import null_prices
from .lean import borrowed, redraws, sent
from .bodies import _decode_output, _encode_set, _time_body
from .settings import Settings


def _check_inputs_vary(prob: Problem, a: list, b: list, output_arg: int | None) -> None:
    ta = [x for i, x in enumerate(a) if isinstance(x, torch.Tensor) and x.is_floating_point() and i != output_arg]
    tb = [x for i, x in enumerate(b) if isinstance(x, torch.Tensor) and x.is_floating_point() and i != output_arg]
    if ta and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(ta, tb)):
        raise UsageError(f"{prob.path or prob.name}: get_inputs() returned the same values under two different "
                         "seeds; inputs must be drawn from torch's random generator")


def _derived_seed(secret: int, what: str) -> int:
    """A seed for `what`, from the secret, independent of the draws that key the input sets."""
    return int.from_bytes(hashlib.sha256(f"{what}:{secret}".encode()).digest()[:8], "little") >> 1


class _Lazy(dict):
    """A dict whose missing keys are made by `make(key)` on first use, then kept (unless `keep`
    is false: made again at each use)."""

    def __init__(self, make, keep: bool = True):
        super().__init__()
        self._make, self._keep = make, keep

    def __missing__(self, key):
        value = self._make(key)
        if self._keep:
            self[key] = value
        return value


# the worker, the sets and their references, and the problem's limits: what the run is checked against
def _run_reference(w, dev, values, fresh, refs64, settings: Settings, name: str,
                   size: "sizes.ProblemSize | None" = None, floor: float = 0.0, timeout: float = 0.0,
                   price_nulls: bool = True, hold: "sizes.Holding" = sizes.Holding()) -> dict:
    """The reference implementation, first in the worker: output dtype, its own error, its timing,
    its ops; the null requests' trusted prices (`price_nulls`: for `timers`); and the worker's
    description of the device, from its `prepared` answer. A problem
    that cannot fit the device (`size`) is refused before any of it runs there."""
    prepared = _prepared(w, dev, settings.flush_factor)
    if size is not None:
        # a CUDA device's memory; on the CPU, the data memory the worker is limited to
        limit = ((getattr(w, "containment", None) or {}).get("limits") or {}).get("mem_bytes")
        memory = prepared["device_info"].get("memory_bytes")
        too_big = (sizes.fits(size, memory, hold=hold) if memory else
                   sizes.fits(size, limit, "the worker's memory limit of", hold=hold, judge_device=False))
        if memory and not too_big:   # a CUDA run: the judge's input sets (and references, judged there) on the host
            too_big = sizes.host_fits(size, sizes.host_memory(), hold=hold)
        if too_big:
            raise UsageError(f"{name}: {too_big}")
    try:
        w.request(None)   # the `load` sent before the float64 references were computed
        redraw = redraws(hold)
        for k in fresh:
            layout, blobs = _encode_set(values[k])
            w.request("inputs", {"set": k, "layout": layout}, blobs)
            del layout, blobs
            sent(values, k, redraw)
        out, second, traced, timed, errors, row_errors = _reference_calls(w, fresh, refs64, settings, floor)
        tf32 = None   # the library's default
        ops = set(traced.get("aten_ops", []))
        if out is not None and out.dtype.is_floating_point and max(errors) > _own_error_ceiling(out.dtype, dev, ops) \
                and _tf32_may_drift(out.dtype, dev, ops):
            # cuDNN's TF32 yardstick drifted (deep convolutions, long recurrences): the problem judged in
            # float32 proper, its reference run again with TF32 off, and every candidate with it
            tf32 = {"tf32_error": max(errors)}
            w.request("precision", {"tf32": False})
            out, second, traced, timed, errors, row_errors = _reference_calls(w, fresh, refs64, settings, floor)
        # what the judge's clocks will subtract, priced before any candidate code runs here
        prices = null_prices.trusted(w, fresh, settings, w.max_blob_bytes, dev.type == "cuda",
                                     reps=len(timed.get("times_ms") or ()),
                                     seen_values=lambda: borrowed(values, fresh[0], redraw), out_nbytes=_nbytes(out),
                                     seen_bytes=size.input_bytes if size is not None else None) if price_nulls else None
    except (spawn.WorkerEnded, spawn.CandidateRaised) as exc:
        if isinstance(exc, spawn.WorkerEnded) and "timed out" in str(exc):
            raise _problem_timed_out(name, timeout, exc) from None
        if size is not None and isinstance(exc, spawn.CandidateRaised) and _says_out_of_memory(exc.error):
            raise UsageError(f"{name}: the reference ran out of memory on {dev} ({size.describe()}); "
                             f"the problem is too large for this device{_where_it_ran_out(exc)}") from None
        raise HarnessError(f"{name}: the reference implementation failed in its worker: {exc}. "
                           f"{w.output()[-500:]}") from None
    if out is None:
        raise HarnessError(f"{name}: the reference Model returned a {traced.get('type')}, not a tensor")
    rows = {}
    if out.dtype.is_floating_point and second is not None and second.shape == out.shape == refs64[fresh[0]].shape:
        rows = {fresh[0]: row_errors[0], fresh[1]: row_errors[1]}
    if out.dtype.is_floating_point and max(errors) > _own_error_ceiling(out.dtype, dev, ops, tf32 is None):
        also = f" (with cuDNN's TF32 on: {tf32['tf32_error']:.3g})" if tf32 else ""
        raise HarnessError(f"{name}: the reference implementation itself misses its float64 result by {max(errors):.3g} "
                           f"(relative){also}; the problem is ill-conditioned or nondeterministic. {w.output()[-500:]}")
    if tf32:
        tf32["error"] = max(errors)
    # timed reps of the reference that returned other bits than its first rep on the same inputs:
    # its library's algorithms do not repeat bitwise on this device (atomics), so a candidate's need not
    return {"dtype": out.dtype, "error": max(errors), "set_errors": dict(zip(fresh[:2], errors)),
            "times_ms": timed["times_ms"], "aten_ops": ops,
            "row_errors": rows, "null_trusted": prices, "repeat_mismatches": int(timed.get("mismatches") or 0),
            "tf32_off": tf32, **prepared}


def _reference_calls(w, fresh, refs64, settings: Settings, floor: float) -> tuple:
    """The reference's two traced calls and its timing in its worker: (the two outputs as meta
    stand-ins, the second call's reply body, the timing's reply body, the two outputs' errors
    against float64 and their row errors, from one pass over each). Bodies and stand-ins, not the
    replies and outputs: a reply's blobs map its outputs' memfds while it lives, and the null prices
    after these take as long as the timing (five outputs of a big problem's host held through them)."""
    out = _decode_output(w.request("call", {"set": fresh[0], "trace": True}))
    traced = w.request("call", {"set": fresh[1], "trace": True})
    timed = w.request("time", _time_body(fresh, settings, null_reps=0)).body
    second = _decode_output(traced)
    errors, rows = [math.inf], [None, None]
    if out is not None and second is not None:
        (e1, rows1), (e2, rows2) = (metrics.error_and_rows(out, refs64[fresh[0]], floor),
                                    metrics.error_and_rows(second, refs64[fresh[1]], floor))
        errors, rows = [e1, e2], [rows1, rows2]
    return _stand_in(out), _stand_in(second), traced.body, timed, errors, rows


def _stand_in(out):
    return out.to("meta") if isinstance(out, torch.Tensor) else out


# cuDNN runs float32 convolutions in TF32 unless told not to (torch.backends.cudnn.allow_tf32, on by
# default), as the candidate's own library convolutions do: a float32 reference that convolves on
# CUDA is a TF32 yardstick. KernelBench's level-2 ConvTranspose2d-BatchNorm-GroupNorm missed float64
# by 5.4e-4 on the H200 that way, above float32's ceiling (5e-4) but nothing like ill-conditioned.
TF32_TOLERANCE = 1e-3


def _own_error_ceiling(dtype, dev, ops, tf32: bool = True) -> float:
    """The most the reference may miss its float64 result by and still be the yardstick (the
    candidate's bound is then a few times its error: metrics.bound)."""
    tolerance = metrics.TOLERANCE.get(dtype, 1.0)
    if tf32 and _tf32_may_drift(dtype, dev, ops):
        tolerance = TF32_TOLERANCE
    return metrics.REFERENCE_CEILING * tolerance


# cuDNN's recurrent layers take the same switch (their math type is TF32 unless cudnn.allow_tf32 is
# off): KernelBench's 6-layer bidirectional GRU over 512 steps missed float64 by 5.1e-4 on the H100.
_CUDNN_TF32_OPS = _CONV_OPS + ("_cudnn_rnn", "lstm", "gru", "rnn_tanh", "rnn_relu")


def _tf32_may_drift(dtype, dev, ops) -> bool:
    """Whether the reference's float32 arithmetic is cuDNN's TF32 by default: a convolution or a
    recurrent layer on CUDA."""
    return dev.type == "cuda" and dtype == torch.float32 and any(
        op.removeprefix("aten::").split(".")[0] in _CUDNN_TF32_OPS for op in ops)


def _within(deadline: float, timeout: float, name: str, what: str, work):
    """Run the judge's own `work` (the problem's, not the candidate's) by `deadline`, or say in
    one line that the problem ran out of time. The work cannot be stopped midway (one torch op can
    take minutes); it runs on a thread that is left to finish, its result unused."""
    failed: list[BaseException] = []
    result: list = []

    def run():
        try:
            result.append(work())
        except BaseException as exc:  # noqa: BLE001 - raised again on the judge's thread
            failed.append(exc)

    thread = threading.Thread(target=run, name="kernelvet-problem", daemon=True)
    thread.start()
    thread.join(max(deadline - time.monotonic(), 0.0))
    if thread.is_alive():
        raise UsageError(f"{name}: the problem itself ran out of time: {what} took longer than the "
                         f"--timeout of {timeout:g} s (not the candidate's doing; raise --timeout or shrink the problem)")
    if failed:
        raise failed[0]
    return result[0]


def _problem_timed_out(name: str, timeout: float, exc) -> UsageError:
    return UsageError(f"{name}: the problem itself ran out of time: the reference implementation took longer "
                      f"than its budget in the worker ({exc}; --timeout {timeout:g} s); raise --timeout or "
                      "shrink the problem")


def _says_out_of_memory(error: str) -> bool:
    return "OutOfMemoryError" in error or "out of memory" in error.lower() or "MemoryError" in error


def _where_it_ran_out(exc: spawn.CandidateRaised) -> str:
    """The request the reference's worker ran out in, and torch's own account from its error (what
    it tried to allocate, what the device had free, what the worker held), as a clause."""
    said = re.search(r"Tried to allocate .*?(?:unallocated\.|$)", exc.error, re.S)
    account = f": {' '.join(said.group(0).split())[:400]}" if said else ""
    return f" (in its {exc.phase!r} request{account})"


def _prepared(w, dev, flush_factor: float) -> dict:
    """The worker's first answer: how long it took to start the device (mostly before this vet,
    for a spare) and what the device is; the flush buffer it holds must be the one that
    description and `flush_factor` call for."""
    try:
        msg = w.take_prepared()
        info = devices.checked_description(msg.body.get("device"), dev)
        flush_bytes = msg.body.get("flush_bytes")
        if flush_bytes != devices.flush_bytes(info, flush_factor) or type(flush_bytes) is not int:
            raise ValueError(f"flush_bytes {flush_bytes!r}, for a flush of {flush_factor} x its L2")
    except spawn.CandidateRaised as exc:   # the worker's own code: no candidate exists there yet
        raise HarnessError(f"the worker could not start {dev}: {exc.error}. {w.output()[-500:]}") from None
    except spawn.WorkerEnded as exc:
        raise HarnessError(f"the worker ended while starting {dev}: {exc}. {w.output()[-500:]}") from None
    except ValueError as exc:
        raise HarnessError(f"the worker's description of {dev} is malformed: {exc}") from None
    return {"spare_start_s": float(msg.body.get("start_s", 0.0)), "device_info": info}


# Inputs and weights of more elements than this are counted on the meta device: a float64 forward
# of KernelBench's 2048 x 1048576 matrix-vector problem holds 16 GiB, and one of its level-2 32768 x
# 32768 Linear (4 MiB of input, 4 GiB of weights) took about a minute on the H200's host; below it
# the float64 call costs less than the meta kernels' first use (~0.7 s: some import torch._dynamo).
META_COUNT_ELEMENTS = 1 << 22


def _count_flops(model, inputs) -> float | None:
    """The reference's FLOPs: for a big problem counted on the meta device (shapes only: no
    arithmetic, no memory), else, or where an op has no meta kernel or the count depends on the
    values, on one float64 call."""
    n = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)) + \
        sum(t.numel() for t in (*model.parameters(), *model.buffers()))
    if n > META_COUNT_ELEMENTS:
        counted = _flops_on_meta(model, inputs)
        if counted is not _NOT_ON_META:
            # none counted (elementwise ops, pooling, reductions, losses: the counter counts matmuls
            # and convolutions) is what the float64 call would count too, at the cost of a float64
            # copy of every input (0.8-3 s a GiB of input on a 2-core host: bench/diagnostics/flop_count_cost.py)
            return counted
    return _flops_in_float64(model, inputs)


def _flop_mode():
    from torch.utils import flop_counter
    from torch.utils.flop_counter import FlopCounterMode
    if hasattr(flop_counter, "_FlopCounterMode"):   # the dispatch mode inside (torch 2.4+)
        defer_dynamo(flop_counter._FlopCounterMode)
    return FlopCounterMode(display=False)


_NOT_ON_META = object()   # the forward could not run on the meta device


def _flops_on_meta(model, inputs):
    """FLOPs counted on a shapes-only run: a float, None where none were counted, _NOT_ON_META
    where the forward cannot run there."""
    try:
        import copy
        tensors = [*model.parameters(), *model.buffers()]
        meta = copy.deepcopy(model, memo={id(t): sizes._meta_like(t) for t in tensors})
        args = [x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs]
        with _flop_mode() as fc, torch.no_grad():
            meta(*args)
        total = fc.get_total_flops()
        return float(total) if total else None
    except Exception:  # noqa: BLE001 - no meta kernel, or a forward that reads values
        return _NOT_ON_META


def _flops_in_float64(model, inputs) -> float | None:
    try:
        import copy
        m64 = copy.deepcopy(model).double()
        with _flop_mode() as fc, torch.no_grad():
            m64(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])
        total = fc.get_total_flops()
        return float(total) if total else None
    except Exception:  # noqa: BLE001 - FLOP counting is best effort
        return None


def _min_bytes(inputs, ref) -> float:
    n = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    itemsize = next((x.element_size() for x in inputs if isinstance(x, torch.Tensor)), 4)
    return float(n + ref.numel() * itemsize)


def _nbytes(out) -> int:
    """The bytes a call's output takes (0 for a non-tensor: the reference's own failure says so)."""
    return out.numel() * out.element_size() if isinstance(out, torch.Tensor) else 0
