"""`kernelvet practice`: each cheat against the naive bench and against kernelvet, side by side.

For every selected cheat (and every honest control) on the device: what the naive bench believed
(correct? how fast?), and what kernelvet decided (verdict, the check that fired, its evidence).
`--ablate` adds the cheats x checks matrix: each check that fired is waived in turn, to show which
checks catch a cheat alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys

from rich.console import Console
from rich.table import Table

from .. import devices, vet
from ..judge import Settings
from ..errors import UsageError
from ..ids import ALL_CHECKS, CheckId
from ..report import Status, Verdict
from . import CORPUS, PATTERN_NAMES, Entry

NAIVE_TIMEOUT_S = 120
EVIDENCE_CHARS = 110


@dataclasses.dataclass
class Row:
    entry: Entry
    device: str
    skipped: str = ""
    naive: dict | None = None
    verdict: str = ""
    failed: tuple[str, ...] = ()
    evidence: str = ""
    alone: tuple[str, ...] = ()        # with --ablate: checks that, waived, let this cheat through

    @property
    def ok(self) -> bool:
        if self.skipped:
            return True
        if self.entry.kind == "cheat":
            return self.verdict == "reject"
        return self.verdict == "pass" and bool(self.naive and self.naive.get("believed"))

    def to_json(self) -> dict:
        e = self.entry
        base = {"pattern": e.pattern, "pattern_name": e.pattern_name, "cheat": e.name, "kind": e.kind,
                "device": self.device}
        if self.skipped:
            return {**base, "skipped": self.skipped}
        out = {**base, "naive": self.naive,
               "kernelvet": {"verdict": self.verdict, "check": list(self.failed), "evidence": self.evidence}}
        if self.alone or self.entry.kind == "cheat":
            out["caught_alone_by"] = list(self.alone)
        return out


def select(patterns: list[str]) -> list[Entry]:
    """Pattern numbers, pattern names, or entry names; nothing selects every entry."""
    if not patterns:
        return list(CORPUS)
    by_number = {str(n): n for n in PATTERN_NAMES}
    by_name = {v: k for k, v in PATTERN_NAMES.items()}
    chosen: list[Entry] = []
    for p in patterns:
        if p in by_number or p in by_name:
            num = by_number.get(p) or by_name[p]
            chosen += [e for e in CORPUS if e.pattern == num]
        elif p == "harness":
            chosen += [e for e in CORPUS if e.kind == "cheat" and e.pattern is None]
        elif any(e.name == p for e in CORPUS):
            chosen += [e for e in CORPUS if e.name == p]
        else:
            names = ", ".join(f"{k} ({v})" for k, v in PATTERN_NAMES.items())
            raise UsageError(f"unknown pattern {p!r}: use a number or name ({names}), 'harness', or an entry name")
    honest = [e for e in CORPUS if e.kind == "honest"]
    return list(dict.fromkeys(chosen + honest))


def run_naive(entry: Entry, device: str) -> dict:
    """The naive bench in its own process (behind a shell, so a cheat that kills its parent kills
    the shell, not us). What it prints last is its verdict; a silent death is no verdict."""
    cmd = [sys.executable, "-m", "kernelvet.practice.naive", entry.path, entry.problem_ref, device]
    shell = ["sh", "-c", '"$@"; exit $?', "naive", *cmd]
    limit = min(NAIVE_TIMEOUT_S, entry.timeout + 10)   # entries known to hang get the short limit kernelvet gets
    proc = subprocess.Popen(shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        return {"believed": None, "speedup": None, "note": f"hung past {limit:.0f} s: no verdict"}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)   # the bench and anything it left behind
        except OSError:
            pass
        proc.wait()
    last = stdout.strip().splitlines()[-1:] or [""]
    try:
        got = json.loads(last[0])
        return {"believed": bool(got["believed"]), "speedup": got.get("speedup")}
    except (ValueError, KeyError, TypeError):
        err = (stderr.strip().splitlines() or [""])[-1][:160]
        return {"believed": None, "speedup": None,
                "note": f"no verdict (exit {proc.returncode}){': ' + err if err else ''}"}


def run_row(entry: Entry, device: str, ablate: bool, launcher=None) -> Row:
    if device not in entry.devices:
        return Row(entry, device, skipped=f"needs {' or '.join(entry.devices)}: the pattern cannot exist on {device}")
    row = Row(entry, device, naive=run_naive(entry, device))
    report = _vet(entry, device, launcher=launcher)
    row.verdict = str(report.verdict)
    fails = [f for f in report.findings if f.status is Status.FAIL]
    row.failed = tuple(str(f.check) for f in fails)
    row.evidence = fails[0].summary if fails else (f"median {report.timing.median_ms:.4g} ms"
                                                   if report.timing else "")
    row.evidence = row.evidence if len(row.evidence) <= EVIDENCE_CHARS else row.evidence[:EVIDENCE_CHARS - 1] + "…"
    if ablate and entry.kind == "cheat":
        row.alone = tuple(c for c in row.failed if c != str(CheckId.WORKER)
                          and _vet(entry, device, allow=[c], launcher=launcher).verdict is Verdict.PASS)
    return row


def _vet(entry: Entry, device: str, allow=(), launcher=None):
    # The whole plan, no early exit: the table and the matrix show every check that fires.
    return vet(entry.path, entry.problem_ref, device=device, allow=allow,
               timeout=entry.timeout, settings=Settings(early_exit=False), launcher=launcher)


def render(rows: list[Row], ablate: bool, console: Console) -> None:
    table = Table(title="kernelvet practice: the naive bench vs kernelvet", header_style="bold")
    for col in ("pattern", "candidate", "naive bench", "kernelvet", "check", "evidence"):
        table.add_column(col, overflow="fold", ratio=3 if col == "evidence" else 1)
    for r in rows:
        e = r.entry
        pat = f"{e.pattern} {e.pattern_name}" if e.pattern else e.pattern_name
        if r.skipped:
            table.add_row(pat, e.name, "[dim]skipped[/]", "[dim]skipped[/]", "", f"[dim]{r.skipped}[/]")
            continue
        table.add_row(pat, e.name, _naive_text(r.naive), _verdict_text(r), ", ".join(r.failed) or "-", r.evidence)
    console.print(table)
    if ablate:
        console.print(_matrix(rows))


def _naive_text(naive: dict) -> str:
    if naive.get("believed") is None:
        return f"[magenta]{naive.get('note', 'no verdict')}[/]"
    speed = f", {naive['speedup']:.2g}x" if naive.get("speedup") else ""
    return ("[green]correct" if naive["believed"] else "[red]wrong") + f"{speed}[/]"


def _verdict_text(r: Row) -> str:
    style = "green" if r.verdict == "pass" else "red"
    mark = "" if r.ok else " [bold magenta](unexpected)[/]"
    return f"[{style}]{r.verdict}[/]{mark}"


def _matrix(rows: list[Row]) -> Table:
    checks = [str(c) for c in ALL_CHECKS]
    t = Table(title="ablation: which checks catch which cheat (A = alone: waive it and the cheat passes)",
              header_style="bold")
    t.add_column("cheat")
    for c in checks:
        t.add_column(c, justify="center")
    for r in rows:
        if r.skipped or r.entry.kind != "cheat":
            continue
        t.add_row(r.entry.name, *[("[bold red]A[/]" if c in r.alone else "x" if c in r.failed else "")
                                  for c in checks])
    return t


def lonely_checks(rows: list[Row], device: str) -> set[str]:
    """Checks that are not the sole catcher of any cheat that ran (streams cannot exist on the CPU)."""
    alone = {c for r in rows for c in r.alone}
    expected = {str(c) for c in ALL_CHECKS} - {str(CheckId.WORKER)}
    if device == "cpu":   # no streams and no kernel trace on the host
        expected -= {str(CheckId.STREAMS), str(CheckId.KERNEL_AUDIT)}
    return expected - alone


def main(patterns: list[str], device: str = "auto", json_path: str | None = None, ablate: bool = False,
         console: Console | None = None, launcher=None) -> int:
    console = console or Console()
    dev = devices.resolve(device)
    dev_kind = dev.type
    entries = select(patterns)
    rows = []
    # A stopped run (SIGTERM, a time limit) still leaves every finished row: one line each as it
    # comes, and the JSON rewritten after each.
    signal.signal(signal.SIGTERM, _terminated)
    for i, e in enumerate(entries, 1):
        rows.append(run_row(e, dev_kind, ablate, launcher))
        r = rows[-1]
        console.print(f"[dim]{i}/{len(entries)} {e.name}:[/] "
                      + (f"skipped ({r.skipped})" if r.skipped else
                         f"naive {_naive_text(r.naive)}, kernelvet {r.verdict} {', '.join(r.failed)}")
                      + ("" if r.ok else " [bold magenta](unexpected)[/]"))
        if json_path:
            _write_json(json_path, dev, rows, ablate, partial=True)
    render(rows, ablate, console)
    ok = all(r.ok for r in rows)
    missing = lonely_checks(rows, dev_kind) if ablate and not patterns else set()
    if missing:
        console.print(f"[bold red]checks that catch no cheat alone on {dev_kind}: {', '.join(sorted(missing))}[/]")
    if json_path:
        _write_json(json_path, dev, rows, ablate, missing=missing)
    ran = [r for r in rows if not r.skipped]
    console.print(f"{sum(r.entry.kind == 'cheat' and r.ok for r in ran)} of "
                  f"{sum(r.entry.kind == 'cheat' for r in ran)} cheats rejected, "
                  f"{sum(r.entry.kind == 'honest' and r.ok for r in ran)} of "
                  f"{sum(r.entry.kind == 'honest' for r in ran)} honest kernels passed both benches"
                  + (f"; {len(rows) - len(ran)} skipped on {dev_kind}" if len(ran) < len(rows) else ""))
    return 0 if ok and not missing else 1


def _terminated(signum, frame):
    raise KeyboardInterrupt   # so that `finally` blocks kill the naive bench's process group


def _write_json(path: str, dev, rows: list[Row], ablate: bool, missing=(), partial: bool = False) -> None:
    data = {"version": 1, "device": devices.describe(dev), "rows": [r.to_json() for r in rows]}
    if partial:
        data["partial"] = True
    elif ablate:
        data["checks_without_a_sole_cheat"] = sorted(missing)
    try:
        with open(path, "w") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
    except OSError as exc:
        raise UsageError(f"--json {path}: cannot write: {exc.strerror}") from None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], device=os.environ.get("KERNELVET_DEVICE", "auto")))
