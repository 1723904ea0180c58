"""What a vet produces: findings, timing, verdict. Plain frozen data, versioned JSON.

Raw measurements are kept (the timing's `raw_ms`); statistics are derived from them.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any, Mapping

from .ids import CheckId

REPORT_VERSION = 1


class Verdict(str, enum.Enum):
    PASS = "pass"
    REJECT = "reject"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value

    @property
    def exit_code(self) -> int:
        return {Verdict.PASS: 0, Verdict.REJECT: 1, Verdict.ERROR: 3}[self]


class Status(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    WAIVED = "waived"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Finding:
    """One check's outcome. `evidence` holds numbers, not adjectives."""

    check: CheckId
    status: Status
    summary: str
    evidence: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "check": str(self.check),
            "status": str(self.status),
            "summary": self.summary,
            "evidence": _jsonable(dict(self.evidence)),
        }


def verdict_of(findings) -> Verdict:
    """Reject on any failed check; else, where a check could not decide (a bug of its own, caught
    as an error finding), no verdict: never a pass it did not vouch for."""
    if any(f.status is Status.FAIL for f in findings):
        return Verdict.REJECT
    return Verdict.ERROR if any(f.status is Status.ERROR for f in findings) else Verdict.PASS


@dataclasses.dataclass(frozen=True)
class Timing:
    """Candidate timing, with the reference timed the same way in the same run."""

    method: str
    raw_ms: tuple[float, ...]
    reference_raw_ms: tuple[float, ...] = ()
    flops: float | None = None
    bytes_moved: float | None = None
    peak_flops: float | None = None
    peak_bytes_per_s: float | None = None
    # whether the judge's own clocks bounded these times (`timers` passed); a check that was
    # waived or inconclusive (a busy host) leaves them the worker's word, and no score should rank them
    vouched: bool = True
    # the least time per call the judge's clocks allow (its loop of calls, the calls on inputs never
    # seen before: checks/timers.py, checks/pair_clock.py): the speed is ranked at no less
    judge_least_ms: float | None = None

    @property
    def reps(self) -> int:
        return len(self.raw_ms)

    @property
    def median_ms(self) -> float | None:
        return _quantile(self.raw_ms, 0.5)

    @property
    def iqr_ms(self) -> float | None:
        if not self.raw_ms:
            return None
        return _quantile(self.raw_ms, 0.75) - _quantile(self.raw_ms, 0.25)

    @property
    def reference_median_ms(self) -> float | None:
        return _quantile(self.reference_raw_ms, 0.5)

    @property
    def ranked_ms(self) -> float | None:
        """The time the speed is ranked by: the reported median, or the judge's least where above it."""
        med = self.median_ms
        return None if med is None else max(med, self.judge_least_ms or 0.0)

    @property
    def speedup(self) -> float | None:
        ref, cand = self.reference_median_ms, self.ranked_ms
        return ref / cand if ref and cand else None

    @property
    def tflops(self) -> float | None:
        t = self.ranked_ms
        return self.flops / (t * 1e-3) / 1e12 if self.flops and t else None

    @property
    def gbps(self) -> float | None:
        t = self.ranked_ms
        return self.bytes_moved / (t * 1e-3) / 1e9 if self.bytes_moved and t else None

    @property
    def pct_of_peak(self) -> float | None:
        """The larger of compute and bandwidth utilisation, in percent of the device's peak."""
        shares = []
        if self.tflops is not None and self.peak_flops:
            shares.append(self.tflops * 1e12 / self.peak_flops)
        if self.gbps is not None and self.peak_bytes_per_s:
            shares.append(self.gbps * 1e9 / self.peak_bytes_per_s)
        return 100.0 * max(shares) if shares else None

    def to_json(self) -> dict:
        return _jsonable({
            "method": self.method,
            "median_ms": self.median_ms,
            "iqr_ms": self.iqr_ms,
            "reps": self.reps,
            "tflops": self.tflops,
            "gbps": self.gbps,
            "pct_of_peak": self.pct_of_peak,
            "reference_median_ms": self.reference_median_ms,
            "speedup": self.speedup,
            "vouched": self.vouched,
            "judge_least_ms": self.judge_least_ms,
            "ranked_ms": self.ranked_ms,
            "raw_ms": list(self.raw_ms),
            "reference_raw_ms": list(self.reference_raw_ms),
        })


@dataclasses.dataclass(frozen=True)
class Report:
    verdict: Verdict
    findings: tuple[Finding, ...]
    timing: Timing | None
    problem: Mapping[str, Any]
    candidate: str
    candidate_sha256: str
    device: Mapping[str, Any]
    seed: int | None
    versions: Mapping[str, str]
    waived: tuple[CheckId, ...] = ()
    candidate_output: str = ""
    phases_s: Mapping[str, float] = dataclasses.field(default_factory=dict)
    # round trips to the worker by request type: [count, seconds] (where the phases' time went)
    requests_s: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    containment: Mapping[str, Any] = dataclasses.field(default_factory=dict)   # what confined the worker
    library_policy: Mapping[str, Any] = dataclasses.field(default_factory=dict)   # level, judged as, allowed ops

    @property
    def failed(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status is Status.FAIL)

    def finding(self, check: CheckId | str) -> Finding | None:
        check = CheckId(check)
        return next((f for f in self.findings if f.check is check), None)

    def to_json(self) -> dict:
        return {
            "version": REPORT_VERSION,
            "verdict": str(self.verdict),
            "findings": [f.to_json() for f in self.findings],
            "timing": self.timing.to_json() if self.timing else None,
            "problem": _jsonable(dict(self.problem)),
            "candidate": self.candidate,
            "candidate_sha256": self.candidate_sha256,
            "device": _jsonable(dict(self.device)),
            "seed": self.seed,
            "versions": dict(self.versions),
            "waived": [str(c) for c in self.waived],
            "candidate_output": self.candidate_output,
            "phases_s": _jsonable(dict(self.phases_s)),
            "requests_s": _jsonable(dict(self.requests_s)),
            "containment": _jsonable(dict(self.containment)),
            "library_policy": _jsonable(dict(self.library_policy)),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, indent=2, allow_nan=False)


def _quantile(values, q: float) -> float | None:
    if not values:
        return None
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _jsonable(value):
    """Evidence may hold numpy scalars, tuples, enums or non-finite floats; JSON holds none of them."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f
