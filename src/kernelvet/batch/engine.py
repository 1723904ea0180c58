"""Engines: what vets a batch's jobs. The runner hands an engine problem groups and takes back one
`Record` per job, on its own thread, as each lands; how the jobs are spread is the engine's.

`LocalEngine` is one warm judge and launcher on one device (as `kernelvet serve` keeps): each
group's problem is loaded once and its reference (model, input sets, float64 references) made
once and shared by its candidates (refcache.py), then let go before the next group. An engine
for several devices or hosts drives the same `vet_job` on its own judges, a group at a time per
device (a group is the unit that shares a reference), and yields the same records.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Iterable, Iterator, Protocol

from ..errors import HarnessError, OutOfMemoryBesideCandidate, ProblemError, UsageError, raised_at
from ..report import Status, Verdict
from .jobs import Job, ProblemGroup
from .results import Record


@dataclasses.dataclass(frozen=True)
class VetOptions:
    """The check options of `kernelvet check`, for every job (a job adds its own waivers)."""

    device: str = "auto"
    timeout: float = 300.0
    allow: tuple[str, ...] = ()
    audit: str = "auto"
    seed: int | None = None      # every problem's secret seed; None: a fresh one per problem
    sandbox: str = "auto"
    library_policy: str | None = None   # None: the device's default (own-kernels on CUDA)
    allow_ops: tuple[str, ...] = ()


class Engine(Protocol):
    def run(self, groups: Iterable[ProblemGroup]) -> Iterator[Record]:
        """One record per job of `groups`, as each lands (any order across groups)."""


def vet_job(job: Job, reference, launcher, options: VetOptions) -> Record:
    """One job, vetted against its problem's shared reference, as a record. A malformed candidate
    (no ModelNew, a syntax error: exit 2 from `kernelvet check`) and a failure of the harness or
    the problem (exit 3) are records too; only an interruption propagates."""
    from .. import judge
    from ..formats import kernelbench
    t0 = time.monotonic()
    allow = tuple(dict.fromkeys((*options.allow, *job.allow)))
    base = dict(id=job.id, problem=job.problem, candidate=job.candidate, allow=allow)
    try:   # the candidate's own file first: its mistakes are its own, not the problem's
        source = kernelbench.read_source(job.candidate, "candidate")
        reference.problem.candidate_entry(job.candidate, source)
    except UsageError as exc:
        return Record(**base, verdict="invalid", error=str(exc), fault="candidate",
                      vet_s=time.monotonic() - t0, finished_at=time.time())
    try:
        report = judge.vet(job.candidate, reference.problem, device=options.device, timeout=job.timeout or options.timeout,
                           allow=allow, audit=options.audit, launcher=launcher, prepare_next=True,
                           reference=reference, library_policy=options.library_policy,
                           allow_ops=options.allow_ops)
    except OutOfMemoryBesideCandidate as exc:   # this candidate's vet alone: another may fit beside the judge
        return Record(**base, verdict="invalid", error=str(exc), fault="memory",
                      vet_s=time.monotonic() - t0, finished_at=time.time())
    except UsageError as exc:   # the problem's, unless it names the candidate's file (as its messages do)
        whose = "candidate" if str(exc).startswith(job.candidate) else "problem"
        return Record(**base, verdict="invalid", error=str(exc), fault=whose,
                      vet_s=time.monotonic() - t0, finished_at=time.time())
    except ProblemError as exc:
        return Record(**base, verdict="error", error=str(exc), fault="problem",
                      vet_s=time.monotonic() - t0, finished_at=time.time())
    except HarnessError as exc:
        return Record(**base, verdict="error", error=str(exc), fault="harness",
                      vet_s=time.monotonic() - t0, finished_at=time.time())
    except Exception as exc:  # noqa: BLE001 - one job's internal failure must not end a run of thousands
        return Record(**base, verdict="error", error=f"internal error{raised_at(exc)}: {type(exc).__name__}: {exc}",
                      fault="harness", vet_s=time.monotonic() - t0, finished_at=time.time())
    errors = "; ".join(f"{f.check}: {f.summary}" for f in report.findings if f.status is Status.ERROR)
    return Record(**base, verdict=str(report.verdict), error=errors if report.verdict is Verdict.ERROR else None,
                  fault="harness" if report.verdict is Verdict.ERROR else None,
                  failed=tuple((str(f.check), f.summary) for f in report.failed),
                  timing=_timing(report), vet_s=time.monotonic() - t0, candidate_sha256=report.candidate_sha256,
                  device=str(report.device.get("name") or report.device.get("type") or ""),
                  finished_at=time.time(), phases_s={k: round(float(v), 4) for k, v in report.phases_s.items()
                                                          if isinstance(v, (int, float))},
                  requests_s=dict(report.requests_s) or None)


def _timing(report) -> dict | None:
    t = report.timing
    if t is None:
        return None
    return {"median_ms": t.median_ms, "iqr_ms": t.iqr_ms, "reps": t.reps,
            "reference_median_ms": t.reference_median_ms, "speedup": t.speedup,
            "tflops": t.tflops, "gbps": t.gbps, "vouched": t.vouched, "judge_least_ms": t.judge_least_ms,
            "ranked_ms": t.ranked_ms}


def _problem_failure(record: Record) -> bool:
    """A failure of the problem itself, the same for every candidate of it: not vetted again."""
    return record.fault == "problem"


class LocalEngine:
    """One device, one judge, one launcher for the whole run."""

    def __init__(self, options: VetOptions):
        self.options = options
        self._launcher = None

    def start(self) -> None:
        """The launcher, the first worker asked to get ready, and the judge warmed up meanwhile
        (its CUDA context, so it judges on the device, as `kernelvet serve` does)."""
        from .. import cli, devices, judge
        devices.resolve(self.options.device)   # a bad --device: exit 2 before anything starts
        self._launcher = cli._launcher(self.options.sandbox)
        judge.prepare(self._launcher, self.options.device)   # its device starts while the judge warms
        judge.warm_judge(self.options.device)

    def run(self, groups: Iterable[ProblemGroup]) -> Iterator[Record]:
        if self._launcher is None:
            self.start()
        for group in groups:
            yield from self._group(group)

    def _group(self, group: ProblemGroup) -> Iterator[Record]:
        with OpenProblem(group.problem, self.options) as problem:
            for job in group.jobs:
                yield problem.vet(job, self._launcher)


class OpenProblem:
    """One problem held open on one judge: loaded once, its reference made once and shared by the
    jobs vetted against it, until `close()`. A problem that fails on its own (it does not load,
    its reference fails) is vetted once: its later jobs get the same record without a vet. After
    a job that failed in the harness, the next one makes the reference anew (same secret seed)."""

    def __init__(self, problem: str, options: VetOptions):
        from ..problem import load_problem
        from ..refcache import ReferenceCache
        self.name, self.options = problem, options
        self._reference = None
        self._broken: Record | None = None
        t0 = time.monotonic()
        try:
            loaded = load_problem(problem)
        except (UsageError, HarnessError) as exc:
            self._broken = Record(id="", problem=problem, candidate="", fault="problem",
                                  verdict="invalid" if isinstance(exc, UsageError) else "error", error=str(exc),
                                  vet_s=time.monotonic() - t0)
            return
        self._reference = ReferenceCache(loaded, options.seed)

    def vet(self, job: Job, launcher) -> Record:
        if self._broken is not None:
            return dataclasses.replace(self._broken, id=job.id, candidate=job.candidate,
                                       vet_s=self._broken.vet_s if not self._broken.id else 0.0,
                                       allow=tuple(dict.fromkeys((*self.options.allow, *job.allow))),
                                       finished_at=time.time())
        record = vet_job(job, self._reference, launcher, self.options)
        if _problem_failure(record):
            self._broken = record
        elif record.fault == "harness":   # the next job starts from a reference made anew
            self._reference.reset()
        return record

    def close(self) -> None:
        if self._reference is not None:
            self._reference.close()
            self._reference = None

    def __enter__(self) -> "OpenProblem":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
