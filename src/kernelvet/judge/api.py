"""The judge's entry points: `vet` (one candidate against a problem, to a report) and `prepare`."""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import os
import random
import time

import torch

from .. import checks, devices, metrics, sizes, spares, spawn, weights
from ..checks import library_policy as policies
from ..checks.kernel_audit import defined_kernels
from ..checks.source_scan import forbidden_for_aten_ops, scan_source
from ..draws import AHEAD, Draws
from ..errors import HarnessError, ReferenceOutOfMemory, UsageError
from ..evidence import Evidence
from ..formats import gpumode_check, kernelbench
from ..ids import ALL_CHECKS, AUDIT_MODES, REUSED_OUTPUT_MODES, CheckId
from ..problem import Problem, load_problem, reference64
from ..refcache import PerVet, ReferenceCache, SharedReference, locked_draw, own_sets
from ..report import Report, Status, Timing, verdict_of
from .assembly import _judge_least_ms, _mark_not_run, _vouched_times
from .bodies import _load_body
from . import memory_beside, own_error
from .lean import _moved, borrowed, redraws
from .placement import _judged_on, draws_on, needs_a_gpu
from .plan import Plan
from .policy import _BELOW_DISPATCHER, _library_policy, _parse_allow
from .reference import (_Lazy, _check_inputs_vary, _count_flops, _derived_seed, _min_bytes, _prepared, _run_reference,
                        _within)
from .row_slices import batch_rows, reference64_in_slices
from .settings import LOOP_ATTEMPTS, Settings, UNSEEN_AGAIN, _LOOP, _OVERWRITE, _PROBE, _UNSEEN_AGAIN, _WARMUP
from .versions import _versions


# the API: every choice a vet takes is a keyword, with its default
def vet(candidate: str, problem: Problem | str, *, device: str = "auto", seed: int | None = None,
        timeout: float = 300.0, allow=(), settings: Settings | None = None,
        launcher: spawn.Launcher | None = None, audit: str = "auto", prepare_next: bool = True,
        reference: ReferenceCache | None = None, library_policy: str | None = None, allow_ops=()) -> Report:
    """Vet one candidate file against a problem; return the report (raises only UsageError/HarnessError).

    `audit`: the profiler's kernel audit (CUDA) - `auto` runs it only for a candidate every other
    check passed (0.06-0.09 s per vet on an H200), `always`, or `never`. The library policy
    own-kernels takes its trace whatever `audit` says, after the checked calls, for any candidate
    the cheaper checks have not rejected.
    `prepare_next`: on CUDA, start the next vet's worker as this one ends (its CUDA start-up is
    then off the next vet's clock); a one-off vet (the CLI) has no next.
    `reference`: the problem's reference model, input sets and float64 references, shared with
    the other vets of the same problem (refcache.py); its seed is the vet's secret seed.
    `library_policy`: what the candidate must write itself (checks/library_policy.py): `own-kernels`
    (the default on CUDA), `no-reference-ops` (the default on the CPU) or `off`; `allow_ops` names
    library ops permitted under any level (with the problem file's `ALLOWED_OPS`)."""
    try:
        return _vet(candidate, problem, device=device, seed=seed, timeout=timeout, allow=allow,
                    settings=settings, launcher=launcher, audit=audit, prepare_next=prepare_next,
                    reference=reference, library_policy=library_policy, allow_ops=allow_ops)
    finally:
        if torch.cuda.is_initialized():
            # The references, inputs and outputs the judge compared on the device are garbage now
            # (some in reference cycles of the vet's own objects, which only a collection frees);
            # the allocator's cache would keep their memory from the next candidate's worker.
            gc.collect()
            torch.cuda.empty_cache()


