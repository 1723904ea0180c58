"""The judge: owns the secret seed, the inputs, the float64 reference and the verdict.

It never imports candidate code. It drives a worker through a fixed plan of requests, keeps
what comes back as evidence, and lets the checks decide. The plan, in order:

  reference: load -> inputs -> two traced calls -> timing (then dropped, its memory overwritten)
  candidate: load -> inputs -> warm-up (traced) -> fresh set A -> A again after empty_cache
  (determinism) -> fresh sets B, C -> A overwritten in place (caching) -> ordering probe (CUDA)
  -> kernel audit (CUDA, when the library policy is own-kernels: it decides on the audit's trace, so a
  library call in disguise is rejected before it is timed)
  -> timing on A, B, C (rotating, L2 flushed, outputs verified; bracketed by the judge's clocks,
  and the same request with a null call) -> each unseen set timed once, in a request of its own
  that carries it, paired with a seen rep (again on newly drawn sets where the pairs say
  remembered answers; the timing again where the drain says hidden work) -> N back-to-back calls
  on a never-seen set bracketed by the judge's own clock, and the same N of a null call (timers)
  -> kernel audit under the profiler (CUDA, second tier).

Every set the candidate has not seen travels inside the first request that uses it: nothing
in the worker's memory lets a candidate compute an answer ahead of the call the judge clocks.

The plan stops as soon as a check fails on the evidence so far (Settings.early_exit).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import os
import random
import re
import statistics
import sys
import threading
import time

import torch

from . import checks, codec, devices, metrics, sched, sizes, spares, spawn, weights
from .checks.kernel_audit import defined_kernels
from .checks import attribution, library_policy as policies
from .checks.source_scan import forbidden_for_aten_ops, scan_source
from .checks import caching, streams
from .checks.timers import judge_clock, requests_disagree
from .dispatch_modes import defer_dynamo
from .draws import Draws
from .errors import HarnessError, UsageError
from .evidence import Evidence
from .formats import kernelbench
from .ids import ALL_CHECKS, AUDIT_MODES, REUSED_OUTPUT_MODES, UNWAIVABLE, CheckId, parse_check_id
from .problem import Problem, load_problem, reference64
from .refcache import PerVet, ReferenceCache, SharedReference, locked_draw, own_sets
from .report import Report, Status, Timing, Verdict


@dataclasses.dataclass(frozen=True)
class Settings:
    fresh_sets: int = 3           # independent random inputs checked for correctness (at least 3)
    unseen_sets: int = 5          # inputs the candidate has never seen, timed once each among the seen
    budget_ms: float = 100.0      # timing budget for the seen sets (as do_bench's `rep`)
    min_reps: int = 10
    max_reps: int = 1000
    warmup_calls: int = 3
    warmup_ms: float = 25.0       # and at least this long (as do_bench's warm-up): compile, autotune, clocks
    null_reps: int = 20           # drain-clock baseline reps (CUDA)
    loop_ms: float = 60.0         # how long the judge-clocked loop should run
    settle_s: float = 0.02        # wait before re-reading an output (work finishing after return; work
                                  # finishing later leaves a wrong output when the judge reads it)
    flush_factor: float = spares.FLUSH_FACTOR   # L2 flush buffer, in multiples of the device's L2 (at least 256 MiB)
    early_exit: bool = True       # stop the plan as soon as a check fails (no timing of a rejected candidate)
    reps_per_sync: int = 32       # timed reps between syncs, at most; each sync reads their clocks (CUDA:
                                  # device-wide) and verifies, then frees, their outputs (CPU too)
    reused_output: str = "allow"  # a call returning an earlier output's storage: "allow" (recorded) or "reject"


_WARMUP, _OVERWRITE, _PROBE = 0, 1000, 2000
_UNSEEN_AGAIN = 3000   # first key of the re-measurements' unseen inputs
_LOOP = 4000           # first key of the judge-clocked loops' inputs (never seen before their loop)
LOOP_ATTEMPTS = 3
UNSEEN_AGAIN = 2       # re-measurements of pairs that said "remembers answers", at most
# A CUDA problem this small is judged on the host (float64 references, comparisons) by a judge
# that has not started CUDA: a few milliseconds of host arithmetic per input set, where starting
# the judge's own CUDA context cost a cold `kernelvet check` 0.5-0.9 s on the H200. The 256^3
# GEMM (34 MFLOP, 0.2 M elements) is; 512^3 and a 4096 x 4096 softmax are not.
HOST_JUDGE_FLOPS = 1 << 26
HOST_JUDGE_ELEMENTS = 1 << 20


def host_judges(dev: torch.device, flops: float | None, elements: int | None = None) -> bool:
    """Whether a vet on `dev` is judged on the host: CPU runs always; CUDA runs whose reference
    is known to be small (FLOPs counted or declared; tensor elements of one input set, if known)."""
    if dev.type != "cuda":
        return True
    return flops is not None and flops <= HOST_JUDGE_FLOPS and (elements or 0) <= HOST_JUDGE_ELEMENTS


def warm_judge(device: str = "auto", flops: float | None = None) -> None:
    """The judge's first-use costs where it will judge, paid now: on CUDA the context, cuBLAS's
    handle (the float64 references) and the kernels the checks compare with (CUDA loads each one
    the first time it runs); on the host (a CPU run, or a problem of `flops` small enough to be
    judged there) the host's kernels. The CLI calls this while its launcher starts, `kernelvet
    serve` before it listens; otherwise the first vet pays them. A bad device is the vet's to report."""
    try:
        dev = devices.resolve(device)
    except UsageError:
        return
    if host_judges(dev, flops):
        dev = torch.device("cpu")
    # 256 x 256: sizes past the small-tensor paths (a sort of 64 elements and one of 65536 run
    # different kernels; the H200's cold CLI still paid ~0.15 s in quantile with 8 x 8 here)
    ref = torch.rand(256, 256, device=dev, dtype=torch.float64) + 0.5
    torch.mm(ref, ref)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        out = ref.to(dtype)
        metrics.rel_error(out, ref)
        metrics.ulp_stats(out, ref, dtype)
        metrics.rel_distance(out, ref)
        metrics.same_bits(out, out.clone())
        metrics.poison_count(out, (metrics.nan_poison_word(dtype, 1),))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


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
            # The references, inputs and outputs the judge compared on the device are garbage now;
            # the allocator's cache would keep their memory from the next candidate's worker.
            torch.cuda.empty_cache()


def _vet(candidate: str, problem: Problem | str, *, device: str, seed: int | None, timeout: float, allow,
         settings: Settings | None, launcher: spawn.Launcher | None, audit: str, prepare_next: bool,
         reference: ReferenceCache | None = None, library_policy: str | None = None, allow_ops=()) -> Report:
    settings = settings or Settings()
    if settings.fresh_sets < 3:
        raise UsageError("at least three independent random inputs are required (fresh_sets >= 3)")
    if settings.reps_per_sync < 1:
        raise UsageError("reps_per_sync must be at least 1")
    if settings.reused_output not in REUSED_OUTPUT_MODES:
        raise UsageError(f"reused_output {settings.reused_output!r}: expected one of {', '.join(REUSED_OUTPUT_MODES)}")
    if audit not in AUDIT_MODES:
        raise UsageError(f"--audit {audit!r}: expected one of {', '.join(AUDIT_MODES)}")
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
    entry = kernelbench.candidate_entry(candidate, source)
    if timeout <= 0:
        raise UsageError("--timeout must be positive")

    secret = seed if seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
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
    own_keys = own_sets(reference, key_seeds, unseen, [*again, loop_keys], source_sha256)   # () without a shared reference

    init = prob.init_inputs()
    launcher = launcher or spawn.shared_launcher()

    # One worker runs the reference first, then the candidate: one process start-up, the same
    # clocks for both. It starts now, so its CUDA start-up overlaps the float64 references below;
    # its first answer says what the device is (the judge itself may never touch it).
    w = spares.take(launcher, str(dev), settings.flush_factor, time.monotonic() + max(timeout, 120.0))
    values = None
    shared = reference.get(dev) if reference is not None else None   # made by an earlier vet of this problem
    try:
        model = prob.build_model(init, weight_seed) if shared is None else shared.model
        # Weights are secret inputs: fresh values from the secret seed, the same for the reference
        # in the worker, the judge's float64 references and the candidate (weights.py); a shared
        # reference's were drawn once, by its first vet, under the same seed.
        state = weights.redraw(model, _derived_seed(secret, "weights")) if shared is None else shared.weights
        # The reference is trusted: no settle wait after its calls (nothing to catch finishing late).
        body, blobs = _load_body({"kind": "reference", "spec": w.readable_spec(prob.spec)}, dev, weight_seed, init,
                                 {"word": 0, "width": 1, "malloc_byte": 0}, False,
                                 dataclasses.replace(settings, settle_s=0.0), 0, prob.output_arg, state)
        w.send_only("load", body, blobs)
        # Input sets are drawn a few ahead of use, on a thread (see draws.py), and their float64
        # references made when first used (each set from its own seed, so the order does not
        # matter): a candidate rejected by the checked calls never costs the later sets.
        draw = (lambda k: prob.draw_inputs(key_seeds[k])) if reference is None else \
            (lambda k: locked_draw(prob, key_seeds[k]))
        values = Draws(draw, [k for k in keys if k not in own_keys]) if shared is None else shared.values
        _check_inputs_vary(prob, values[fresh[0]], values[fresh[1]], prob.output_arg)
        flops = prob.flops if prob.flops is not None else (_within(
            t_start + timeout, timeout, prob.path or prob.name, "counting its FLOPs (one float64 call)",
            lambda: _count_flops(model, values[fresh[0]])) if shared is None else shared.flops)
        # Where the checks compare (`_judged_on`): the host for small problems in a judge without
        # CUDA, else the device, where the arithmetic over large outputs costs milliseconds.
        judged_on, first_ref = _judged_on(dev, flops, model, values[_WARMUP]) if shared is None \
            else (shared.judged_on, None)

        def reference_of(k):
            try:
                return reference64(model, values[k], judged_on)
            except (UsageError, HarnessError):
                raise
            except Exception as exc:
                raise HarnessError(f"the reference failed on its own inputs: {type(exc).__name__}: {exc}") from None

        refs64 = _Lazy(reference_of) if shared is None else shared.refs64
        if first_ref is not None:
            refs64[_WARMUP] = first_ref
        if reference is not None and shared is None:   # for the problem's later vets; the cache closes the draws
            shared = SharedReference(model, values, flops, judged_on, refs64, state)
            reference.put(dev, shared)
        if reference is not None:   # beside the shared sets, this vet's own never-seen ones
            values = PerVet(shared.values, Draws(draw, own_keys), own_keys)
            refs64 = PerVet(shared.refs64, _Lazy(reference_of), own_keys)
        # now, while the worker starts; within --timeout, as everything the judge does for a vet
        _within(t_start + timeout, timeout, prob.path or prob.name, "its float64 references",
                lambda: [refs64[k] for k in (_WARMUP, *fresh)])
        bytes_moved = prob.bytes_moved if prob.bytes_moved is not None else _min_bytes(values[fresh[0]],
                                                                                       refs64[fresh[0]])
        phases["problem"] = time.monotonic() - t_start
        # The limits of every reply follow from the problem: outputs per message at most the
        # timing run's first outputs (one per set it timed) and one more.
        size = sizes.measure(values[fresh[0]], refs64[fresh[0]], model)
        floor = metrics.error_floor(values[fresh[0]], refs64[fresh[0]])
        w.max_blob_bytes = size.message_limit(len(fresh) + len(unseen) + 1)

        t0 = time.monotonic()
        ref_run = _run_reference(w, dev, values, fresh, refs64, settings, prob.path or prob.name, size, floor,
                                 max(timeout, 120.0))
        phases["reference"] = time.monotonic() - t0
        phases["worker-device-start"] = ref_run["spare_start_s"]   # a spare's: off this vet's clock, unless waited for
        info = ref_run["device_info"]
        pk = devices.peaks(info)
        out_dtype = ref_run["dtype"]

        poison_rand = rng.getrandbits(64)
        malloc_byte = rng.choice([0x80, 0x01, 0x81, 0x02])
        width = torch.tensor([], dtype=out_dtype).element_size()
        nan_word = metrics.nan_poison_word(out_dtype, poison_rand)
        poison = {"word": nan_word, "width": width, "malloc_byte": malloc_byte}
        poison_words = (nan_word, metrics.repeated_byte_word(~malloc_byte & 0xFF, width))

        ev = Evidence(
            device=dev, device_info=info, peaks=pk, dtype=out_dtype, shape=tuple(refs64[fresh[0]].shape),
            flops=flops, bytes_moved=bytes_moved, refs64=refs64, judged_on=judged_on,
            inputs=_Lazy(lambda k: [x.to(judged_on) if isinstance(x, torch.Tensor) else x for x in values[k]]),
            reference_error=ref_run["error"], poison_words=poison_words,
            enabled=frozenset(c for c in ALL_CHECKS if c not in waived),
        )
        ev.library_policy = policy
        ev.forbidden = policies.forbidden_ops(prob.forbidden or ref_run["aten_ops"], policy)
        ev.reference_row_errors = ref_run["row_errors"]
        ev.extra["reference_aten_ops"] = sorted(ref_run["aten_ops"])
        try:
            ev.source_hits = scan_source(source, forbidden_for_aten_ops(ev.forbidden) | _BELOW_DISPATCHER
                                         if ev.forbidden else frozenset(), filename=candidate)
        except SyntaxError:
            ev.source_hits = []
        ev.kernels_defined = defined_kernels(source)
        ev.output_arg = prob.output_arg
        ev.extra["problem_size"] = dataclasses.asdict(size)
        ev.extra["message_limit"] = w.max_blob_bytes
        ev.extra["error_floor"] = floor
        ev.extra["reference_weights"] = [[name, list(t.shape), is_param] for name, t, is_param in state]
        ev.extra["weights_state"] = state
        ev.extra["reused_output"] = settings.reused_output

        t0 = time.monotonic()
        w.deadline = time.monotonic() + timeout
        output = _run_candidate(ev, w, candidate, entry, init, weight_seed, values, fresh, unseen, settings,
                                poison, waived, audit, phases=phases, again=again)
        phases["candidate"] = time.monotonic() - t0
        # Before the worker ends and the next one starts: judged on the host, the checks' last
        # arithmetic ran ~0.4 s slower beside a spare's start-up on the H200 (CPU threads contended).
        t0 = time.monotonic()
        findings = _mark_not_run(checks.evaluate_all(ev, waived), ev)
        phases["findings"] = time.monotonic() - t0
    finally:
        t0 = time.monotonic()
        if values is not None and (shared is None or values is not shared.values):
            values.close()   # a shared reference's draws are its cache's to close
        containment = dict(getattr(w, "containment", {}) or {})
        requests = w.requests_s()
        spares.after_vet(launcher, w, str(dev), settings.flush_factor, prepare_next)
        phases["finish"] = time.monotonic() - t0

    failed = [f for f in findings if f.status is Status.FAIL]
    verdict = Verdict.REJECT if failed else Verdict.PASS
    timing = None
    if ev.timing and ev.timing.get("times_ms"):
        timing = Timing(
            method=("cuda-events-per-rep, queued as do_bench's, L2 flushed" if dev.type == "cuda"
                    else "host perf_counter per rep"),
            raw_ms=tuple(_vouched_times(ev)), reference_raw_ms=tuple(ref_run["times_ms"]),
            flops=flops, bytes_moved=bytes_moved,
            peak_flops=pk.for_dtype(out_dtype) if pk else None, peak_bytes_per_s=pk.bandwidth if pk else None)
    phases["total"] = time.monotonic() - t_start
    return Report(
        verdict=verdict, findings=findings, timing=timing, problem=prob.to_json(),
        candidate=os.path.abspath(candidate), candidate_sha256=source_sha256,
        device={**info, "judged_on": str(judged_on)}, seed=secret, versions=_versions(),
        waived=tuple(sorted(waived, key=str)),
        candidate_output=output, phases_s=phases, requests_s=requests, containment=containment,
        library_policy=policy.to_json())


def _judged_on(dev: torch.device, flops: float | None, model, sample: list):
    """Where the checks compare: the host for a CPU run, and for a small problem (`host_judges`)
    whose reference runs there, if this process has not started CUDA (a judge that has, a warm
    API loop or `kernelvet serve`, compares on the device: 0.85 s a warm 256^3 vet on the H200
    against 0.91 s on the host); else `dev`. With the float64 reference of `sample`, if made here."""
    cpu = torch.device("cpu")
    if dev.type != "cuda":
        return cpu, None
    if torch.cuda.is_initialized() or not host_judges(
            dev, flops, sum(x.numel() for x in sample if isinstance(x, torch.Tensor))):
        return dev, None
    try:   # a reference that only runs on the device (it moves its inputs there itself) is judged there
        return cpu, reference64(model, sample, cpu)
    except Exception:  # noqa: BLE001 - the device's run of it reports whatever is wrong with it
        return dev, None


def prepare(launcher: spawn.Launcher, device: str = "auto", settings: Settings | None = None) -> None:
    """Get the next vet's worker ready now (CUDA context, flush buffer, cuBLAS and Triton started),
    so that a vet that follows soon pays none of it. A vet does this itself for the vet after it.
    The judge itself starts nothing on the device here."""
    spares.prepare(launcher, str(devices.resolve(device)), (settings or Settings()).flush_factor)


def _mark_not_run(findings: list, ev: Evidence) -> tuple:
    """After an early stop, a check left without evidence says why it has none."""
    stopped = ev.extra.get("stopped_after")
    if not stopped:
        return tuple(findings)
    return tuple(dataclasses.replace(f, summary=f"not run: kernelvet stopped early, after {stopped} had "
                                     f"rejected the candidate at {ev.extra['stopped_at']}")
                 if f.status is Status.SKIP and f.evidence.get("not_reached") else f for f in findings)


def _vouched_times(ev: Evidence) -> list[float]:
    """The reported times are those the judge's clock agreed with (a re-measurement, if the first
    disagreed), so that a candidate cannot report one run and be vouched for by another."""
    for attempt in ev.loop or []:
        if judge_clock(attempt, ev.device.type)["agrees"]:
            return attempt["times_ms"]
    return ev.timing["times_ms"]


def _parse_allow(allow) -> frozenset[CheckId]:
    out = set()
    for item in allow:
        try:
            cid = item if isinstance(item, CheckId) else parse_check_id(str(item))
        except ValueError as exc:
            raise UsageError(f"--allow: {exc}") from None
        if cid in UNWAIVABLE:
            raise UsageError(f"--allow {cid}: this check cannot be waived")
        out.add(cid)
    return frozenset(out)


def _check_inputs_vary(prob: Problem, a: list, b: list, output_arg: int | None) -> None:
    ta = [x for i, x in enumerate(a) if isinstance(x, torch.Tensor) and x.is_floating_point() and i != output_arg]
    tb = [x for i, x in enumerate(b) if isinstance(x, torch.Tensor) and x.is_floating_point() and i != output_arg]
    if ta and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(ta, tb)):
        raise UsageError(f"{prob.path or prob.name}: get_inputs() returned the same values under two different "
                         "seeds; inputs must be drawn from torch's random generator")


def _encode_set(vals: list) -> tuple[list, list]:
    layout, blobs = [], []
    for v in vals:
        if isinstance(v, torch.Tensor):
            layout.append({"t": len(blobs)})
            blobs.append(codec.to_blob(v))
        else:
            layout.append({"v": v})
    return layout, blobs


def _decode_output(msg) -> torch.Tensor | None:
    return codec.from_blob(msg.tensors[0]) if msg.tensors else None


def _load_body(target: dict, dev, weight_seed, init, poison, paint, settings, out_nbytes, output_arg=None,
               state=()):
    layout, blobs = _encode_set(init)
    body = {"target": target, "device": str(dev), "weight_seed": weight_seed, "init": layout,
            "poison": poison, "paint": paint, "settle_s": settings.settle_s, "out_nbytes": out_nbytes,
            "output_arg": output_arg}
    if state:   # the fresh weights, as (name, blob index) after the init tensors
        body["state"] = [{"name": name, "t": len(blobs) + i} for i, (name, _t, _p) in enumerate(state)]
        blobs = blobs + [codec.to_blob(t) for _n, t, _p in state]
    return body, blobs


def _derived_seed(secret: int, what: str) -> int:
    """A seed for `what`, from the secret, independent of the draws that key the input sets."""
    return int.from_bytes(hashlib.sha256(f"{what}:{secret}".encode()).digest()[:8], "little") >> 1


class _Lazy(dict):
    """A dict whose missing keys are made by `make(key)` on first use, then kept."""

    def __init__(self, make):
        super().__init__()
        self._make = make

    def __missing__(self, key):
        value = self[key] = self._make(key)
        return value


def _time_body(sets, settings: Settings, reps=None, warmup=None, budget_ms=None, null_reps=None,
               unseen=()) -> dict:
    return {"sets": sets, "unseen": list(unseen),
            "warmup_ms": settings.warmup_ms, "reps": reps or settings.max_reps,
            "min_reps": min(reps or settings.min_reps, settings.min_reps),
            "budget_ms": settings.budget_ms if budget_ms is None else budget_ms,
            "warmup": settings.warmup_calls if warmup is None else warmup,
            "null_reps": settings.null_reps if null_reps is None else null_reps,
            "reps_per_sync": settings.reps_per_sync}


def _run_reference(w, dev, values, fresh, refs64, settings: Settings, name: str,
                   size: "sizes.ProblemSize | None" = None, floor: float = 0.0, timeout: float = 0.0) -> dict:
    """The reference implementation, first in the worker: output dtype, its own error, its timing,
    its ops; and the worker's description of the device, from its `prepared` answer. A problem
    that cannot fit the device (`size`) is refused before any of it runs there."""
    prepared = _prepared(w, dev, settings.flush_factor)
    if size is not None:
        # a CUDA device's memory; on the CPU, the data memory the worker is limited to
        limit = ((getattr(w, "containment", None) or {}).get("limits") or {}).get("mem_bytes")
        memory = prepared["device_info"].get("memory_bytes")
        too_big = (sizes.fits(size, memory) if memory else
                   sizes.fits(size, limit, "the worker's memory limit of"))
        if too_big:
            raise UsageError(f"{name}: {too_big}")
    try:
        w.request(None)   # the `load` sent before the float64 references were computed
        for k in fresh:
            layout, blobs = _encode_set(values[k])
            w.request("inputs", {"set": k, "layout": layout}, blobs)
        out = _decode_output(w.request("call", {"set": fresh[0], "trace": True}))
        traced = w.request("call", {"set": fresh[1], "trace": True})
        timed = w.request("time", _time_body(fresh, settings, null_reps=0))
    except (spawn.WorkerEnded, spawn.CandidateRaised) as exc:
        if isinstance(exc, spawn.WorkerEnded) and "timed out" in str(exc):
            raise _problem_timed_out(name, timeout, exc) from None
        if size is not None and isinstance(exc, spawn.CandidateRaised) and _says_out_of_memory(exc.error):
            raise UsageError(f"{name}: the reference ran out of memory on {dev} ({size.describe()}); "
                             "the problem is too large for this device") from None
        raise HarnessError(f"{name}: the reference implementation failed in its worker: {exc}. "
                           f"{w.output()[-500:]}") from None
    if out is None:
        raise HarnessError(f"{name}: the reference Model returned a {traced.body.get('type')}, not a tensor")
    second = _decode_output(traced)
    errors = [metrics.rel_error(out, refs64[fresh[0]], floor), metrics.rel_error(second, refs64[fresh[1]], floor)]
    rows = {}
    if out.dtype.is_floating_point and second is not None and second.shape == out.shape == refs64[fresh[0]].shape:
        rows = {fresh[0]: metrics.row_errors(out, refs64[fresh[0]]), fresh[1]: metrics.row_errors(second, refs64[fresh[1]])}
    if out.dtype.is_floating_point and max(errors) > 10 * metrics.TOLERANCE.get(out.dtype, 1.0):
        raise HarnessError(f"{name}: the reference implementation itself misses its float64 result by {max(errors):.3g} "
                           f"(relative); the problem is ill-conditioned or nondeterministic. {w.output()[-500:]}")
    ops = set(traced.body.get("aten_ops", []))
    return {"dtype": out.dtype, "error": max(errors), "times_ms": timed.body["times_ms"], "aten_ops": ops,
            "row_errors": rows, **prepared}


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


def _prepared(w, dev, flush_factor: float) -> dict:
    """The worker's first answer: how long it took to start the device (mostly before this vet,
    for a spare) and what the device is; the flush buffer it holds must be the one that
    description and `flush_factor` call for."""
    try:
        msg = w.request(None)
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


def _early_failure(ev: Evidence, waived) -> str | None:
    """A check that already fails on the evidence so far: the rest of the plan cannot save the
    candidate, so it is not run (an early reject costs a fraction of a full vet)."""
    for f in checks.evaluate_all(ev, waived):
        if f.status is Status.FAIL:
            return str(f.check)
    return None


def _run_candidate(ev: Evidence, w, candidate, entry, init, weight_seed, values, fresh, unseen,
                   settings: Settings, poison, waived, audit, phases, again) -> str:
    on = ev.enabled
    out_nbytes = ev.refs64[fresh[0]].numel() * torch.tensor([], dtype=ev.dtype).element_size()
    max_blob = ev.extra.get("message_limit") or max(1 << 20, 64 * out_nbytes)
    set_values = {k: k for k in [_WARMUP, *fresh, _PROBE, *unseen, *(_LOOP + i for i in range(LOOP_ATTEMPTS))]}
    probe = ev.device.type == "cuda" and CheckId.STREAMS in on
    placed = set()   # sets the worker holds: a set is sent inside the first request that uses it

    def record(phase, set_id, msg):
        ev.integrity.append((phase, msg.body.get("integrity", {})))
        return msg

    def call(phase, set_id, **flags):
        blobs = ()
        if set_id not in placed:
            flags["layout"], blobs = _encode_set(values[set_id])
            placed.add(set_id)
        msg = record(phase, set_id, w.request("call", {"set": set_id, **flags}, blobs, max_blob_bytes=max_blob))
        ev.add_call(phase, set_id, set_values[set_id], msg.body, _decode_output(msg))

    def upload(*keys):
        for k in keys:
            layout, blobs = _encode_set(values[k])
            w.request("inputs", {"set": k, "layout": layout}, blobs)
            placed.add(k)

    def timed_outputs(msg, unseen_keys):
        """A timing run's first output on each set, to the evidence (a check verifies each)."""
        for s, blob in zip(msg.body.get("first_sets", []), msg.tensors):
            ev.add_call("unseen" if int(s) in unseen_keys else "timed", int(s), set_values.get(int(s), int(s)), {},
                        codec.from_blob(blob))

    def stop_if_failed(after: str) -> bool:
        failed = _early_failure(ev, waived) if settings.early_exit else None
        if failed:
            ev.extra["stopped_after"] = failed
            ev.extra["stopped_at"] = after
        return bool(failed)

    try:
        if stop_if_failed("the source scan"):
            return w.output()
        t0 = time.monotonic()
        body, blobs = _load_body({"kind": "candidate", "path": w.readable(os.path.abspath(candidate)), "entry": entry},
                                 ev.device, weight_seed, init, poison, CheckId.UNWRITTEN_OUTPUT in on, settings,
                                 out_nbytes, ev.output_arg, ev.extra.pop("weights_state", ()))
        loaded = record("import", None, w.request("load", body, blobs))
        ev.extra["candidate_weights"] = loaded.body.get("parameters")
        phases["import"] = time.monotonic() - t0
        ev.reached.add("load")

        t0 = time.monotonic()
        call("warmup", _WARMUP, trace=CheckId.LIBRARY_CALL in on)
        phases["first-call"] = time.monotonic() - t0   # compilation or a compile-cache load, mostly
        ev.reached.add("warmup")
        if stop_if_failed("the warm-up call"):
            return w.output()
        a = fresh[0]
        call("fresh", a, deep_paint=True)
        if CheckId.DETERMINISM in on:
            w.request("release", {"empty_cache": True})
            call("determinism", a, deep_paint=True)
        for k in fresh[1:]:
            call("fresh", k, deep_paint=True)
        ev.reached.add("fresh")
        if CheckId.CACHING in on:
            layout, blobs = _encode_set(values[_OVERWRITE])
            msg = w.request("overwrite", {"set": a}, blobs)
            ev.overwrite_same_pointers = bool(msg.body.get("same_pointers"))
            set_values[a] = _OVERWRITE
            call("overwrite", a, deep_paint=True)
            ev.reached.add("overwrite")
        if stop_if_failed("the checked calls"):
            phases["checks"] = time.monotonic() - t0
            return w.output()
        if _policy_needs_trace(ev):   # before timing: a library call in disguise costs no timing
            _audit(w, ev, fresh, max_blob, record, phases)
            if stop_if_failed("the kernel audit"):
                phases["checks"] = time.monotonic() - t0
                return w.output()
        if probe:
            t1 = time.monotonic()
            upload(_PROBE)
            ev.probe = _ordering_probe(w, ev, _PROBE, max_blob, record)
            phases["probe"] = time.monotonic() - t1
        phases["checks"] = time.monotonic() - t0

        t0 = time.monotonic()
        timed_unseen = unseen if CheckId.CACHING in on else []
        msg = _clocked_time(w, ev, record, _time_body(fresh, settings), max_blob)
        ev.timing = msg.body
        timed_outputs(msg, ())
        if CheckId.TIMERS in on and ev.timing.get("times_ms"):
            ev.null_timing = _null_timing(w, ev, fresh, settings, len(ev.timing["times_ms"]), max_blob)
            _measure_requests_again(w, ev, fresh, settings, max_blob, record)
        if timed_unseen:
            ev.unseen_pairs = _unseen_pairs(w, ev, fresh, timed_unseen, values, max_blob, record, timed_outputs)
            _measure_unseen_again(w, ev, fresh, values, max_blob, record, again, timed_outputs)
        if CheckId.STREAMS in on:   # on the timing that stands
            _measure_drain_again(w, ev, fresh, settings, max_blob, record)
        ev.reached.add("timing")
        phases["timing"] = time.monotonic() - t0

        if CheckId.TIMERS in on and ev.timing.get("times_ms"):
            t0 = time.monotonic()
            ev.loop = _judge_clock_attempts(w, ev, fresh, settings, max_blob, record, values)
            ev.reached.add("loop")
            phases["judge-clock"] = time.monotonic() - t0
        if ev.audit is None and _audit_wanted(ev, audit, waived):
            _audit(w, ev, fresh, max_blob, record, phases)
        record("end", None, w.request("integrity"))
        ev.reached.add("end")
    except spawn.CandidateRaised as exc:
        ev.candidate_error = {"phase": exc.phase, "error": exc.error, "traceback": exc.tb}
    except spawn.WorkerEnded as exc:
        ev.worker_end = exc.reason
    return w.output()


def _measure_requests_again(w, ev: Evidence, fresh, settings: Settings, max_blob, record) -> None:
    """A timing request whose duration its reported times do not account for is timed again, up to
    twice, before it counts: a busy host stretches the work of one request that the null request
    does not price (a rep's copies, a collection) once; a recorder that shrinks times does so every
    time. A request that agrees replaces the timing; what any run saw wrong in the outputs is kept."""
    tries = 0
    while tries < 2 and requests_disagree(ev.clocked_timing, ev.null_timing, ev.device.type):
        tries += 1
        ev.timing = _faults_kept(_time_again(w, fresh, settings, max_blob, record, ev=ev).body, ev.timing)


def _measure_drain_again(w, ev: Evidence, fresh, settings: Settings, max_blob, record) -> None:
    """A drain that says "hidden work" is measured again, up to twice, before it counts: another
    process busy on the device for a moment looks like hidden work once, hidden work does every
    time. A re-measurement that finds none replaces the timing, its reported times included, so
    that a candidate hiding work only sometimes is not timed with it; what any run saw wrong in
    the outputs is kept."""
    attempts = []
    while streams.drain_says_hidden(ev.timing) and len(attempts) < 2:
        attempts.append({k: ev.timing.get(k) for k in ("drain_ms", "null_drain_ms", "synced_ms")})
        ev.timing = _faults_kept(_time_again(w, fresh, settings, max_blob, record, ev=ev).body, ev.timing)
    if attempts:
        ev.extra["drain_attempts"] = attempts


def _measure_unseen_again(w, ev: Evidence, fresh, values, max_blob, record, again, timed_outputs) -> None:
    """Seen/unseen pairs that say "remembers answers" are measured again, up to twice, each time on
    unseen inputs drawn for it: a busy host slows a few single reps once, a kernel that remembers
    is slow on new inputs every time. The last run's pairs are the evidence, the earlier ones kept."""
    attempts = []
    while caching.remembers(ev.unseen_pairs, ev.device.type) and len(attempts) < len(again):
        new = again[len(attempts)]   # unseen inputs drawn for this run
        attempts.append([list(p) for p in ev.unseen_pairs])
        ev.unseen_pairs = _unseen_pairs(w, ev, fresh, new, values, max_blob, record, timed_outputs)
    if attempts:
        ev.extra["unseen_attempts"] = attempts


def _unseen_pairs(w, ev: Evidence, fresh, unseen, values, max_blob, record, timed_outputs) -> list[tuple]:
    """One request per unseen set, carrying it: the worker times one call on it before any other
    candidate code runs in that request, then one call on a seen set (the pair). A set the worker
    never held cannot have been computed ahead, by a candidate that reads the worker's memory."""
    pairs = []
    lead_ms = float((ev.timing or {}).get("lead_ms", 0.0))
    for j, k in enumerate(unseen):
        layout, blobs = _encode_set(values[k])
        body = {"sets": [fresh[j % len(fresh)]], "unseen": [k], "layout": layout, "lead_ms": lead_ms,
                "reps": 1, "min_reps": 1, "budget_ms": 0.0, "warmup": 0, "warmup_ms": 0.0, "null_reps": 0}
        msg = record("timing", None, w.request("time", body, blobs, max_blob_bytes=max_blob))
        timed_outputs(msg, (k,))
        ev.timing = _faults_kept(ev.timing or {}, msg.body)
        pairs += [tuple(p) for p in msg.body.get("unseen_pairs", [])]
        ev.extra["unseen_in_place"] = ev.extra.get("unseen_in_place", 0) + int(msg.body.get("unseen_in_place") or 0)
    return pairs


def _clocked_time(w, ev: Evidence, record, body: dict, max_blob):
    """A timing request of the candidate, bracketed by the judge's clocks (`timers` bounds the
    reported times by its duration)."""
    before = sched.sample(w.clock_pid)
    msg = record("timing", None, w.request("time", body, max_blob_bytes=max_blob))
    clocks = sched.between(before, sched.sample(w.clock_pid))
    times = msg.body.get("times_ms") or []
    if times:
        calls = len(times) + len(msg.body.get("synced_ms") or []) + (_REHEARSALS if ev.device.type == "cuda" else 0)
        ev.clocked_timing.append({**clocks, "calls": calls, "reps": calls + len(msg.body.get("null_drain_ms") or []),
                                  "reported_ms": statistics.median(times), "warmup_ms": float(body["warmup_ms"]),
                                  # the spin before each rep (CUDA), at most the worker's LEAD_MAX_S: a claim,
                                  # which only widens the bound
                                  "lead_ms": min(float(msg.body.get("lead_ms") or 0.0), LEAD_MAX_MS),
                                  "warmup_calls": int(body["warmup"])})
    return msg


def _null_timing(w, ev: Evidence, fresh, settings: Settings, reps: int, max_blob) -> dict:
    """The cost of a timing request and its reps without the candidate: the same request with
    the judge's null function in the call's place (min(reps, NULL_TIMING_REPS) reps, no warm-up),
    by the judge's clocks. A rep's own work (inputs read, paint, flush, events; the copy and the
    check of an output of the call's shape, which the worker hands the null reps) is what it prices."""
    r = max(1, min(reps, NULL_TIMING_REPS))
    body = {**_time_body(fresh, settings, reps=r, warmup=0, budget_ms=1e9, null_reps=0), "warmup_ms": 0.0,
            "min_reps": r, "null": True}
    before = sched.sample(w.clock_pid)
    w.request("integrity")   # a request's fixed cost: the round trip and the worker's integrity report
    fixed = sched.between(before, sched.sample(w.clock_pid))
    before = sched.sample(w.clock_pid)
    w.request("time", body, max_blob_bytes=max_blob)
    return {**sched.between(before, sched.sample(w.clock_pid)), "reps": r + (_REHEARSALS if ev.device.type == "cuda" else 0),
            "fixed_s": fixed["judge_s"], "fixed_main_wait_s": fixed["main_wait_s"]}


LEAD_MAX_MS = 2.0       # the worker's _Reps.LEAD_MAX_S, in ms
NULL_TIMING_REPS = 64   # reps of the null timing request (a rep's own cost, averaged)
_REHEARSALS = 6         # untimed whole reps a CUDA timing request runs first (the worker's _Reps.REHEARSALS)


def _time_again(w, fresh, settings: Settings, max_blob, record, null_reps=None, unseen=(), ev=None):
    """A re-measurement, when a clock disagreed with another: the seen sets again, on half the budget
    (bracketed by the judge's clocks, given the evidence to keep them in)."""
    body = _time_body(fresh, settings, budget_ms=settings.budget_ms / 2, null_reps=null_reps, unseen=unseen)
    if ev is not None:
        return _clocked_time(w, ev, record, body, max_blob)
    return record("timing", None, w.request("time", body, max_blob_bytes=max_blob))


def _faults_kept(body: dict, other: dict) -> dict:
    """A timing body with what either run saw wrong in the outputs (the larger counts)."""
    return {**body, **{k: max(int(body.get(k, 0)), int(other.get(k, 0)))
                       for k in ("mismatches", "overruns", "non_tensor", "reused_output_reps")}}


def _audit(w, ev: Evidence, fresh, max_blob, record, phases) -> None:
    """One call under the profiler (CUDA), with the binaries the candidate's builds loaded; the
    judge reads their kernel symbols itself (checks/attribution.py)."""
    t0 = time.monotonic()
    policy = ev.library_policy
    body = {"set": fresh[-1], "sleep_ms": _gate_ms(ev), "own": True,
            "ops": bool(policy and policy.needs_trace and policy.allowed_ops)}
    msg = record("audit", fresh[-1], w.request("audit", body, max_blob_bytes=max_blob + attribution.MAX_BINARY_BYTES))
    ev.audit = dict(msg.body)
    ev.own_kernels = attribution.own_symbols(codec.from_blob(b).numpy().tobytes() for b in msg.tensors)
    ev.reached.add("audit")
    phases["audit"] = time.monotonic() - t0


def _policy_needs_trace(ev: Evidence) -> bool:
    """own-kernels on CUDA decides on the audit's trace: it runs whenever library-call is on."""
    policy = ev.library_policy
    return (ev.device.type == "cuda" and policy is not None and policy.needs_trace
            and CheckId.LIBRARY_CALL in ev.enabled)


# Source-scan names of code below the dispatcher, forbidden whenever any op is: the dispatch trace
# cannot see them, so there the scan's hit decides (checks/library_policy.py, below_dispatcher).
_BELOW_DISPATCHER = frozenset({"cublas*", "cublasLt*", "cudnn*", "cutlass", "rocblas*", "hipblas*", "cublas-link",
                               "cudnn-link", "rocblas-link", "hipblas-link", "at::cuda::blas", "at::native",
                               "flash_attn*", "xformers*", "blas-symbol"})


def _library_policy(level, dev, allow_ops, prob: Problem, waived):
    """The library policy as it applies, and the waived checks (`off` waives library-call)."""
    try:
        level = policies.parse_level(level, dev.type)
    except ValueError as exc:
        raise UsageError(f"--library-policy: {exc}") from None
    if level == "off":
        waived = waived | {CheckId.LIBRARY_CALL}
    elif CheckId.LIBRARY_CALL in waived:
        level = "off"
    named = [*(allow_ops or ()), *prob.allowed_ops]
    for op in named:
        if not isinstance(op, str) or not policies.base_name(op).isidentifier():
            raise UsageError(f"--allow-op {op!r}: expected an op name such as conv2d or aten::mm")
    return policies.make_policy(level, dev.type, named), waived


def _audit_wanted(ev: Evidence, audit: str, waived) -> bool:
    if ev.device.type != "cuda" or audit == "never" or CheckId.KERNEL_AUDIT not in ev.enabled:
        return False
    if audit == "always":
        return True
    return _early_failure(ev, waived) is None   # auto: the second tier, for a candidate nothing failed


def _gate_ms(ev: Evidence) -> float:
    """How long to hold the caller's stream before a probed or audited call: longer than the call's
    host work, so that anything ordered after the caller's stream visibly waits. Sized from the
    calls after the warm-up (the first one compiles), 10 ms to 500 ms."""
    walls = [c.meta.get("wall_s", 0.0) for c in ev.calls if c.meta and c.phase != "warmup"]
    return min(max(10.0, 4e3 * max(walls, default=0.0)), 500.0)


def _ordering_probe(w, ev: Evidence, set_id, max_blob, record) -> dict:
    """Hold the caller's stream in a sleep long enough to outlast the call's host work (retry once
    longer if the call outlasted it), and see whether the output was finished anyway."""
    sleep_ms = _gate_ms(ev)
    body = {}
    for _ in range(2):
        msg = record("probe", set_id, w.request("probe", {"set": set_id, "sleep_ms": sleep_ms},
                                                max_blob_bytes=max_blob))
        body = msg.body
        if msg.tensors:
            ev.add_call("probe", set_id, set_id, {}, codec.from_blob(msg.tensors[0]))
        if body.get("conclusive") or body.get("why") == "output is not a tensor":
            break
        sleep_ms = min(sleep_ms * 4, 2000.0)
    return dict(body)


def _judge_clock_attempts(w, ev: Evidence, fresh, settings: Settings, max_blob, record, values) -> list[dict]:
    """The judge-clocked loop against the reported time; if they disagree, both again (up to twice):
    a busy moment between two measurements must not pass for a forged clock. Each loop runs on an
    input set of its own, which the worker receives inside the loop's request."""
    reported = statistics.median(ev.timing["times_ms"])
    attempts = []
    for i in range(LOOP_ATTEMPTS):
        times = ev.timing["times_ms"]
        if i:
            times = _time_again(w, fresh, settings, max_blob, record, null_reps=0, ev=ev).body["times_ms"]
            reported = statistics.median(times)
        attempt = {**_judge_clocked_loop(w, ev, fresh[1], reported, settings, max_blob, record,
                                         (_LOOP + i, values[_LOOP + i])),
                   "reported_ms": reported, "times_ms": list(times)}
        attempts.append(attempt)
        if judge_clock(attempt, ev.device.type)["agrees"]:
            break
    return attempts


def _judge_clocked_loop(w, ev: Evidence, set_id, median, settings: Settings, max_blob, record, new=None) -> dict:
    """N back-to-back calls that end in a device-wide sync, timed by the judge's clock (which the
    candidate cannot reach), and the same N calls of a null function to price the fixed cost.

    Two judge-side clocks per loop: wall time, and the CPU time the kernel accounted to the worker's
    threads. A busy machine inflates the first, many threads the second; the real work inflates
    both, so the smaller of the two is what the reported time must account for.
    """
    def bracket(body, blobs=()):
        before = sched.sample(w.clock_pid)
        record("loop", body["set"], w.request("loop", body, blobs, max_blob_bytes=max_blob))
        got = sched.between(before, sched.sample(w.clock_pid))
        waits.append((got["wait_s"], got["main_wait_s"]))
        return got["judge_s"], got["cpu_s"]

    waits = []

    # N is sized from the reported time, and at most LOOP_OVERRUN x loop_ms at what a short loop
    # costs by the judge's own clock: a candidate that reports microseconds for milliseconds of
    # work (hidden, forged) must not make the judge run 2000 of its calls, three times over
    # (20 s at 4096^3). An honest candidate's N is what the reported time alone gives.
    # The loop runs on a set never seen before (`new`), which a one-call request carries first (a
    # kernel's first call on new inputs may build a plan or capture a graph); the pilot and the
    # loop time the calls after. A kernel that remembers answers is `caching`'s.
    loop_set, blobs, extra = set_id, (), {}
    if new is not None:
        loop_set, vals = new
        extra["layout"], blobs = _encode_set(vals)
    if new is not None:   # the first call on it, alone: the pilot prices the calls after
        record("loop", loop_set, w.request("loop", {"set": loop_set, "n": 1, **extra}, blobs, max_blob_bytes=max_blob))
    pilot_s, _ = bracket({"set": loop_set, "n": PILOT_CALLS})
    # less the request's own cost (a null pilot): on a busy host a round trip costs milliseconds,
    # and a loop sized by it would be too short for its calls to show above the null loop's noise
    null_pilot_s, _ = bracket({"set": loop_set, "n": PILOT_CALLS, "null": True})
    waits.clear()
    cap = LOOP_OVERRUN * settings.loop_ms / 1e3 / max((pilot_s - null_pilot_s) / PILOT_CALLS, 1e-9)
    n = int(max(5, min(2000, settings.loop_ms / max(median, 1e-3), cap)))
    wall, cpu = bracket({"set": loop_set, "n": n})
    null_wall, null_cpu = bracket({"set": loop_set, "n": n, "null": True})
    msg = record("loop", loop_set, w.request("loop", {"set": loop_set, "n": 0, "fetch": True}, max_blob_bytes=max_blob))
    if msg.tensors:   # the loop's last output, fetched off the clock (a check verifies it)
        ev.add_call("loop", loop_set, loop_set, {}, codec.from_blob(msg.tensors[0]))
    return {"n": n, "judge_s": wall, "null_s": null_wall, "cpu_s": cpu, "null_cpu_s": null_cpu,
            "pilot_s": pilot_s, "wait_s": waits[0][0], "null_wait_s": waits[1][0],
            "main_wait_s": waits[0][1], "null_main_wait_s": waits[1][1]}


PILOT_CALLS = 10    # the judge-clocked loop's pilot: what a call costs by the judge's clock
LOOP_OVERRUN = 4    # the loop's length, at most this many times loop_ms at the pilot's price


def _count_flops(model, inputs) -> float | None:
    try:
        import copy
        from torch.utils import flop_counter
        from torch.utils.flop_counter import FlopCounterMode
        if hasattr(flop_counter, "_FlopCounterMode"):   # the dispatch mode inside (torch 2.4+)
            defer_dynamo(flop_counter._FlopCounterMode)
        m64 = copy.deepcopy(model).double()
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            m64(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])
        total = fc.get_total_flops()
        return float(total) if total else None
    except Exception:  # noqa: BLE001 - FLOP counting is best effort
        return None


def _min_bytes(inputs, ref) -> float:
    n = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    itemsize = next((x.element_size() for x in inputs if isinstance(x, torch.Tensor)), 4)
    return float(n + ref.numel() * itemsize)


def _versions() -> dict:
    import platform
    from . import __version__
    out = {"kernelvet": __version__, "torch": torch.__version__, "python": platform.python_version()}
    triton_version = _triton_version()
    if triton_version:
        out["triton"] = triton_version
    if torch.version.cuda:
        out["cuda"] = torch.version.cuda
    return out


@functools.lru_cache(maxsize=None)
def _triton_version() -> str | None:
    """Triton's version, read from its package when the judge has not imported it: the judge runs
    no Triton code, and importing it here cost a cold CLI's vet 0.3 s on the H200's host."""
    mod = sys.modules.get("triton")
    if mod is not None:
        return getattr(mod, "__version__", None)
    try:
        spec = importlib.util.find_spec("triton")
        if spec is None or not spec.origin:
            return None
        with open(spec.origin, encoding="utf-8") as fh:
            found = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", fh.read(), re.M)
    except (OSError, ImportError, ValueError):
        return None
    if found:
        return found.group(1)
    try:   # a version computed at import time: import it after all
        import triton
        return triton.__version__
    except Exception:  # noqa: BLE001 - a broken Triton install has no version to report
        return None
