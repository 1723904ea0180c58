"""A `kernelvet batch` run interrupted with SIGINT after its first verdict and resumed: the
shared steps of the single-device and the device-pool tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from kernelvet import practice
from kernelvet.batch.results import read_records

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(practice.__file__))))


def batch_command(*args, devices: tuple[str, ...] = ("--device", "cpu")) -> list[str]:
    return [sys.executable, "-m", "kernelvet", "batch", *devices, "--no-progress", *map(str, args)]


def batch_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}


def expected(name: str) -> tuple[str, set[str]]:
    """A corpus entry's verdict and the checks that must reject it (none for an honest one)."""
    entry = practice.by_name(name)
    return ("pass", set()) if entry.kind == "honest" else ("reject", {str(c) for c in entry.catches})


def write_manifest(tmp_path, jobs: dict[str, str]) -> str:
    """id -> corpus entry, as manifest lines; the hang gets a short timeout of its own."""
    path = tmp_path / "jobs.jsonl"
    lines = []
    for jid, name in jobs.items():
        entry = practice.by_name(name)
        line = {"id": jid, "problem": entry.problem_ref, "candidate": entry.path}
        if name == "hang_forever":
            line["timeout"] = 6
        lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _interruptible() -> None:
    """In the child: Ctrl-C as a terminal delivers it. A test run started in the background of a
    shell inherits SIGINT ignored, and a Python started so keeps ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_after_first(command: list[str], out, jobs: dict[str, str], wait_s: float) -> tuple[str, list]:
    """Run `command`, send SIGINT once a verdict is in `out`: it exits 130, no traceback, every
    record whole, the vet in flight (the hang) not recorded. Returns its stdout and the records."""
    proc = subprocess.Popen(command, env=batch_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_interruptible)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr, stderr
    first, end = read_records(str(out))
    assert end == out.stat().st_size                       # no torn line: every record whole
    assert 1 <= len(first) < len(jobs)
    assert "mm-hang" not in {r.id for r in first}          # the vet in flight is not a verdict
    return stdout, first


def resume(command: list[str], out, jobs: dict[str, str], first: list) -> list:
    """Run `command --resume`: every id exactly once, the first run's records kept as they were,
    each with its corpus verdict. Returns the records."""
    done = subprocess.run([*command, "--resume"], env=batch_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert f"{len(first)} already in the file, skipped" in done.stdout
    records, _ = read_records(str(out))
    ids = [r.id for r in records]
    assert sorted(ids) == sorted(jobs)
    assert ids[:len(first)] == [r.id for r in first]
    for r in records:
        verdict, checks = expected(jobs[r.id])
        assert (r.id, r.verdict, {c for c, _ in r.failed}) == (r.id, verdict, checks), r
    return records