# vet's keywords, as vet hands them on
def _vet(candidate: str, problem: Problem | str, *, device: str, seed: int | None, timeout: float, allow,
         settings: Settings | None, launcher: spawn.Launcher | None, audit: str, prepare_next: bool,
         reference: ReferenceCache | None = None, library_policy: str | None = None, allow_ops=()) -> Report:
    settings = _checked_settings(settings, audit)
    t_start = time.monotonic()
    phases: dict[str, float] = {}
    if reference is not None:   # the problem and its secret seed are the shared reference's
        if seed is not None and seed != reference.seed:
            raise UsageError("a vet with a shared reference takes that reference's seed")
        seed, problem = reference.seed, reference.problem
    prob = problem if isinstance(problem, Problem) else load_problem(problem)
    dev = devices.resolve(device)
    waived = _parse_allow(allow)
    policy, waived = _library_policy(library_policy, dev, allow_ops, prob, waived)
    source = kernelbench.read_source(candidate, "candidate")
    with open(candidate, "rb") as fh:   # the file's bytes, as `sha256sum` sees them (a BOM included)
        source_sha256 = hashlib.sha256(fh.read()).hexdigest()
    entry = prob.candidate_entry(candidate, source)
    if timeout <= 0:
        raise UsageError("--timeout must be positive")

    secret = seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
    keys = _Keys.draw(secret, settings)
    # the never-seen sets this vet draws itself: () without a shared reference
    own_keys = own_sets(reference, keys.seeds, keys.unseen, [*keys.again, keys.loop], source_sha256)

    init = prob.init_inputs()
    launcher = launcher or spawn.shared_launcher()
    v = _Vet(candidate, prob, dev, settings, timeout, keys, reference, launcher, t_start, phases, init, own_keys)
    v.take_worker()
    try:
        v.problem_side(price_nulls=CheckId.TIMERS not in waived)
        v.reference_run()
        v.gather_evidence(source, policy, waived)
        v.run_candidate(entry, waived, audit, prepare_next)
    finally:
        v.finish(prepare_next)
    needs_a_gpu(dev, v.ev.candidate_error, candidate)
    return v.report(source_sha256, waived, policy)


def _checked_settings(settings: Settings | None, audit: str) -> Settings:
    settings = settings or Settings()
    if settings.fresh_sets < 3:
        raise UsageError("at least three independent random inputs are required (fresh_sets >= 3)")
    if settings.reps_per_sync < 1:
        raise UsageError("reps_per_sync must be at least 1")
    if settings.reused_output not in REUSED_OUTPUT_MODES:
        raise UsageError(f"reused_output {settings.reused_output!r}: expected one of {', '.join(REUSED_OUTPUT_MODES)}")
    if audit not in AUDIT_MODES:
        raise UsageError(f"--audit {audit!r}: expected one of {', '.join(AUDIT_MODES)}")
    return settings


@dataclasses.dataclass(frozen=True)
class _Keys:
    """The vet's secrets: every seed drawn from the secret, in one order (`draw`)."""

    secret: int
    rng: random.Random     # drawn on after the keys: the poison
    weight_seed: int
    fresh: list
    unseen: list
    all: list              # the sets every vet may draw: warm-up, fresh, overwrite, probe, unseen
    seeds: dict            # set key -> its seed
    again: list            # unseen sets for re-measuring pairs that said "remembers"
    loop: list             # the judge-clocked loops' never-seen sets

    @classmethod
    def draw(cls, secret: int, settings: Settings) -> _Keys:
        rng = random.Random(secret)
        weight_seed = rng.getrandbits(63)
        fresh = list(range(1, 1 + settings.fresh_sets))
        unseen = list(range(100, 100 + settings.unseen_sets))
        keys = [_WARMUP, *fresh, _OVERWRITE, _PROBE, *unseen]
        key_seeds = {k: rng.getrandbits(63) for k in keys}
        # Unseen inputs for re-measuring pairs that said "remembers" (drawn only if one is needed)
        again = [[_UNSEEN_AGAIN + a * len(unseen) + j for j in range(len(unseen))] for a in range(UNSEEN_AGAIN)]
        key_seeds.update({k: rng.getrandbits(63) for ks in again for k in ks})
        loop_keys = [_LOOP + i for i in range(LOOP_ATTEMPTS)]   # the judge-clocked loops' never-seen sets
        key_seeds.update({k: rng.getrandbits(63) for k in loop_keys})
        return cls(secret, rng, weight_seed, fresh, unseen, keys, key_seeds, again, loop_keys)


