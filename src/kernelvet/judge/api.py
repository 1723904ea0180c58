"""The judge's entry points: `vet` (one candidate against a problem, to a report) and `prepare`."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import time

import torch

from .. import checks, devices, metrics, sizes, spares, spawn, weights
from ..checks import library_policy as policies
from ..checks.kernel_audit import defined_kernels
from ..checks.source_scan import forbidden_for_aten_ops, scan_source
from ..draws import Draws
from ..errors import HarnessError, UsageError
from ..evidence import Evidence
from ..formats import kernelbench
from ..ids import ALL_CHECKS, AUDIT_MODES, REUSED_OUTPUT_MODES, CheckId
from ..problem import Problem, load_problem, reference64
from ..refcache import PerVet, ReferenceCache, SharedReference, locked_draw, own_sets
from ..report import Report, Status, Timing, Verdict
from .assembly import _mark_not_run, _vouched_times
from .bodies import _load_body
from .placement import _judged_on
from .plan import _run_candidate
from .policy import _BELOW_DISPATCHER, _library_policy, _parse_allow
from .reference import _Lazy, _check_inputs_vary, _count_flops, _derived_seed, _min_bytes, _run_reference, _within
from .settings import LOOP_ATTEMPTS, Settings, UNSEEN_AGAIN, _LOOP, _OVERWRITE, _PROBE, _UNSEEN_AGAIN, _WARMUP
from .versions import _versions


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
                                 max(timeout, 120.0), price_nulls=CheckId.TIMERS not in waived)
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
        ev.null_trusted = ref_run["null_trusted"]
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
            peak_flops=pk.for_dtype(out_dtype) if pk else None, peak_bytes_per_s=pk.bandwidth if pk else None,
            vouched=any(f.check is CheckId.TIMERS and f.status is Status.PASS for f in findings))
    phases["total"] = time.monotonic() - t_start
    return Report(
        verdict=verdict, findings=findings, timing=timing, problem=prob.to_json(),
        candidate=os.path.abspath(candidate), candidate_sha256=source_sha256,
        device={**info, "judged_on": str(judged_on)}, seed=secret, versions=_versions(),
        waived=tuple(sorted(waived, key=str)),
        candidate_output=output, phases_s=phases, requests_s=requests, containment=containment,
        library_policy=policy.to_json())


def prepare(launcher: spawn.Launcher, device: str = "auto", settings: Settings | None = None) -> None:
    """Get the next vet's worker ready now (CUDA context, flush buffer, cuBLAS and Triton started),
    so that a vet that follows soon pays none of it. A vet does this itself for the vet after it.
    The judge itself starts nothing on the device here."""
    spares.prepare(launcher, str(devices.resolve(device)), (settings or Settings()).flush_factor)
