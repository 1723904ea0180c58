"""How big a problem is, from what the judge itself computed: the message limits a worker must
keep to, what a vet of it holds and where (`footprint`, `holding`), and whether it fits at all.

No fixed cap: a worker's message may carry at most what the problem's own outputs can take
(every output counted at the widest dtype, 8 bytes, and at least as large as the largest input
or weight, so that a candidate returning a tensor of the wrong shape is judged wrong, not cut
off), times MARGIN, times the outputs that message carries. A worker announcing more is a
protocol violation: no honest worker of this problem can need it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import os
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .dispatch_modes import defer_dynamo, settle

MARGIN = 2               # slack on the largest tensor a message of this problem may carry
WIDEST = 8               # bytes per element of the widest dtype the protocol carries
FLOOR_BYTES = 1 << 20    # tiny problems: a message may always carry this much
STAGING_BYTES = 256 << 20   # a slice of a host copy on the device, as the worker compares or puts it back

# The estimate problems were once refused by (`device_need`), kept for comparison
# (bench/kernelbench_sizes.py): it undercounted the full plan and overcounted a lean one. What a
# vet holds is `footprint`, below.
SETS_HELD = 10
OUTPUTS_HELD = 16


@dataclasses.dataclass(frozen=True)
class ProblemSize:
    """One input set, the reference's outputs and its weights, in elements and bytes."""

    input_bytes: int          # one input set, as drawn
    largest_input: int        # elements of its largest tensor
    output_elements: int      # the reference's outputs, all of them
    weight_bytes: int         # parameters and buffers of the reference Model
    largest_weight: int       # elements of its largest parameter or buffer
    output_itemsize: int = WIDEST   # bytes per element of the outputs the worker returns (unknown: the widest)
    forward_bytes64: int = 0        # intermediates the float64 forward holds at once, where known (0: not known)

    @property
    def output_bytes(self) -> int:
        return self.output_elements * WIDEST

    @property
    def per_output(self) -> int:
        """Bytes one output of a message may take, at most."""
        return MARGIN * WIDEST * max(self.output_elements, self.largest_input, self.largest_weight, 1)

    def message_limit(self, outputs: int) -> int:
        """Tensor bytes a worker's message carrying `outputs` outputs may announce."""
        return max(FLOOR_BYTES, outputs * self.per_output)

    def device_need(self) -> int:
        """The old estimate of a vet's device memory: 10 input sets, 16 float64 outputs, the
        weights twice (for comparison only; `footprint` counts what the plan holds)."""
        return SETS_HELD * self.input_bytes + OUTPUTS_HELD * self.output_bytes + 2 * self.weight_bytes

    def describe(self) -> str:
        return (f"one input set {_gib(self.input_bytes)}, outputs {_gib(self.output_bytes)} (float64), "
                f"weights {_gib(self.weight_bytes)}")


def measure(inputs: list, outputs, model: torch.nn.Module | None) -> ProblemSize:
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    weights = list(model.parameters()) + list(model.buffers()) if model is not None else []
    return ProblemSize(
        input_bytes=sum(x.numel() * x.element_size() for x in tensors),
        largest_input=max((x.numel() for x in tensors), default=0),
        output_elements=sum(x.numel() for x in _leaves(outputs)),
        weight_bytes=sum(x.numel() * x.element_size() for x in weights),
        largest_weight=max((x.numel() for x in weights), default=0),
    )


def _leaves(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for x in out for t in _leaves(x)]
    return []


def largest_fitting_set(device_bytes: int, host_bytes: int | None = None, output_to_input: float = 1.0) -> int:
    """The largest input set (bytes, float32) a vet fits on a device of `device_bytes` (and a host of
    `host_bytes`) under the holding `holding` picks, for outputs of `output_to_input` times its
    elements in float32 and no weights (the docs quote this)."""
    lo, hi = 0, int(device_bytes)
    while hi - lo > 1 << 20:
        mid = (lo + hi) // 2
        if _fits_both(_set_of(mid, output_to_input), device_bytes, host_bytes):
            lo = mid
        else:
            hi = mid
    return lo