@dataclasses.dataclass(eq=False)
class _Vet:
    """One vet's state between its steps, which `_vet` runs in order."""

    candidate: str
    prob: Problem
    dev: torch.device
    settings: Settings
    timeout: float
    keys: _Keys
    reference: ReferenceCache | None
    launcher: spawn.Launcher
    t_start: float
    phases: dict
    init: list
    own_keys: object
    w: object = None
    values: object = None
    shared: SharedReference | None = None
    model: object = None
    state: object = None
    flops: float | None = None
    judged_on: torch.device | None = None
    refs64: object = None
    bytes_moved: float = 0.0
    size: object = None
    floor: float = 0.0
    ref_run: dict = dataclasses.field(default_factory=dict)
    pk: object = None             # the device's peaks, if known
    poison: dict = dataclasses.field(default_factory=dict)
    ev: Evidence | None = None
    output: str = ""
    findings: tuple = ()
    containment: dict = dataclasses.field(default_factory=dict)
    requests: object = None
    draws_on: torch.device | None = None   # the device whose generator draws the sets (placement.draws_on)
    sets_kept: bool = False   # and they stay there (sizes.Holding.sets_on_device)
    price_nulls: bool = True   # the null requests' trusted prices are needed (for `timers`)
    ran_before: dict | None = None   # the reference's run in the problem's first vet, if this vet reuses it

    def take_worker(self) -> None:
        # One worker runs the reference first, then the candidate: one process start-up, the same
        # clocks for both (a later vet of a shared problem: the candidate alone). It starts now, so its CUDA start-up overlaps the float64 references below;
        # its first answer says what the device is (the judge itself may never touch it).
        self.w = spares.take(self.launcher, str(self.dev), self.settings.flush_factor,
                             time.monotonic() + max(self.timeout, 120.0))
        self.values = None
        reference = self.reference
        # made by an earlier vet of this problem, if any
        self.shared = reference.get(self.dev) if reference is not None else None

    def problem_side(self, price_nulls: bool = True) -> None:
        """The reference model and its fresh weights, loaded into the worker (unless an earlier
        vet of the problem ran it: `_ran_before`); the input sets and their float64 references
        (shared with the problem's other vets, where a reference is); the limits every reply must keep."""
        prob, dev, settings, keys, shared, reference = \
            self.prob, self.dev, self.settings, self.keys, self.shared, self.reference
        self.price_nulls = price_nulls
        self.ran_before = _ran_before(shared, price_nulls)
        w, init, weight_seed, fresh, key_seeds = self.w, self.init, keys.weight_seed, keys.fresh, keys.seeds
        model = prob.build_model(init, weight_seed) if shared is None else shared.model
        # Weights are secret inputs: fresh values from the secret seed, the same for the reference
        # in the worker, the judge's float64 references and the candidate (weights.py); a shared
        # reference's were drawn once, by its first vet, under the same seed.
        state = weights.redraw(model, _derived_seed(keys.secret, "weights")) if shared is None else shared.weights
        # The reference is trusted: no settle wait after its calls (nothing to catch finishing late).
        if self.ran_before is None:
            body, blobs = _load_body({"kind": "reference", "spec": w.readable_spec(prob.spec)}, dev, weight_seed,
                                     init, {"word": 0, "width": 1, "malloc_byte": 0}, False,
                                     dataclasses.replace(settings, settle_s=0.0), 0, prob.output_arg, state,
                                     whole=weights.whole_state(model, state))
            w.send_only("load", body, blobs)
        # Input sets are drawn a few ahead of use, on a thread (see draws.py), and their float64
        # references made when first used (each set from its own seed, so the order does not
        # matter): a candidate rejected by the checked calls never costs the later sets.
        on = self.draws_on = draws_on(prob, dev) if shared is None else shared.draws_on
        # Sets the device draws stay there where the plan still fits the device with them
        keep = self.sets_kept = (on is not None and _sets_fit_on(on, model, prob)) if shared is None \
            else shared.sets_kept
        draw = (lambda k: prob.draw_inputs(key_seeds[k], on, keep)) if reference is None else \
            (lambda k: locked_draw(prob, key_seeds[k], on, keep))
        # (none drawn ahead where the device draws them, until the holding says there is room:
        # a big set drawn ahead would sit beside the judge's first float64 reference on the device)
        values = self.values = Draws(draw, [k for k in keys.all if k not in self.own_keys],
                                     ahead=0 if on is not None else AHEAD) if shared is None \
            else shared.values
        _check_inputs_vary(prob, values[fresh[0]], values[fresh[1]], prob.output_arg)
        flops = prob.flops if prob.flops is not None else (_within(
            self.t_start + self.timeout, self.timeout, prob.path or prob.name, "counting its FLOPs (one float64 call)",
            lambda: _count_flops(model, values[fresh[0]])) if shared is None else shared.flops)
        # Where the checks compare (`_judged_on`): the host for small problems in a judge without
        # CUDA, else the device, where the arithmetic over large outputs costs milliseconds.
        judged_on, first_ref = _judged_on(dev, flops, model, values[_WARMUP]) if shared is None \
            else (shared.judged_on, None)
        # A big problem: what the judge and the worker hold, and where (sizes.py, holding)
        # (the problem's first vet decides it, from one shape-only run; later ones share it)
        sample = values[fresh[0]]
        # (with the sets kept on the device: the holding that fits with them there, as `keep` was decided)
        if shared is None or shared.hold is None:
            hold, shape_size = sizes.plan_for(model, sample, dev, judged_on.type == "cuda", sets_on_device=keep,
                                              rows=lambda: batch_rows(model, sample, dev))
            self.hold = dataclasses.replace(hold, sets_on_device=keep)
            too_big = shape_size is not None and sizes.too_big_for(shape_size, self.hold, dev)
            if too_big:
                raise UsageError(f"{prob.path or prob.name}: {too_big}")
        else:
            self.hold = shared.hold
        self.made_on, judged_on = (dev, torch.device("cpu")) if self.hold.judge_on_host else (judged_on, judged_on)
        self.w.give_back = self.hold.lean and dev.type == "cuda"
        self.w.copies_on_host = self.hold.copies_on_host
        _drawn_ahead(values, self.hold)
        self.model, self.state, self.flops, self.judged_on = model, state, flops, judged_on
        self._references(draw, first_ref)

    def _own_refs(self, make, values) -> _Lazy:
        """This vet's own references of `values`, each made once more after the worker gave its
        cached blocks back where the device ran out beside it (memory_beside.py). A problem's shared
        ones, whose maker outlives this vet's worker, are retried through this vet's view of them."""
        return _Lazy(memory_beside.with_cache_returned(functools.partial(make, values), self.w))

    def _references(self, draw, first_ref) -> None:
        """The float64 references (made now, while the worker starts; within --timeout, as
        everything the judge does for a vet), the bytes one call moves, the size of the problem."""
        prob, model, judged_on, fresh, shared, reference = \
            self.prob, self.model, self.judged_on, self.keys.fresh, self.shared, self.reference
        values = self.values
        # a shared reference's maker lives as long as its problem: it reads the shared sets and
        # refers to nothing of this vet (its outputs, its own sets), each vet's own layer to its own
        make = functools.partial(_reference_of, model, self.made_on, judged_on, self.hold)
        if shared is not None:
            refs64 = shared.refs64
        elif reference is None:   # this vet's alone
            refs64 = self._own_refs(make, values)
        else:                     # the problem's, shared below
            refs64 = _Lazy(functools.partial(make, values))
        if first_ref is not None:
            refs64[_WARMUP] = _moved(first_ref, judged_on, self.hold.reference_dtype())
        if reference is not None and shared is None:   # for the problem's later vets; the cache closes the draws
            shared = self.shared = SharedReference(model, self.values, self.flops, judged_on, refs64, self.state,
                                                 self.draws_on, self.sets_kept, self.hold)
            reference.put(self.dev, shared)
        if reference is not None:   # beside the shared sets, this vet's own never-seen ones
            values = self.values = PerVet(shared.values, _drawn_ahead(Draws(draw, self.own_keys), self.hold),
                                          self.own_keys)
            # a shared reference made again during this vet (a lean holding lets each go with its set)
            # is tried once more after this vet's worker gave its cached blocks back, as its own are
            refs64 = PerVet(shared.refs64, self._own_refs(make, values), self.own_keys,
                            memory_beside.with_cache_returned(shared.refs64.__getitem__, self.w))
        # now, while the worker starts; within --timeout, as everything the judge does for a vet
        _within(self.t_start + self.timeout, self.timeout, prob.path or prob.name, "its float64 references",
                lambda: [refs64[k] for k in (_WARMUP, *fresh)])
        self.bytes_moved = prob.bytes_moved if prob.bytes_moved is not None else _min_bytes(values[fresh[0]],
                                                                                            refs64[fresh[0]])
        self.phases["problem"] = time.monotonic() - self.t_start
        # The limits of every reply follow from the problem: outputs per message at most the
        # timing run's first outputs (one per set it timed) and one more.
        self.size = sizes.measure(values[fresh[0]], refs64[fresh[0]], model)
        if self.hold.output_itemsize:   # the outputs the worker returns, at their own dtype (not float64)
            self.size = dataclasses.replace(self.size, output_itemsize=self.hold.output_itemsize)
        self.floor = metrics.error_floor(values[fresh[0]], refs64[fresh[0]])
        self.w.max_blob_bytes = self.size.message_limit(len(fresh) + len(self.keys.unseen) + 1)
        self.w.room_bytes = self.size.output_elements * self.size.output_itemsize   # a lent room: one output
        self.refs64 = refs64

    def reference_run(self) -> None:
        """The reference, first in the worker (`_run_reference`); or, where the problem's first vet
        on this device ran it, what that run found, beside this worker's own first answer."""
        t0 = time.monotonic()
        prob, shared = self.prob, self.shared
        if self.ran_before is not None:
            self.ref_run = {**self.ran_before, **_prepared(self.w, self.dev, self.settings.flush_factor)}
            if self.ref_run.get("tf32_off"):   # the problem is judged in float32 proper, as its reference ran
                self.w.request("precision", {"tf32": False})
        else:
            self.ref_run = _run_reference(self.w, self.dev, self.values, self.keys.fresh, self.refs64, self.settings,
                                          prob.path or prob.name, self.size, self.floor, max(self.timeout, 120.0),
                                          price_nulls=self.price_nulls, hold=self.hold)
            if shared is not None:   # the worker's description of itself stays this vet's
                shared.ref_run = {k: v for k, v in self.ref_run.items() if k not in _WORKER_OWN}
        self.phases["reference"] = time.monotonic() - t0
        # a spare's: off this vet's clock, unless waited for
        self.phases["worker-device-start"] = self.ref_run["spare_start_s"]

    def gather_evidence(self, source: str, policy, waived) -> None:
        """The evidence the candidate's plan starts from: the device, the references, the poison,
        the forbidden ops and what the source scan found."""
        ref_run, refs64, fresh, dev, judged_on, values = \
            self.ref_run, self.refs64, self.keys.fresh, self.dev, self.judged_on, self.values
        info = ref_run["device_info"]
        pk = self.pk = devices.peaks(info)
        out_dtype = ref_run["dtype"]
        self.poison, poison_words = _poison(self.keys.rng, out_dtype)
        ev = self.ev = Evidence(
            device=dev, device_info=info, peaks=pk, dtype=out_dtype, shape=tuple(refs64[fresh[0]].shape),
            flops=self.flops, bytes_moved=self.bytes_moved, refs64=refs64, judged_on=judged_on,
            inputs=_inputs_seen(values, judged_on, self.hold),
            reference_error=ref_run["error"], poison_words=poison_words, declared_tolerance=self.prob.tolerance,
            enabled=frozenset(c for c in ALL_CHECKS if c not in waived),
        )
        ev.library_policy = policy
        ev.forbidden = policies.forbidden_ops(self.prob.forbidden or ref_run["aten_ops"], policy)
        ev.reference_row_errors = ref_run["row_errors"]
        ev.null_trusted = ref_run["null_trusted"]
        ev.reference_aten_ops = tuple(sorted(ref_run["aten_ops"]))
        ev.reference_repeat_mismatches = ref_run.get("repeat_mismatches", 0)
        try:
            ev.source_hits = scan_source(source, forbidden_for_aten_ops(ev.forbidden) | _BELOW_DISPATCHER
                                         if ev.forbidden else frozenset(), filename=self.candidate)
        except SyntaxError:
            ev.source_hits = []
        ev.kernels_defined = defined_kernels(source)
        ev.output_arg = self.prob.output_arg
        ev.extra["problem_size"] = dataclasses.asdict(self.size)
        ev.extra["message_limit"] = self.w.max_blob_bytes
        ev.error_floor = self.floor
        ev.reference_weights = [[name, list(t.shape), is_param] for name, t, is_param in self.state]
        ev.extra["weights_state"] = self.state
        ev.reused_output = self.settings.reused_output
        ev.extra["holding"] = dataclasses.asdict(self.hold)
        ev.reference_error_on = self._own_errors()

    def _own_errors(self):
        """The reference's own error on any set, made on a check's failure path (own_error.py);
        not for a problem the judge barely holds (a lean holding lets its sets go)."""
        if self.hold.lean or self.hold.reference_slices > 1:
            return None
        model, values, refs64, made_on, floor = self.model, self.values, self.refs64, self.made_on, self.floor
        tf32_off = bool(self.ref_run.get("tf32_off"))
        errors = _Lazy(lambda k: own_error.error_on(model, values[k], refs64[k], made_on, floor, tf32_off))
        errors.update(self.ref_run.get("set_errors") or {})   # the sets it ran on in the worker: known
        return errors

    def run_candidate(self, entry, waived, audit: str, prepare_next: bool = False) -> None:
        keys, ev = self.keys, self.ev
        t0 = time.monotonic()
        self.w.deadline = time.monotonic() + self.timeout
        self.w.charge_requests_only(self.timeout)   # the judge's comparisons are not the candidate's time
        # The next vet's worker starts now, its device start-up beside this candidate's import and
        # checked calls, and is waited for before this vet's clocks; not for a problem the device
        # barely holds (a lean holding), whose next worker starts as this one ends.
        early = prepare_next and not self.hold.lean and spares.start_early(
            self.launcher, str(self.dev), self.settings.flush_factor)
        plan = Plan.of(ev, self.w, self.values, keys.fresh, self.settings, unseen=keys.unseen, again=keys.again,
                       waived=waived, audit_mode=audit, phases=self.phases,
                       before_clocks=self._spare_ready if early else None)
        # the judge's own steps, once more after the worker gave its cache back (a float64 reference
        # made inside one is retried by its own maker: torch's out-of-memory alone here)
        ev.room_retry = functools.partial(memory_beside.once_more, w=self.w, caught=torch.OutOfMemoryError)
        try:
            try:
                self.output = plan.run(self.candidate, entry, self.init, keys.weight_seed, self.poison)
            except spawn.JudgeOverran as exc:
                raise UsageError(f"{self.prob.path or self.prob.name}: the problem itself ran out of time: the "
                                 f"judge's own work on the candidate's outputs (comparing them with the float64 "
                                 f"references) took longer than the --timeout of {self.timeout:g} s (not the "
                                 "candidate's doing; raise --timeout or shrink the problem)") from None
            self.phases["candidate"] = time.monotonic() - t0
            self.findings = ev.with_room(lambda: self._findings(waived))
        except memory_beside.JUDGES_OWN as exc:   # the judge's, beside the candidate's worker
            # what it holds, not what its allocator keeps free; and what it says it holds
            census = memory_beside.worker_account(self.w)
            ev.worker_end = memory_beside.whose(exc, self.dev, self.size, self.hold, census)   # else raised: exit 2
            self.output = self.w.output()
            self.w.kill()   # rejected: its memory back to the judge, for the checks' references
            memory_beside.wait_for_release(self.dev, memory_beside.planned_share(self.size, self.hold))
            self.phases["candidate"] = time.monotonic() - t0
            self.findings = self._findings(waived)
        finally:
            ev.room_retry = None   # the worker's handle is not the report's to keep

    def _findings(self, waived) -> tuple:
        # Before the worker ends and the next one starts: judged on the host, the checks' last
        # arithmetic ran ~0.4 s slower beside a spare's start-up on the H200 (CPU threads contended).
        ev, t0 = self.ev, time.monotonic()
        if self.prob.spec.get("kind") == "gpumode":   # the task's own checker: evidence beside precision only
            ev.task_check = gpumode_check.own_check(self.prob.module, self.prob.spec["skeleton"], ev)
        findings = _mark_not_run(checks.evaluate_all(ev, waived, memory_beside.JUDGES_OWN), ev)
        self.phases["findings"] = time.monotonic() - t0
        return findings

    def _spare_ready(self) -> None:
        t0 = time.monotonic()
        spares.ready(self.launcher)
        self.phases["spare-wait"] = time.monotonic() - t0

    def finish(self, prepare_next: bool) -> None:
        t0 = time.monotonic()
        values, shared, w = self.values, self.shared, self.w
        if values is not None and (shared is None or values is not shared.values):
            values.close()   # a shared reference's draws are its cache's to close
        self.containment = dict(getattr(w, "containment", {}) or {})
        self.requests = w.requests_s()
        spares.after_vet(self.launcher, w, str(self.dev), self.settings.flush_factor, prepare_next)
        self.phases["finish"] = time.monotonic() - t0

    def report(self, source_sha256: str, waived, policy) -> Report:
        ev, dev, ref_run, flops, bytes_moved, phases = \
            self.ev, self.dev, self.ref_run, self.flops, self.bytes_moved, self.phases
        findings = self.findings
        info, out_dtype, pk = ref_run["device_info"], ref_run["dtype"], self.pk
        verdict = verdict_of(findings)
        timing = None
        if ev.timing and ev.timing.get("times_ms"):
            timing = Timing(
                method=("cuda-events-per-rep, queued as do_bench's, L2 flushed"
                        + ("; host-bound: no spin before its reps, timed at the host's pace"
                           if ev.timing.get("host_bound") else "") if dev.type == "cuda"
                        else "host perf_counter per rep"),
                raw_ms=tuple(_vouched_times(ev)), reference_raw_ms=tuple(ref_run["times_ms"]),
                flops=flops, bytes_moved=bytes_moved,
                peak_flops=pk.for_dtype(out_dtype) if pk else None, peak_bytes_per_s=pk.bandwidth if pk else None,
                vouched=any(f.check is CheckId.TIMERS and f.status is Status.PASS for f in findings),
                judge_least_ms=_judge_least_ms(ev))
        phases["total"] = time.monotonic() - self.t_start
        return Report(
            verdict=verdict, findings=findings, timing=timing, problem=self.prob.to_json(),
            candidate=os.path.abspath(self.candidate), candidate_sha256=source_sha256,
            device={**info, "judged_on": str(self.judged_on), "inputs_drawn_on": str(self.draws_on or "cpu"),
                    "sets_kept_on": str(self.draws_on if self.sets_kept else "cpu"), "transfers": self.w.transfers,
                    **_float32_said(ref_run.get("tf32_off"))}, seed=self.keys.secret, versions=_versions(),
            waived=tuple(sorted(waived, key=str)),
            candidate_output=self.output, phases_s=phases, requests_s=self.requests, containment=self.containment,
            library_policy=policy.to_json())


