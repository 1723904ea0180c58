"""Terminal rendering of reports (rich). Pure formatting: reads report data, decides nothing."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

_STYLE = {"pass": "green", "fail": "bold red", "skip": "dim", "waived": "yellow", "error": "magenta"}
_VERDICT = {"pass": "bold green", "reject": "bold red", "error": "bold magenta"}


def preload() -> None:
    """Render a report into nothing: rich imports some of its modules only when first used, and the
    judge imports nothing after its first candidate has run."""
    import io
    con = Console(file=io.StringIO(), force_terminal=True, width=100)
    report_json({"verdict": "pass", "problem": {"name": "-"}, "device": {"type": "cpu"},
                 "findings": [{"check": "-", "status": s, "summary": "-"} for s in _STYLE],
                 "timing": {"median_ms": 1.0, "iqr_ms": 0.1, "reps": 1, "reference_median_ms": 1.0, "speedup": 1.0,
                            "tflops": 1.0, "pct_of_peak": 1.0, "method": "-", "judge_least_ms": 2.0},
                 "phases_s": {"-": 0.0}, "requests_s": {"-": [1, 0.0]}, "candidate_output": "-"},
                verbose=True, console=con)


def report(rep, verbose: bool = False, console: Console | None = None) -> None:
    report_json(rep.to_json(), verbose=verbose, console=console)


def report_json(data: dict, verbose: bool = False, console: Console | None = None) -> None:
    con = console or Console()
    verdict = data.get("verdict", "?")
    prob = data.get("problem", {})
    dev = data.get("device", {})
    con.print(f"[{_VERDICT.get(verdict, 'bold')}]{verdict.upper()}[/]  {data.get('candidate', '')}  "
              f"on {prob.get('name', '?')}  ({dev.get('name', dev.get('type', '?'))})")
    table = Table(show_header=True, header_style="bold", expand=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("finding", overflow="fold")
    for f in data.get("findings", []):
        st = f.get("status", "?")
        table.add_row(f.get("check", "?"), f"[{_STYLE.get(st, '')}]{st}[/]", f.get("summary", ""))
    con.print(table)
    t = data.get("timing")
    if t and t.get("median_ms") is not None:
        parts = [f"median {t['median_ms']:.4g} ms", f"IQR {t['iqr_ms']:.3g} ms", f"{t['reps']} reps"]
        if t.get("reference_median_ms"):
            parts.append(f"reference {t['reference_median_ms']:.4g} ms")
        if t.get("speedup"):
            parts.append(f"speedup {t['speedup']:.2f}x")
        if t.get("tflops"):
            parts.append(f"{t['tflops']:.3g} TFLOP/s")
        if t.get("pct_of_peak"):
            parts.append(f"{t['pct_of_peak']:.1f}% of peak")
        con.print("timing: " + ", ".join(parts) + f"  [dim]({t.get('method')})[/]")
        least = t.get("judge_least_ms")
        if least is not None and least > t["median_ms"]:
            con.print(f"[yellow]ranked at {least:.4g} ms per call: the judge's own clock saw the calls take at "
                      f"least that, more than the reported median[/]")
        if t.get("vouched") is False:
            con.print("[yellow]timing not vouched: the judge's clocks did not bound it (timers waived or "
                      "inconclusive); it is the worker's word[/]")
    con.print(f"[dim]seed {data.get('seed')}  sha256 {str(data.get('candidate_sha256', ''))[:16]}[/]")
    if verbose:
        phases = data.get("phases_s", {})
        if phases:
            con.print("phases: " + ", ".join(f"{k}={v:.2f}s" for k, v in phases.items()))
        trips = data.get("requests_s", {})
        if trips:
            con.print("[dim]worker round trips: " + ", ".join(f"{k}={n}x {s:.3f}s" for k, (n, s) in trips.items())
                      + "[/]")
        out = data.get("candidate_output")
        if out:
            con.print("[dim]candidate output:[/]")
            con.print(out, markup=False, highlight=False)
