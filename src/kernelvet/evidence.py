"""Everything the judge observed about one candidate, as data the checks decide on.

The judge fills it; each check in `checks/` reads it and returns one Finding. Outputs here are
plain tensors the judge rebuilt from bytes: no candidate object ever reaches a check. They live
where the judge compares (`judged_on`) with the float64 references and the inputs: on a CUDA run
the judge's own device, where the checks' arithmetic over large outputs costs milliseconds, not
seconds of host time; the host for a small problem in a judge that has not started CUDA.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from . import crossing
from .devices import Peaks
from .ids import CheckId


# Elements from which an output that came through the host is compared on the vet's accelerator
# (Evidence._comparable): the size from which comparisons run in slices (metrics.CHUNK)
DEVICE_COMPARED_MIN = 1 << 24


@dataclasses.dataclass
class CallRecord:
    phase: str                    # warmup | fresh | determinism | overwrite | timed | unseen | loop
    set_id: int                   # which worker-side input set was passed
    values_of: int                # which drawn values that set held (its reference key)
    meta: dict                    # the worker's observations (untrusted, already schema-checked)
    output: torch.Tensor | None   # rebuilt from bytes


@dataclasses.dataclass
class Evidence:
    device: torch.device
    device_info: dict
    peaks: Peaks | None
    dtype: torch.dtype                      # the output dtype the problem declares (the reference's)
    shape: tuple[int, ...]
    flops: float | None
    bytes_moved: float | None
    inputs: dict[int, list]                 # drawn values, by key (on `judged_on`)
    refs64: dict[int, torch.Tensor]         # float64 reference outputs, by key (on `judged_on`)
    reference_error: float | None           # the reference implementation's own error vs float64
    poison_words: tuple[int, ...]
    enabled: frozenset[CheckId]             # checks whose mechanisms ran (all but the waived ones)
    calls: list[CallRecord] = dataclasses.field(default_factory=list)
    integrity: list[tuple[str, dict]] = dataclasses.field(default_factory=list)
    timing: dict | None = None              # the worker's `timed` body for the seen sets
    unseen_pairs: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # (seen ms, unseen ms)
    # per pair, the longest ms one worker thread waited for a core in its request (judge's witness, sched.py)
    unseen_waits_ms: list[float | None] = dataclasses.field(default_factory=list)
    # host clock: per pair, its control request's (seen ms, first rep ms on a copy of seen values)
    unseen_controls: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    loop: list[dict] | None = None          # judge-clocked loop attempts: n, wall and CPU seconds, reported ms
    clocked_timing: list[dict] = dataclasses.field(default_factory=list)   # timing requests by the judge's clocks
    reference_row_errors: dict = dataclasses.field(default_factory=dict)   # set -> the reference's own, per row
    null_timing: dict | None = None         # the same request with a null call: a rep's own cost
    null_trusted: dict | None = None        # null requests priced while the worker held only the reference
    probe: dict | None = None               # the ordering probe's answer (CUDA)
    audit: dict | None = None               # the profiler's device activities for one call (CUDA)
    kernels_defined: tuple[str, ...] = ()   # kernels the candidate's source defines (Triton, CUDA C++)
    output_arg: int | None = None           # input index that is a problem-supplied output buffer
    aten_ops: frozenset[str] | None = None
    forbidden: frozenset[str] = frozenset()
    source_hits: list = dataclasses.field(default_factory=list)
    overwrite_same_pointers: bool | None = None
    worker_end: str | None = None           # how the worker ended, when it did not end normally
    candidate_error: dict | None = None     # phase, error, traceback when candidate code raised
    reached: set[str] = dataclasses.field(default_factory=set)   # phases the run got through
    # what the checks read of the judge's own work (named, never string keys of `extra`)
    error_floor: float = 0.0                # the error a truly-zero output is normalised by (metrics.error_floor)
    reference_aten_ops: tuple[str, ...] = ()    # the aten ops the reference dispatched in its traced call
    reference_repeat_mismatches: int = 0    # the reference's timed reps whose bits differed from its first rep's
    reference_weights: list | None = None   # the reference's [name, shape, is_parameter] per weight
    candidate_weights: list | None = None   # the candidate's, as its worker described them
    reused_output: str = "allow"            # the policy on a call that returns an earlier output's storage
    unseen_in_place: int = 0                # unseen reps that ran in a seen set's storages
    unanswered_pairs: int = 0               # pair requests whose reply lacked their carried set's output
    unseen_attempts: list = dataclasses.field(default_factory=list)    # earlier runs' unseen pairs
    control_attempts: list = dataclasses.field(default_factory=list)   # earlier runs' control pairs
    # per judged pair, by the judge's clock (s, net of the serving thread's waits): its unseen request,
    # its control request, and the run's null pair request (judge/plan.py, checks/caching.py)
    pair_clocks: list[dict] = dataclasses.field(default_factory=list)
    pair_clock_attempts: list = dataclasses.field(default_factory=list)   # earlier runs' pair clocks
    drain_attempts: list = dataclasses.field(default_factory=list)     # earlier timings' drain clocks
    task_check: dict | None = None          # a GPU MODE task's own checker on one output (evidence only)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)   # the plan's own bookkeeping
    judged_on: torch.device = torch.device("cpu")   # where outputs, references and inputs are compared
    library_policy: Any = None              # checks.library_policy.Policy: what the candidate must write itself
    own_kernels: frozenset[str] = frozenset()   # kernel symbols of the binaries the candidate's builds loaded
    declared_tolerance: float | None = None     # the error bound the problem declares (None: its dtype's)
    # values key -> the reference implementation's own error on that set, made by the judge on first
    # use (judge/own_error.py; None where it cannot be had); None: not offered (a lean holding)
    reference_error_on: Any = None
    # the judge's own key for digests of outputs' bits (bits_digest.py), and the numbers of outputs
    # settled under a lean holding, by digest (compact.settle)
    digest_key: int = dataclasses.field(default_factory=lambda: int.from_bytes(os.urandom(16), "little"), repr=False)
    settled_bits: dict = dataclasses.field(default_factory=dict, repr=False)
    # runs a step of the judge's own, once more where the device ran out after the candidate's worker
    # gave its allocator's free blocks back (set by the judge for the candidate's plan; None: once)
    room_retry: Any = dataclasses.field(default=None, repr=False, compare=False)
    _memo: dict = dataclasses.field(default_factory=dict, repr=False)

    def add_call(self, phase: str, set_id: int, values_of: int, meta: dict, output: torch.Tensor | None) -> None:
        """A call's output (rebuilt from the worker's bytes), moved to where the checks compare.
        Under a lean holding an output compared now and dropped (compact.py) is compared where it
        arrived, slice by slice against its reference: judged on the host, a device output would
        otherwise cross into fresh host memory whole (seconds for KernelBench's 6 GiB outputs). A big
        output that came through the host is compared on the vet's accelerator (`_comparable`)."""
        from . import compact
        lean = output is not None and (self.extra.get("holding") or {}).get("lean")
        settle_now = lean and phase in compact.PHASES
        repeat = lean and phase == "determinism"   # a fresh set's second launch: its bits compared now
        if output is not None:
            output = self.with_room(lambda: self._placed(output, settle_now or repeat, values_of))
        self.calls.append(CallRecord(phase, set_id, values_of, meta, output))
        if settle_now:   # a big problem: compared now, a stand-in kept (its blocks go back to the device
            self.with_room(lambda: compact.settle(self, self.calls[-1]))   # before the next request)
        elif repeat:
            self.with_room(lambda: compact.settle_repeat(self, self.calls[-1]))

    def _placed(self, output: torch.Tensor, settle_now: bool, values_of) -> torch.Tensor:
        compared = self._comparable(output)
        return compared if settle_now else self.kept(output, values_of, compared)

    def kept(self, output: torch.Tensor, values_of, compared: torch.Tensor | None = None) -> torch.Tensor:
        """`output`, which the checks read to the end, where they compare it (`compared`: a copy of it
        on the vet's accelerator, where its comparisons are made)."""
        compared = output if compared is None else compared
        kept = crossing.moved(output, self.judged_on)   # a big one to the host through a pinned stage
        if compared.device.type != "cpu" and self.judged_on.type == "cpu":
            self._compared_where_arrived(compared, kept, values_of)
        return kept

    def with_room(self, step):
        """`step()`, and where the device runs out, once more if the candidate's worker gave its
        allocator's free blocks back (`room_retry`, judge/memory_beside.once_more): an honest worker
        caches the outputs and copies it freed, an H100 worker 50 GiB of them beside a judge
        comparing an 8 GiB output. A second out-of-memory is the judge's to attribute."""
        return step() if self.room_retry is None else self.room_retry(step)

    def _comparable(self, out: torch.Tensor) -> torch.Tensor:
        """`out`, or where it is big, came through the host, and is judged there in a vet on an
        accelerator, a copy of it on the accelerator (through pinned memory), where its comparisons
        against references on the host cost a fraction of the host's own and a repeat of it is a
        digest (compact.py); `out` itself where the device has no room for the copy now."""
        if (out.device.type != "cpu" or self.device.type == "cpu" or self.judged_on.type != "cpu"
                or out.numel() < DEVICE_COMPARED_MIN):
            return out
        try:
            return crossing.moved_whole(out, self.device)
        except torch.OutOfMemoryError:
            return out

    def _compared_where_arrived(self, arrived: torch.Tensor, kept: torch.Tensor, key) -> None:
        """An output that arrived on an accelerator and is kept on the host (a big problem judged
        there): its poison count and its one pass against its reference made on the accelerator,
        the reference crossing to it (metrics.compare), not by the host's cores, and recorded for the
        host copy, which holds the same bits."""
        from . import metrics
        self.poison_counted(arrived, kept)
        ref = self.refs64[key]   # made by now (the checked calls' sets), or made for the checks here
        if not ref.is_floating_point() or ref.shape != kept.shape or ref.device.type == "meta":
            return
        fn = metrics.compare_rows if key in self.reference_row_errors else metrics.compare
        self.known(fn, fn(arrived, ref), kept, ref)

    def poison_counted(self, out: torch.Tensor, kept: torch.Tensor) -> None:
        """`out`'s poison count, recorded for `kept`, which holds the same bits (a copy of it, or
        its stand-in), where unwritten-output and `poisoned` read it."""
        from .metrics import poison_count
        n = poison_count(out, self.poison_words)
        self.known(poison_count, n, kept, self.poison_words)
        self.known(Evidence._poison_count, n, kept)

    def records(self, *phases: str) -> list[CallRecord]:
        return [c for c in self.calls if c.phase in phases and c.output is not None]

    def memo(self, fn, *tensors):
        """fn(*tensors), computed once per run: the checks are evaluated again after each stage of
        the plan (early exit), over the same outputs, which never change once recorded."""
        # A bound method keyed by its function: held in our own memo it would hold us (a cycle,
        # and the device memory of every tensor here kept until the collector runs).
        key = (getattr(fn, "__func__", fn), *map(id, tensors))
        if key not in self._memo:
            self._memo[key] = (fn(*tensors), tensors)   # the tensors kept: their ids stay theirs
        return self._memo[key][0]

    def compared(self, out: torch.Tensor, key):
        """metrics.compare(out, refs64[key]), one pass per pair, the rows kept where the checks
        compare `key`'s rows (the reference's own row errors are known there)."""
        from . import metrics
        ref = self.refs64[key]
        for fn in (metrics.compare_rows, metrics.compare):   # a pass that kept the rows serves either
            kept = self._memo.get((fn, id(out), id(ref)))
            if kept is not None:
                return kept[0]
        rows = key in self.reference_row_errors
        return self.memo(metrics.compare_rows if rows else metrics.compare, out, ref)

    def rel_error(self, out: torch.Tensor, key, floor: float = 0.0) -> float:
        """metrics.rel_error(out, refs64[key], floor), from the pair's one pass where it applies."""
        from . import metrics
        c = self.compared(out, key)
        if c is not None:
            return metrics.rel_error_of(c, floor)
        ref = self.refs64[key]
        return self.memo(metrics.rel_error, out, ref, floor) if floor else self.memo(metrics.rel_error, out, ref)

    def row_errors(self, out: torch.Tensor, key) -> torch.Tensor:
        """metrics.row_errors(out, refs64[key]), from the pair's one pass where it applies."""
        from . import metrics
        c = self.compared(out, key)
        if c is not None and c.rows is not None:
            return metrics.row_errors_of(c)
        return self.memo(metrics.row_errors, out, self.refs64[key])

    def rel_distance(self, a: torch.Tensor, b: torch.Tensor) -> float:
        """metrics.rel_distance(a, b), once per pair; judged on the host in a vet on an accelerator,
        two big tensors (outputs, references) are compared there, each slice crossing to it."""
        from . import metrics
        return self.memo(metrics.rel_distance, a, b, self._distances_on())

    def _distances_on(self) -> torch.device | None:
        """Where a distance between two tensors kept on the host is computed: on the vet's
        accelerator where it judges on the host (each slice crossing to it), else where they are."""
        return self.device if self.device.type != "cpu" and self.judged_on.type == "cpu" else None

    def input_distances(self, out: torch.Tensor, key, skip: int | None = None) -> list[tuple[int, float, float]]:
        """For each floating input of set `key` with as many elements as `out` (but input `skip`,
        the output argument): its index, `out`'s relative distance to it and the reference's; once
        per output and set. The set's tensors are not kept with the numbers: under a holding that
        draws sets again (sizes.Holding.redraw_sets) each read draws the set, and held here, every
        set read would stay beside what the plan counts."""
        from . import metrics
        memo_key = (Evidence.input_distances, id(out), key, skip)
        if memo_key not in self._memo:
            on, ref, got = self._distances_on(), self.refs64[key], []
            for i, x in enumerate(self.inputs[key]):
                if i == skip or not isinstance(x, torch.Tensor) or x.numel() != out.numel() or not x.is_floating_point():
                    continue
                got.append((i, metrics.rel_distance(out, x, on), metrics.rel_distance(ref, x, on)))
            self._memo[memo_key] = (got, (out,))   # the output kept: its id stays its own
        return self._memo[memo_key][0]

    def known(self, fn, value, *tensors) -> None:
        """Record fn(*tensors) as `value`, computed elsewhere (compact.py: on the tensors these stand in for)."""
        self._memo[(getattr(fn, "__func__", fn), *map(id, tensors))] = (value, tensors)

    def poisoned(self, rec: CallRecord) -> int:
        if CheckId.UNWRITTEN_OUTPUT not in self.enabled:
            return 0
        return self.memo(self._poison_count, rec.output)

    def _poison_count(self, out: torch.Tensor) -> int:
        from .metrics import poison_count
        return poison_count(out, self.poison_words)