def _reference_of(model, made_on: torch.device, judged_on: torch.device, hold: sizes.Holding, values, k):
    """The float64 reference of set `k` of `values`, made on `made_on` and kept on `judged_on`
    (in slices of rows and in the dtype `hold` says). One planned whole that runs out of memory is
    made in slices after all, where its rows may be cut (row_slices.py)."""
    try:
        slices = hold.reference_slices
        if slices == 1:
            try:
                return _moved(reference64(model, values[k], made_on), judged_on, hold.reference_dtype())
            except ReferenceOutOfMemory as exc:
                said = str(exc)   # the rows probed below, once the failed forward's tensors are let go
            if batch_rows(model, values[k], made_on) < 2:
                raise ReferenceOutOfMemory(said)
            slices = 2
        return reference64_in_slices(model, values[k], made_on, slices, judged_on, hold.reference_dtype())
    except (UsageError, HarnessError):
        raise
    except Exception as exc:
        if sizes.is_out_of_memory(exc):   # beside the forward: moving it, keeping it (the machine's limit)
            raise ReferenceOutOfMemory(f"the float64 reference ran out of memory on {made_on} while kept on "
                                       f"{judged_on} ({type(exc).__name__}: {sizes.device_memory_note(made_on)})") from None
        raise HarnessError(f"the reference failed on its own inputs: {type(exc).__name__}: {exc}") from None


