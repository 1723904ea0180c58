"""`kernelvet practice`: each cheat against the naive bench and against kernelvet, side by side.

For every selected cheat (and every honest control) on the device: what the naive bench believed
(correct? how fast?), and what kernelvet decided (verdict, the check that fired, its evidence).
`--ablate` adds the cheats x checks matrix: each check that fired is waived in turn, to show which
checks catch a cheat alone.

The naive bench runs in a fork server (naive.py --serve), one per run: `import torch` once, one
forked child per entry, cleaned up after each. A cheat that kills its parent kills the server, not
us: that entry has no verdict and the next one gets a fresh server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select as io_select   # `select` is this module's pattern selection
import signal
import subprocess
import sys
import tempfile
import time

from rich.console import Console
from rich.table import Table

from .. import devices, reaper, spawn, vet
from ..judge import Settings
from ..errors import UsageError
from ..ids import ALL_CHECKS, CheckId
from ..report import Status, Verdict
from . import CORPUS, PATTERN_NAMES, Entry

NAIVE_TIMEOUT_S = 120
NAIVE_GRACE_S = 60         # past the per-entry limit: the server's start (imports) and its clean-up
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
    # waived check -> the findings that caught it anyway: (check, summary) each
    still_caught: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.skipped) or row_ok(self.entry.kind, self.verdict, self.naive)

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
        if self.still_caught:
            out["waived_but_caught_by"] = {k: [c for c, _ in v] for k, v in self.still_caught.items()}
            out["waived_but_caught_why"] = {k: [f"{c}: {why}" for c, why in v] for k, v in self.still_caught.items()}
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


def run_naive(entry: Entry, device: str, bench: NaiveBench | None = None) -> dict:
    """The naive bench's belief about one entry, from `bench` (or from a server of its own)."""
    limit = min(NAIVE_TIMEOUT_S, entry.timeout + 10)   # entries known to hang get the short limit kernelvet gets
    if bench is None:
        with NaiveBench() as own:
            return own.run(entry.path, entry.problem_ref, device, limit)
    return bench.run(entry.path, entry.problem_ref, device, limit)


class NaiveBench:
    """The runner's end of the naive bench's fork server (naive.py --serve): started on first use,
    started again after a candidate killed it. The server sits in a session of its own, so killing
    its group ends it; each request's child sits in another, which the server cleans up, or we do
    when the server died first."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.err = None                 # the server's stderr: its own last words, never a candidate's
        self.child: int | None = None   # the fork running the current request, as the server told us
        self.buf = b""

    def __enter__(self) -> NaiveBench:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, candidate: str, problem: str, device: str, limit: float) -> dict:
        if self.proc is None:
            self._start()
        req = {"candidate": candidate, "problem": problem, "device": device, "timeout": limit}
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            return self._lost("eof", limit)
        deadline = time.monotonic() + limit + NAIVE_GRACE_S   # the server's own deadline comes first
        while isinstance(msg := self._message(deadline), dict):
            if "child" in msg:
                self.child = msg["child"]
                continue
            self.child = None   # the server killed and reaped it
            return {k: msg[k] for k in ("believed", "speedup", "note") if k in msg}
        return self._lost(msg, limit)

    def close(self) -> None:
        """Kill the server's group and the current request's session, if any; idempotent."""
        if self.proc is None:
            return
        for pgid in (self.proc.pid, self.child):
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except OSError:
                    pass
        if self.child:
            reaper.kill_session(self.child)
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.err):
            f.close()
        self.proc, self.err, self.child, self.buf = None, None, None, b""

    def _start(self) -> None:
        self.err = tempfile.TemporaryFile()
        # The compile caches kernelvet's workers use: a load_inline candidate is built once, not twice
        cache_dirs = {k: v for k, v in spawn.worker_env().items() if k in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR")}
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelvet.practice.naive", "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     bufsize=0, start_new_session=True, env={**os.environ, **cache_dirs})

    def _message(self, deadline: float) -> dict | str:
        """The server's next line, or why there is none: "eof", "deadline" or "garbled"."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not io_select.select([fd], [], [], left)[0]:
                return "deadline"
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return "eof"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            return "garbled"
        ok = isinstance(msg, dict) and (type(msg.get("child")) is int if "child" in msg else "believed" in msg)
        return msg if ok else "garbled"

    def _lost(self, why: str, limit: float) -> dict:
        """No reply: the server hung, died (a candidate may kill its parent) or garbled its reply.
        It goes, with what the request left behind; the next request starts another."""
        try:
            code = self.proc.wait(timeout=5 if why == "eof" else 0)
        except subprocess.TimeoutExpired:
            code = None
        self.err.seek(0)
        err = (self.err.read().decode(errors="replace").strip().splitlines() or [""])[-1][:160]
        self.close()
        if why == "deadline":
            note = f"hung past {limit:.0f} s: no verdict"
        elif why == "garbled":
            note = "no verdict: the bench process garbled its reply"
        elif code is None:
            note = "no verdict: the bench process stopped answering"
        elif code < 0:
            note = f"no verdict: the bench process was killed ({_signal_name(-code)})"
        else:
            note = f"no verdict: the bench process ended (exit {code}){': ' + err if err else ''}"
        return {"believed": None, "speedup": None, "note": note}


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def run_row(entry: Entry, device: str, ablate: bool, launcher=None, bench: NaiveBench | None = None) -> Row:
    if device not in entry.devices:
        return Row(entry, device, skipped=f"needs {' or '.join(entry.devices)}: the pattern cannot exist on {device}")
    row = Row(entry, device, naive=run_naive(entry, device, bench))
    report = _vet(entry, device, launcher=launcher)
    row.verdict = str(report.verdict)
    fails = [f for f in report.findings if f.status is Status.FAIL]
    row.failed = tuple(str(f.check) for f in fails)
    row.evidence = fails[0].summary if fails else (f"median {report.timing.median_ms:.4g} ms"
                                                   if report.timing else "")
    row.evidence = row.evidence if len(row.evidence) <= EVIDENCE_CHARS else row.evidence[:EVIDENCE_CHARS - 1] + "…"
    if ablate and entry.kind == "cheat":
        alone = []
        for c in row.failed:
            if c == str(CheckId.WORKER):
                continue
            waived = _vet(entry, device, allow=[c], launcher=launcher, whole=False)
            if waived.verdict is Verdict.PASS:
                alone.append(c)
            else:   # which check caught it anyway: the matrix's evidence for a double catch
                row.still_caught[c] = tuple((str(f.check), f.summary) for f in waived.failed)
        row.alone = tuple(alone)
    return row


