"""`kernelvet batch`: the jobs, minus those the results file already holds (`--resume`), through
an engine, each record appended as it lands; a progress bar, then a summary.

Ctrl-C (or SIGTERM) stops the vet in flight and loses no finished verdict: a record is written
whole, with the signal held off during its write, before the next job starts. Exit codes: 0 the
run finished (whatever the verdicts: they are in the file), 2 a usage mistake, 130 interrupted.
"""

from __future__ import annotations

import collections
import contextlib
import signal
import threading

from rich.console import Console

from ..errors import UsageError
from . import jobs as jobs_mod
from .engine import Engine, LocalEngine, VetOptions
from .results import ResultsFile

EXIT_INTERRUPTED = 130


def load_jobs(problems: str | None, candidates: str | None, manifest: str | None) -> list[jobs_mod.Job]:
    if manifest:
        if candidates:
            raise UsageError("--manifest and --candidates are two ways to name the jobs: give one")
        return jobs_mod.from_manifest(manifest)
    if not problems or not candidates:
        raise UsageError("give --problems DIR with --candidates DIR, or --manifest FILE.jsonl")
    return jobs_mod.from_dirs(problems, candidates)


def run(jobs: list[jobs_mod.Job], out: str, *, resume: bool, engine: Engine, console: Console,
        show_progress: bool = True) -> int:
    """Vet every job not yet in `out`; the exit code."""
    with ResultsFile(out, resume=resume) as results:
        todo = [j for j in jobs if j.id not in results.done]
        wanted = {j.id for j in jobs}
        earlier = [r for i, r in results.done.items() if i in wanted]
        moved = [j.id for j in jobs if j.id in results.done and results.done[j.id].candidate
                 and results.done[j.id].candidate != j.candidate]
        if moved:
            console.print(f"note: {len(moved)} ids in {out} were recorded for other candidate files (first: "
                          f"{moved[0]}); they are skipped: remove their lines to vet them again", soft_wrap=True)
        landed = []
        interrupted = False
        progress = _progress(len(todo), earlier, console, show_progress)
        with _signals_as_interrupt(), progress as bar:
            stream = engine.run(jobs_mod.group_by_problem(todo))
            try:
                for record in stream:
                    with _held_signals():
                        results.append(record)
                    landed.append(record)
                    bar.landed(record)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                close = getattr(stream, "close", None)   # a generator engine lets its references go
                if close is not None:
                    close()
        from .view import summary
        summary(earlier + landed, console, out=out, skipped=len(earlier), interrupted=interrupted)
        if interrupted:
            console.print(f"interrupted: {len(landed)} verdicts written this run, {len(todo) - len(landed)} to go; "
                          "the same command with --resume continues", soft_wrap=True)
            return EXIT_INTERRUPTED
    return 0


def _progress(total: int, earlier, console: Console, show: bool):
    if not show:
        return _NoProgress()
    from .view import BatchProgress
    return BatchProgress(total, collections.Counter(r.verdict for r in earlier), console)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def landed(self, record) -> None:
        pass


@contextlib.contextmanager
def _signals_as_interrupt():
    """SIGTERM as Ctrl-C for the run (a scheduler's stop loses no verdict either)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def _held_signals():
    """Ctrl-C and SIGTERM wait until a record is written: a verdict is in the file or not run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending = []
    old = {s: signal.signal(s, lambda n, _f: pending.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if pending:
        raise KeyboardInterrupt


def pick_engine(options: VetOptions, *, gpus: str | None = None, pool: str | None = None,
                kind: str = "local") -> Engine:
    """One device (`--device`), a pool of a judge per device (`--gpus`, `--devices`), or the pool
    on a Ray cluster (`--engine ray`)."""
    if gpus and pool:
        raise UsageError("--gpus and --devices both name the pool's devices: give one")
    if (gpus or pool or kind == "ray") and options.device != "auto":
        raise UsageError(f"--device {options.device} is one device; --gpus and --devices name a pool's: give one")
    if kind == "ray":
        from .ray_engine import ray_engine
        return ray_engine(options, gpus=gpus, devices=pool)
    if not (gpus or pool):
        from .. import devices
        devices.resolve(options.device)   # a bad --device: one line before anything starts
        return LocalEngine(options)
    from . import pool as pool_mod
    slots = pool_mod.gpu_slots(gpus) if gpus else pool_mod.device_slots(pool)
    return pool_mod.PoolEngine(options, slots)


def main(args) -> int:
    """`kernelvet batch` with its parsed arguments."""
    for a in args.allow:
        jobs_mod.check_waiver(a, "--allow")
    jobs = load_jobs(args.problems, args.candidates, args.manifest)
    options = VetOptions(device=args.device, timeout=args.timeout, allow=tuple(args.allow), audit=args.audit,
                         seed=args.seed, sandbox=args.sandbox, library_policy=args.library_policy,
                         allow_ops=tuple(args.allow_op))
    engine = pick_engine(options, gpus=getattr(args, "gpus", None), pool=getattr(args, "devices", None),
                         kind=getattr(args, "engine", "local"))
    console = Console(stderr=False)
    return run(jobs, args.out, resume=args.resume, engine=engine, console=console,
               show_progress=not args.no_progress)