# what _run_reference answers about the worker it ran in, not about the problem
_WORKER_OWN = ("spare_start_s", "device_info")


def _float32_said(tf32_off: dict | None) -> dict:
    """The report's word on a problem judged in float32 proper (judge/reference.py), or nothing."""
    if not tf32_off:
        return {}
    return {"float32": f"cuDNN's TF32 off in the workers: the reference missed float64 by "
                       f"{tf32_off['tf32_error']:.3g} with it, by {tf32_off['error']:.3g} without"}


def _inputs_seen(values, judged_on: torch.device, hold: sizes.Holding):
    """The evidence's view of the input sets, where the checks compare (`identity` reads them):
    kept once made, or, under a holding that draws sets again, drawn for each read and let go."""
    redraw = redraws(hold)

    def make(k):
        return [x.to(judged_on) if isinstance(x, torch.Tensor) else x for x in borrowed(values, k, redraw)]
    return _Lazy(make, keep=not redraw)


def _ran_before(shared: SharedReference | None, price_nulls: bool) -> dict | None:
    """What the reference's run in the problem's first vet on this device found, if it has run
    and priced the null requests where this vet needs their prices."""
    run = shared.ref_run if shared is not None else None
    if run is None or (price_nulls and run.get("null_trusted") is None):
        return None
    return run