def _set_of(nbytes: int, output_to_input: float) -> ProblemSize:
    n = nbytes // 4
    out = max(int(n * output_to_input), 1)
    return ProblemSize(n * 4, n, out, 0, 0, output_itemsize=4)


def _fits_both(size: ProblemSize, device_bytes: int | None, host_bytes: int | None) -> bool:
    hold = holding(size, device_bytes, host_bytes)
    return not fits(size, device_bytes, hold=hold) and not host_fits(size, host_bytes, hold=hold)


def _gib(n: int) -> str:
    if n < 1 << 30:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / (1 << 30):.1f} GiB"


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` says the machine ran out of memory (host or device), not that the code is wrong."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("out of memory" in text.lower() or "DefaultCPUAllocator" in text
                                              and ("not enough memory" in text or "can't allocate memory" in text))


def device_memory(device) -> tuple[int, int, int, int] | None:
    """A CUDA device's bytes as this process sees them: free and total (the device's account), and
    what this process's allocator holds in tensors and reserves. None where this process has no
    CUDA context on it (any other device, a judge that never touched it)."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_initialized():
        return None
    try:
        free, total = torch.cuda.mem_get_info(dev)
        return free, total, torch.cuda.memory_allocated(dev), torch.cuda.memory_reserved(dev)
    except RuntimeError:
        return None


def device_memory_note(device) -> str:
    """What a CUDA device held when the judge ran out of its memory, for the one line that says so:
    the judge's own tensors and its allocator's cache, and what the device had free (the rest is
    other processes': the worker's sets and outputs). Empty for any other device."""
    got = device_memory(device)
    if got is None:
        return ""
    free, total, held, cached = got
    return (f"the judge held {_gib(held)} ({_gib(cached)} reserved), the device {_gib(free)} free "
            f"of {_gib(total)}")


# -- what a vet holds, and where -------------------------------------------------------------
#
# The plan (judge.py) draws these input sets: the warm-up's, `fresh` checked sets, the overwrite's
# values, the ordering probe's, `unseen` sets timed once each, up to `again` x `unseen` more for
# re-measurements, and one per judge-clocked loop attempt. Each set's outputs come back to the
# judge (the checked calls, the timing's first output per set, both sides of each unseen pair,
# each loop's last output), and each key has a float64 reference. `footprint` counts, term by
# term, what the judge and the worker hold at the plan's peak under a `Holding`.


@dataclasses.dataclass(frozen=True)
class PlanCounts:
    fresh: int = 3
    unseen: int = 5
    again: int = 2      # judge.UNSEEN_AGAIN
    loops: int = 3      # judge.LOOP_ATTEMPTS
    controls: int = 5   # control requests' copies of seen values held at once (one per unseen set)
    flush_bytes: int = 256 << 20   # the worker's L2 flush buffer (devices.FLUSH_MIN_BYTES at least)

    @property
    def keys(self) -> int:
        """Input sets drawn, at most: warm-up, fresh, overwrite, probe, unseen, re-measurements, loops."""
        return 3 + self.fresh + self.unseen * (1 + self.again) + self.loops

    @property
    def outputs(self) -> int:
        """Outputs recorded for the checks, at most: warm-up, fresh, determinism, overwrite, two
        probe attempts, the timing's first per fresh set, two per unseen request and per control
        request, one per loop."""
        return (1 + self.fresh + 1 + 1 + 2 + self.fresh + 2 * (self.unseen + self.controls) * (1 + self.again)
                + self.loops)


@dataclasses.dataclass(frozen=True)
class Holding:
    """Where a vet keeps what. `lean`: the worker frees each set it was sent for one request
    (warm-up, probe, unseen, loop) once that request is answered, keeping only the fresh sets the
    timing rotates over; the judge drops its drawn copy of such a set once sent and its float64
    reference made, and compares the outputs of the timing (timed, unseen, loop) as they arrive,
    keeping their numbers, not the tensors (compact.py). `judge_on_host`: the float64 references
    (computed on the device) and the outputs the checks compare are kept on the host, leaving the
    device to the worker. `tight` (judged on the host, for outputs of float32 or narrower): the float64
    references are kept rounded to float32, half their memory (a relative error of at most 6e-8
    beside tolerances of 5e-5 and up; metrics compare in float64 all the same), and no input set
    is drawn ahead of its use. `reference_slices` (a tight holding of a reference whose rows are
    independent, judge/row_slices.py): each float64 reference made that many slices of rows at a
    time, each slice kept where the checks compare as it is made. `redraw_sets` (lean): the judge
    keeps no copy of a fresh set once the worker holds it; a check or a request that reads one
    later draws it again from its seed, for that use alone (judge/lean.py): one set in the judge's
    hands at a time, at a few seconds a draw of a big set. `copies_on_host` (CUDA, the last resort):
    the worker keeps the copies of input values it compares or puts back (a checked call's inputs
    as they were before it, a seen set's own values while an unseen one visits) in its host memory,
    each crossing the bus twice (worker/host_copies.py): a few tenths of a second a set, for two
    input sets' worth of the device."""

    lean: bool = False
    judge_on_host: bool = False
    output_itemsize: int = 0   # the reference's output dtype's, from the shape-only run (0: not known)
    sets_on_device: bool = False   # the judge keeps its input sets on the device that drew them
    tight: bool = False
    reference_slices: int = 1
    redraw_sets: bool = False
    copies_on_host: bool = False

    def describe(self) -> str:
        where = ", sets kept on the device" if self.sets_on_device else ""
        if self.copies_on_host:
            where = ", the worker's input copies on the host" + where
        if self.redraw_sets:
            where = ", sets drawn again where read" + where
        if self.reference_slices > 1:
            where = f", references made in {self.reference_slices} slices of rows" + where
        if not self.lean:
            return "full" + where
        if self.tight:
            return "lean, judged on the host, references in float32" + where
        return ("lean, judged on the host" if self.judge_on_host else "lean") + where

    def reference_itemsize(self, output_itemsize: int) -> int:
        """Bytes an element of the judge's references takes, for outputs of `output_itemsize`."""
        return 4 if self.tight and 0 < output_itemsize <= 4 else WIDEST

    def reference_dtype(self) -> torch.dtype | None:
        """The dtype the judge keeps its float64 references in (None: as made)."""
        return torch.float32 if self.reference_itemsize(self.output_itemsize) == 4 else None


# The holdings `holding` tries, leanest last
HOLDINGS = (Holding(), Holding(lean=True), Holding(lean=True, judge_on_host=True),
            Holding(lean=True, judge_on_host=True, tight=True))


@dataclasses.dataclass(frozen=True)
class Footprint:
    device: int
    host: int
    device_terms: dict
    host_terms: dict


def footprint(size: ProblemSize, hold: Holding, plan: PlanCounts = PlanCounts(), judge_device: bool = True) -> Footprint:
    """Bytes a vet of `size` holds at its peak on the device and on the host, under `hold`
    (`judge_device`: the judge compares on the device at all; a small CUDA problem and every CPU
    run are judged on the host). The candidate's own scratch memory is not counted."""
    s, o, o64, w = size.input_bytes, size.output_elements * size.output_itemsize, size.output_bytes, size.weight_bytes
    # the overwrite's values land in a fresh set; a lean worker frees each control copy with its request
    worker_sets = plan.fresh + 1 if hold.lean else plan.keys - 1 + plan.controls
    device = {
        "worker input sets": worker_sets * s,
        # a call's copy of its inputs (inputs_changed), a seen set's values saved while an unseen one visits
        "worker input copies": 2 * s,
        # the timing's first output per set, one queued, the call's own, a comparison
        "worker outputs": (plan.fresh + 3) * o,
        "worker weights": w,
        "worker flush buffer": plan.flush_bytes,
        # the float64 reference being made: weights and inputs in float64, the forward's intermediates
        # (of one slice of rows, where it is made in slices)
        "reference64 in the making": 2 * w + -(-(3 * s + max(size.forward_bytes64, o64)) // hold.reference_slices),
    }
    host = {
        # + two drawn ahead (none when tight, nor on the device, where a draw costs milliseconds), one in use
        "judge input sets": _judge_sets(hold, plan) * s,
        "judge weights": 2 * w,   # the reference model and the fresh values handed over
        "messages in flight": max(s, o) + w,
    }
    if not judge_device:   # the judge's float64 references are made where it judges
        host["reference64 in the making"] = device.pop("reference64 in the making")
    if hold.copies_on_host:   # in the worker's host memory, each compared or put back a slice at a time
        host["worker input copies"] = device.pop("worker input copies")
        host["worker copy stage, pinned"] = device["worker copy staging"] = min(s, STAGING_BYTES)
    if hold.sets_on_device:   # and a request's sets copied into the buffers it lends (devshare.py)
        device["judge input sets"] = host.pop("judge input sets") + s
    judged = host if hold.judge_on_host or not judge_device else device
    # lean: every output but the fresh sets' compared as it arrives and dropped (the determinism
    # call's against its fresh twin), with the references of the sets used for it alone (compact.py);
    # one being compared, and an unseen request's two outputs in hand
    ref_bytes = size.output_elements * hold.reference_itemsize(size.output_itemsize)
    judged["judge float64 references"] = (plan.fresh + 2 if hold.lean else plan.keys) * ref_bytes   # + the overwrite's
    judged["judge recorded outputs"] = (plan.fresh + 2 if hold.lean else plan.outputs) * o
    # the fresh sets the checks read beside their outputs: a copy where they are compared, unless
    # the sets are kept there already
    # (one at a time where they are drawn again)
    judged["judge fresh inputs (identity)"] = 0 if hold.sets_on_device == (judged is device) else \
        (1 if hold.redraw_sets else plan.fresh) * s
    return Footprint(sum(device.values()), sum(host.values()), device, host)


def _judge_sets(hold: Holding, plan: PlanCounts) -> int:
    """Input sets the judge holds at once: every key's (full), the fresh ones and those in use or
    drawn ahead (lean), one (lean, drawing sets again where read)."""
    if not hold.lean:
        return plan.keys
    if hold.redraw_sets:
        return 1
    return plan.fresh + (1 if hold.tight or hold.sets_on_device else 3)


def reference_alone(size: ProblemSize) -> int:
    """What running the reference once takes: one input set, its outputs, weights and the forward's intermediates."""
    return size.input_bytes + size.output_elements * size.output_itemsize + size.weight_bytes + size.forward_bytes64 // 2


HEADROOM = 0.9   # of a memory, what a vet may plan to fill (the allocator's fragmentation, the candidate's scratch)


# the problem, its two memories and the plan; where the caller judges, the rows the reference may
# be cut into, and whether its worker's copies may cross to the host (a CUDA worker)
def holding(size: ProblemSize, device_bytes: int | None, host_bytes: int | None,
            plan: PlanCounts = PlanCounts(), judge_device: bool = True, rows=None,
            copies_on_host: bool = False) -> Holding:
    """The leanest-needed holding that fits: the full plan if it fits both memories, else lean,
    else lean with the judge's references and outputs on the host, else that, tight; else, for a
    reference whose rows may be cut (`rows()`: how many; asked only then), that with its
    references made in 2, 4, ... slices of rows; else the tight holding that draws its sets again
    where read, whole, then in 2, 4, ... slices; else (`copies_on_host`, a CUDA worker) each of
    these tight ones in turn with the worker's input copies on the host (whichever fits first, in
    that order). When none does: the fewest slices that fit the memory the reference is made in,
    if any, else the tight holding, for `fits` to name."""
    def fit(hold):
        fp = footprint(size, hold, plan, judge_device)
        return (not device_bytes or fp.device <= HEADROOM * device_bytes,
                not host_bytes or fp.host <= HEADROOM * host_bytes)
    for hold in HOLDINGS:
        if all(fit(hold)):
            return hold
    batch = functools.cache(lambda: rows() if rows is not None else 1)
    made_fits = None
    for leaner in _leaner(hold, batch, copies_on_host):
        fits_device, fits_host = fit(leaner)
        if fits_device and fits_host:
            return leaner
        if made_fits is None and leaner.reference_slices > 1 and (fits_device if judge_device else fits_host):
            made_fits = leaner
    return made_fits or hold


def _leaner(tight: Holding, batch, copies_on_host: bool):
    """The holdings past the tight one, in the order `holding` tries them."""
    redrawn = dataclasses.replace(tight, redraw_sets=True)
    tries = [*_sliced(tight, batch), redrawn, *_sliced(redrawn, batch)]
    yield from tries
    if copies_on_host:
        for hold in [tight, *tries]:
            yield dataclasses.replace(hold, copies_on_host=True)


def _sliced(hold: Holding, batch):
    """`hold` with its references made in 2, 4, ... slices of rows, up to one a row of `batch()`
    (asked once, at the first)."""
    rows, k = batch(), 2
    while k < 2 * rows:
        yield dataclasses.replace(hold, reference_slices=min(k, rows))
        k *= 2


# the problem, the holding and the memories as `holding` takes them, and the rows it may be cut into
def with_sets_on_device(size: ProblemSize, hold: Holding, device_bytes: int | None, host_bytes: int | None,
                        plan: PlanCounts = PlanCounts(), judge_device: bool = True, rows=None) -> Holding:
    """`hold` with the judge's input sets kept on the device, where that still fits the device,
    else the full plan made lean for it (a lean vet on the device costs less than a full one whose
    sets each cross the host twice), else, for a reference whose rows may be cut (`rows()`: how
    many; asked only then), `hold` with its references made in 2, 4, ... slices of rows, else
    `hold`. Never judged on the host for it."""
    def fits_with(base):
        fp = footprint(size, dataclasses.replace(base, sets_on_device=True), plan, judge_device)
        return bool(device_bytes) and fp.device <= HEADROOM * device_bytes and \
            (not host_bytes or fp.host <= HEADROOM * host_bytes)

    tries = [hold] + ([Holding(lean=True, reference_slices=hold.reference_slices)] if not hold.lean else [])
    for base in tries:
        if fits_with(base):
            return dataclasses.replace(base, sets_on_device=True)
    if rows is None or not hold.lean or not device_bytes:
        return hold
    for sliced in _sliced(hold, rows):
        if sliced.reference_slices > hold.reference_slices and fits_with(sliced):
            return dataclasses.replace(sliced, sets_on_device=True)
    return hold


def fits(size: ProblemSize, memory_bytes: int | None, what: str = "the device's", hold: Holding = Holding(),
         judge_device: bool = True) -> str | None:
    """None if a vet of `size` under `hold` fits a device of `memory_bytes`, else why not, in one line."""
    if not memory_bytes:
        return None
    return _short(footprint(size, hold, judge_device=judge_device).device, memory_bytes, "device", what, size, hold)


def host_fits(size: ProblemSize, memory_bytes: int | None, hold: Holding = Holding(), judge_device: bool = True) -> str | None:
    """As `fits`, for the host's memory (the judge's input sets, and its references when judged
    there), held to HEADROOM of it: the host also holds the system, the worker's own host memory
    and the judge's transients inside a step (its resident peak read 1.1-1.4x the plan's host
    footprint on an H100's host), and a judge the kernel kills for memory gives no verdict at all."""
    if not memory_bytes:
        return None
    limit = int(HEADROOM * memory_bytes)
    return _short(footprint(size, hold, judge_device=judge_device).host, limit, "host",
                  f"the {HEADROOM:.0%} of the host's {_gib(memory_bytes)} a vet may plan to fill,", size, hold)


def _short(need: int, memory_bytes: int, kind: str, what: str, size: ProblemSize, hold: Holding) -> str | None:
    """None if `need` bytes fit in `memory_bytes`, else the one line that says they do not."""
    if need <= memory_bytes:
        return None
    return (f"the problem needs about {_gib(need)} of {kind} memory ({hold.describe()} plan; {size.describe()}), "
            f"more than {what} {_gib(memory_bytes)}")


# The most ops a shape-only run may dispatch. Each costs about 0.1 ms of the judge's CPU on the
# meta device, where a recurrent layer without a meta kernel unrolls step by step: KernelBench's
# LSTMs and GRUs dispatch 46,000-98,000 (5-12 s on this project's 2-core CPU), every other of its
# 250 problems at most 1,793. Cut at 5,000: 0.7 s.
META_OPS_MAX = 5_000


class _TooLong(Exception):
    pass


def shape_only(model: torch.nn.Module, inputs: list) -> ProblemSize | None:
    """The problem's size from one run of a copy of `model` on the meta device (shapes propagate,
    nothing is computed or allocated); None where an op has no meta kernel, or where the run
    passes META_OPS_MAX ops (the judge then measures after its first reference, as there)."""
    import copy
    try:   # a copy whose weights are meta tensors (no data copied), so that the forward changes nothing of the model
        tensors = [*model.parameters(), *model.buffers()]
        meta = copy.deepcopy(model, memo={id(t): _meta_like(t) for t in tensors})
        args = tuple(x.to("meta") if isinstance(x, torch.Tensor) else x for x in inputs)
        settle(_OpBudget)
        with torch.no_grad(), _OpBudget(META_OPS_MAX) as run:
            out = meta(*args)
    except Exception:  # noqa: BLE001 - no meta kernel, or too long a run: measured after the first reference
        return None
    leaves = _leaves(out)
    if not leaves and not isinstance(out, (bool, int, float)):
        return None
    size = measure(inputs, None, model)
    return dataclasses.replace(size, output_elements=sum(t.numel() for t in leaves) or 1,
                               output_itemsize=max((t.element_size() for t in leaves), default=4),
                               forward_bytes64=run.peak64)


def host_memory() -> int | None:
    """The host's physical memory in bytes (None where unknown)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


@functools.cache
def _malloc_trim():
    """glibc's malloc_trim, or None where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def give_back_host() -> None:
    """The host memory the C allocator keeps of what was freed goes back to the OS. A lean judge's
    comparisons free temporaries of a few MiB, below the size the allocator maps and unmaps on its
    own, and it kept them: up to 4 outputs' worth through a vet at 256 MiB an output on the CPU
    (bench/results/2026-12-06-cpu/), memory the plan does not count. Called where the judge's own
    work ends, outside the requests its clock brackets."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


class LiveBytes(TorchDispatchMode):
    """Bytes of the tensors ops create that are still alive, and their peak, as they are and as
    float64 would hold them (`peak64`: what the judge's float64 reference needs beside its inputs
    and weights). A view adds nothing (its base holds the storage), an in-place op's result is its
    input. A reduction to one number holds its inputs' size in intermediates that its output never
    shows (KernelBench's MSE loss: 16 GiB in float64 for a scalar), and so does a loss that is one
    op: aten makes its elementwise loss whole, then reduces it (`_reduced_loss`)."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = self.live64 = self.peak64 = 0
        self._seen: set[int] = set()   # ids of live tensors counted (a tensor's == is elementwise: no WeakSet)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self._count(out, _reduced_loss(func, args, kwargs))
        return out

    def _count(self, out, hidden: tuple[int, int] = (0, 0)) -> None:
        """`hidden`: bytes (as they are, in float64) the op held inside it beside its outputs."""
        for t in _leaves(out):
            if id(t) not in self._seen and not t._is_view():
                self._seen.add(id(t))
                n = t.numel() * t.element_size()
                n64 = t.numel() * 8 if t.is_floating_point() else n
                self.live += n
                self.live64 += n64
                weakref.finalize(t, self._free, id(t), n, n64)
        self.peak = max(self.peak, self.live + hidden[0])
        self.peak64 = max(self.peak64, self.live64 + hidden[1])

    def _free(self, ident: int, n: int, n64: int) -> None:
        self._seen.discard(ident)
        self.live -= n
        self.live64 -= n64


class _OpBudget(LiveBytes):
    """LiveBytes that raises _TooLong at the op past `most`."""

    def __init__(self, most: int):
        super().__init__()
        self.left = most

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.left -= 1
        if self.left < 0:
            raise _TooLong()
        out = func(*args, **(kwargs or {}))
        # not through LiveBytes' own (wrapped) dispatch: that would import Dynamo
        self._count(out, _reduced_loss(func, args, kwargs))
        return out


def _reduced_loss(func, args, kwargs) -> tuple[int, int]:
    """Bytes (as they are, in float64) of the elementwise loss an op with a `reduction` argument
    that reduces makes inside it, bounded by its largest floating input's size: aten's losses
    (smooth_l1_loss, huber_loss, binary_cross_entropy, ...) fill such a tensor whole and then reduce
    it, and their output (one number) never shows it. (0, 0) for any other op."""
    schema = getattr(func, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    if "reduction" not in names:
        return 0, 0
    i = names.index("reduction")
    reduction = (kwargs or {}).get("reduction", args[i] if i < len(args) else schema.arguments[i].default_value)
    if not reduction:   # Reduction::None: the elementwise loss is the output, counted as such
        return 0, 0
    floats = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    largest = max(floats, key=lambda t: t.numel(), default=None)
    if largest is None:
        return 0, 0
    return largest.numel() * largest.element_size(), largest.numel() * WIDEST


defer_dynamo(LiveBytes)
defer_dynamo(_OpBudget)   # a judge's first dispatch mode would import Dynamo (and Triton): dispatch_modes


def _meta_like(t: torch.Tensor) -> torch.Tensor:
    meta = t.detach().to("meta")
    return torch.nn.Parameter(meta, t.requires_grad) if isinstance(t, torch.nn.Parameter) else meta


def memories(dev: torch.device) -> tuple[int | None, int | None]:
    """(device memory, host memory) in bytes; None where unknown. A CUDA device's is read from its
    properties (GPU path: the judge only asks when it judges on that device anyway)."""
    if dev.type != "cuda":
        return None, host_memory()
    try:
        return int(torch.cuda.get_device_properties(dev).total_memory), host_memory()
    except Exception:  # noqa: BLE001 - a device the worker will describe (and fail on) itself
        return None, host_memory()


def holding_for(model: torch.nn.Module, inputs: list, dev: torch.device, judge_device: bool,
                sets_on_device: bool = False, rows=None) -> Holding:
    """The holding a vet on `dev` follows (`plan_for`'s)."""
    return plan_for(model, inputs, dev, judge_device, sets_on_device, rows)[0]


def plan_for(model: torch.nn.Module, inputs: list, dev: torch.device, judge_device: bool,
             sets_on_device: bool = False, rows=None) -> tuple[Holding, ProblemSize | None]:
    """The holding a vet on `dev` follows (the judge calls this before any float64 reference), and
    the problem's size from one shape-only run (None where the meta device cannot tell): the full
    plan for a problem that fits it, else the leanest needed. On the CPU the worker's "device" is
    its share of the host (containment.default_mem_bytes: half of it). A small CUDA problem,
    judged on the host, is never lean; a problem whose size the meta device cannot tell keeps the
    full plan. `rows`: how many slices of rows the reference may be made in (`holding`)."""
    if dev.type == "cuda" and not judge_device:
        return Holding(), None
    size = shape_only(model, inputs)
    if size is None:
        return Holding(), None
    device_bytes, host_bytes = memories(dev)
    if dev.type != "cuda":
        device_bytes = host_bytes // 2 if host_bytes else None
    plan = PlanCounts()
    judge_device = judge_device and dev.type == "cuda"
    hold = holding(size, device_bytes, host_bytes, plan, judge_device=judge_device, rows=rows,
                   copies_on_host=dev.type == "cuda")
    if sets_on_device and dev.type == "cuda":   # sets the device drew, kept there if they fit
        hold = with_sets_on_device(size, hold, device_bytes, host_bytes, plan, judge_device, rows=rows)
    return dataclasses.replace(hold, output_itemsize=size.output_itemsize), size


def too_big_for(size: ProblemSize, hold: Holding, dev: torch.device) -> str | None:
    """Why a vet of `size` under `hold` cannot fit a CUDA `dev` and its host, in one line (None:
    it fits), from the shapes alone: asked before the judge makes any float64 reference, so that a
    problem too large for the device is refused in seconds, not after minutes of work it cannot
    use. (The worker's own description of the device is asked again before the reference runs.)"""
    if dev.type != "cuda":
        return None
    device_bytes, host_bytes = memories(dev)
    return fits(size, device_bytes, hold=hold) or host_fits(size, host_bytes, hold=hold)
