"""The results file: one JSON line per verdict, appended as it lands, never rewritten.

Each record goes out in one write(2) on a file opened O_APPEND and is fsync'd before the next
job starts, so a verdict that was reported finished is on disk whatever happens next (Ctrl-C,
SIGTERM, a crash). A process killed inside that write can leave a torn last line; reading the
file for `--resume` drops it (and cuts it off before appending), so that job is simply run
again. One batch writes a file at a time (an exclusive lock for the run).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
from typing import Any

from ..errors import UsageError

RECORD_VERSION = 1
VERDICTS = ("pass", "reject", "invalid", "error")   # invalid: a user mistake (exit 2); error: exit 3
EXIT_OF = {"pass": 0, "reject": 1, "invalid": 2, "error": 3}


@dataclasses.dataclass(frozen=True)
class Record:
    """One job's outcome. `failed`: (check id, summary) of every failed check; `fault` says whose
    an `invalid` or `error` verdict is ("candidate", "problem", "harness"; "memory": the judge ran
    out of memory beside this candidate's worker, which held no more than its plan allows)."""

    id: str
    problem: str
    candidate: str
    verdict: str
    failed: tuple[tuple[str, str], ...] = ()
    timing: dict | None = None        # median_ms, iqr_ms, reps, reference_median_ms, speedup, tflops, gbps, vouched,
                                      # judge_least_ms, ranked_ms
    vet_s: float = 0.0
    error: str | None = None
    fault: str | None = None
    allow: tuple[str, ...] = ()
    candidate_sha256: str | None = None
    device: str | None = None
    finished_at: float = 0.0          # Unix time
    slot: str | None = None           # the pool's device that vetted it ("cuda:3"; None: one device)
    retried: str | None = None        # why it was vetted again on another device (its first was taken out)
    phases_s: dict | None = None      # where the vet's time went, phase by phase (the report's phases_s)
    requests_s: dict | None = None    # the worker's round trips by request type: [count, seconds] (the report's)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")

    @property
    def exit_code(self) -> int:
        return EXIT_OF[self.verdict]

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["failed"] = [{"check": c, "summary": s} for c, s in self.failed]
        d["allow"] = list(self.allow)
        if self.timing is not None:   # JSON has no inf or nan
            d["timing"] = {k: (v if not isinstance(v, float) or math.isfinite(v) else None)
                           for k, v in self.timing.items()}
        return {"version": RECORD_VERSION, "exit": self.exit_code, **d}

    def line(self) -> bytes:
        return (json.dumps(self.to_json(), sort_keys=True, allow_nan=False, default=str) + "\n").encode()

    @classmethod
    def from_json(cls, d: dict) -> "Record":
        fields = {f.name for f in dataclasses.fields(cls)}
        kw: dict[str, Any] = {k: v for k, v in d.items() if k in fields}
        kw["failed"] = tuple((f["check"], f["summary"]) for f in d.get("failed", []))
        kw["allow"] = tuple(d.get("allow", []))
        return cls(**kw)


def read_records(path: str) -> tuple[list[Record], int]:
    """The complete records of a results file and the byte length they end at: a torn last line
    (no newline: a write cut short) is not a record. Any other line that is not a record of this
    version is a UsageError naming it; a file that does not exist holds none."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return [], 0
    except IsADirectoryError:
        raise UsageError(f"--out {path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot read: {exc.strerror}") from None
    end = data.rfind(b"\n") + 1   # past the last complete line
    records = []
    for n, raw in enumerate(data[:end].splitlines(), 1):
        if not raw.strip():
            continue
        try:
            d = json.loads(raw)
            if not isinstance(d, dict) or d.get("version") != RECORD_VERSION:
                raise ValueError(f"not a version-{RECORD_VERSION} batch record")
            records.append(Record.from_json(d))
        except (ValueError, KeyError, TypeError) as exc:
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise UsageError(f"{path}:{n}: not a kernelvet batch record ({why}); "
                             "use another --out, or remove the line") from None
    return records, end


class ResultsFile:
    """A results file held for appending. `resume=False` refuses a file that already holds
    records (they would be mixed with a new run's); `resume=True` continues it: `done` holds
    its records by id (a job written twice, by hand, counts once: the last)."""

    def __init__(self, path: str, *, resume: bool):
        self.path = path
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise UsageError(f"--out {path}: directory {parent} does not exist")
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except IsADirectoryError:
            raise UsageError(f"--out {path}: is a directory") from None
        except OSError as exc:
            raise UsageError(f"--out {path}: cannot write: {exc.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise UsageError(f"--out {path}: another kernelvet batch is writing it") from None
        try:   # read under the lock: no other batch appends meanwhile
            records, end = read_records(path)
            if records and not resume:
                raise UsageError(f"--out {path}: already holds {len(records)} verdicts; --resume continues it, "
                                 "or choose another file")
        except UsageError:
            os.close(self._fd)
            raise
        if os.fstat(self._fd).st_size != end:   # a torn last line: cut off, its job runs again
            os.ftruncate(self._fd, end)
        self.done: dict[str, Record] = {r.id: r for r in records}
        self.written = 0

    def append(self, record: Record) -> None:
        """The record as one line, in one write, on disk before this returns."""
        line = record.line()
        view = memoryview(line)
        while view:   # a regular file takes it whole; a short write (disk full) is finished, not torn
            n = os.write(self._fd, view)
            view = view[n:]
        os.fsync(self._fd)
        self.done[record.id] = record
        self.written += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "ResultsFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