def _drawn_ahead(values, hold: sizes.Holding):
    """`values`, its draws started none ahead of use under a tight holding (the host barely holds
    the problem's sets) or a lean one whose sets the device draws and keeps (a draw there costs
    milliseconds, and a set drawn ahead would take the room of a worker's), else draws.AHEAD ahead."""
    if isinstance(values, Draws):
        values.ahead = 0 if hold.tight or hold.lean and hold.sets_on_device else AHEAD
    return values


def _sets_fit_on(dev: torch.device, model, prob: Problem) -> bool:
    """Whether the plan fits `dev` with the judge's input sets kept there (sizes.holding_for, on
    the shapes of one set: decided before the first draw)."""
    shapes = prob.meta_inputs()
    return shapes is not None and sizes.holding_for(model, shapes, dev, True, sets_on_device=True,
                                                    rows=lambda: batch_rows(model, shapes, dev)).sets_on_device


def _poison(rng: random.Random, out_dtype) -> tuple[dict, tuple]:
    """The candidate's poison (what freed and unwritten memory holds), drawn from the secret."""
    poison_rand = rng.getrandbits(64)
    malloc_byte = rng.choice([0x80, 0x01, 0x81, 0x02])
    width = torch.tensor([], dtype=out_dtype).element_size()
    nan_word = metrics.nan_poison_word(out_dtype, poison_rand)
    poison = {"word": nan_word, "width": width, "malloc_byte": malloc_byte}
    poison_words = (nan_word, metrics.repeated_byte_word(~malloc_byte & 0xFF, width))
    return poison, poison_words


def prepare(launcher: spawn.Launcher, device: str = "auto", settings: Settings | None = None) -> None:
    """Get the next vet's worker ready now (CUDA context, flush buffer, cuBLAS and Triton started),
    so that a vet that follows soon pays none of it. A vet does this itself for the vet after it.
    The judge itself starts nothing on the device here."""
    spares.prepare(launcher, str(devices.resolve(device)), (settings or Settings()).flush_factor)