def _vet(entry: Entry, device: str, allow=(), launcher=None, whole: bool = True):
    """`whole`: the whole plan, no early exit, so the table shows every check that fires. With a
    check waived (the matrix) only the verdict counts, and an early stop cannot change it."""
    return vet(entry.path, entry.problem_ref, device=device, allow=allow, library_policy=entry.library_policy,
               timeout=entry.timeout, settings=Settings(early_exit=not whole, **dict(entry.settings)),
               launcher=_live(launcher))


def _live(launcher):
    """The launcher to vet with: kill_parent kills the one it ran under, so a dead one gives way to
    a fresh one in the same sandbox mode (shared_launcher keeps it for the rows after)."""
    if launcher is None or launcher.alive():
        return launcher
    return spawn.shared_launcher(getattr(launcher, "mode", "auto"))


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


def row_ok(kind: str, verdict: str, naive: dict | None) -> bool:
    """A cheat must be rejected; an honest kernel must pass kernelvet and be believed by the naive bench."""
    if kind == "cheat":
        return verdict == "reject"
    return verdict == "pass" and bool(naive and naive.get("believed"))


# Checks no cheat can meet alone: `worker` cannot be waived; `parameters` explains a wrong output
# (a weight with no counterpart keeps the candidate's own values, never the judge's fresh ones),
# which precision also rejects.
NOT_SOLE = frozenset({CheckId.WORKER, CheckId.PARAMETERS})


def sole_checks_expected(device: str) -> set[str]:
    """Checks that must each be some cheat's sole catcher on `device` (no streams or kernel trace on the host)."""
    expected = {str(c) for c in ALL_CHECKS} - {str(c) for c in NOT_SOLE}
    if device == "cpu":
        expected -= {str(CheckId.STREAMS), str(CheckId.KERNEL_AUDIT)}
    return expected


def lonely_checks(rows: list[Row], device: str) -> set[str]:
    """Checks that are not the sole catcher of any cheat that ran."""
    return sole_checks_expected(device) - {c for r in rows for c in r.alone}


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
    with NaiveBench() as bench:   # one fork server for the run; closing it kills its group
        for i, e in enumerate(entries, 1):
            rows.append(run_row(e, dev_kind, ablate, launcher, bench))
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
    raise KeyboardInterrupt   # so that `finally` blocks (NaiveBench.close) kill the naive bench's process group


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
