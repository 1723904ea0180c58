"""What a batch shows while it runs (a progress bar with counts by verdict) and when it ends
(a summary table). Rendering only: the records are the results."""

from __future__ import annotations

import collections

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
    TimeRemainingColumn
from rich.table import Table

from .results import VERDICTS, Record

_STYLE = {"pass": "green", "reject": "red", "invalid": "yellow", "error": "magenta"}


def counts_text(counts: collections.Counter) -> str:
    return "  ".join(f"[{_STYLE[v]}]{v} {counts[v]}[/]" for v in VERDICTS if counts[v])


class BatchProgress:
    """A progress bar over the jobs still to run, with the verdicts so far (resumed ones included)."""

    def __init__(self, total: int, already: collections.Counter, console: Console):
        self.counts = collections.Counter(already)
        self._progress = Progress(TextColumn("[bold]kernelvet batch"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.description}"),
                                  console=console, transient=False)
        self._task = self._progress.add_task(counts_text(self.counts), total=total)

    def __enter__(self) -> "BatchProgress":
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def landed(self, record: Record) -> None:
        self.counts[record.verdict] += 1
        self._progress.update(self._task, advance=1, description=counts_text(self.counts))


def summary(records: list[Record], console: Console, *, out: str, skipped: int, interrupted: bool) -> None:
    """Counts by verdict, the checks that rejected most, and every invalid or error job's reason
    (grouped: a broken problem fails all its candidates the same way)."""
    counts = collections.Counter(r.verdict for r in records)
    table = Table(title="kernelvet batch" + (" (interrupted)" if interrupted else ""))
    table.add_column("verdict")
    table.add_column("jobs", justify="right")
    table.add_column("vet s (median)", justify="right")
    for v in VERDICTS:
        if counts[v]:
            times = sorted(r.vet_s for r in records if r.verdict == v)
            table.add_row(f"[{_STYLE[v]}]{v}[/]", str(counts[v]), f"{times[len(times) // 2]:.2f}")
    table.add_row("total", str(len(records)), f"{sum(r.vet_s for r in records):.1f} s all")
    console.print(table)
    checks = collections.Counter(c for r in records for c, _ in r.failed)
    if checks:
        console.print("rejected by: " + ", ".join(f"{c} {n}" for c, n in checks.most_common()))
    reasons = collections.Counter((r.verdict, r.fault, (r.error or "").splitlines()[0][:300] if r.error else "")
                                  for r in records if r.verdict in ("invalid", "error"))
    for (verdict, fault, why), n in reasons.most_common(20):
        console.print(f"[{_STYLE[verdict]}]{verdict}[/] ({fault}) x{n}: {why}", markup=True, highlight=False)
    if len(reasons) > 20:
        console.print(f"... and {len(reasons) - 20} other reasons (see {out})")
    note = f"{skipped} already in the file, skipped; " if skipped else ""
    console.print(f"{note}results: {out}", soft_wrap=True)
