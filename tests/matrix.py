"""The corpus matrix, shared by the CPU (test_corpus.py) and CUDA (test_gpu.py) suites."""

import dataclasses

from kernelvet import vet
from kernelvet.ids import CheckId
from kernelvet.judge import Settings
from kernelvet.report import Status, Verdict


FULL = Settings(early_exit=False)   # every check gets its evidence: the matrix asserts on all of them


def vet_entry(entry, device, problem=None, **kw):
    kw.setdefault("settings", dataclasses.replace(FULL, **dict(entry.settings)))
    kw.setdefault("library_policy", entry.library_policy)
    return vet(entry.path, problem or entry.problem_ref, device=device, timeout=entry.timeout, **kw)


def failed(report):
    return {f.check for f in report.findings if f.status is Status.FAIL}


def ablatable(entries, device):
    """Cheats one check catches alone on `device` (the worker check cannot be waived)."""
    return [e for e in entries if e.sole(device) and CheckId.WORKER not in e.catches]


def assert_rejected(entry, device):
    report = vet_entry(entry, device)
    got = failed(report)
    assert report.verdict is Verdict.REJECT, report.dumps()
    if entry.sole(device):
        assert got == set(entry.catches), [f.summary for f in report.failed]
    else:
        assert set(entry.catches) <= got, [f.summary for f in report.failed]


def assert_waiving_lets_it_through(entry, device):
    """Ablation: the check is the only thing standing between this cheat and a pass."""
    report = vet_entry(entry, device, allow=sorted(entry.catches, key=str))
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    for cid in entry.catches:
        assert report.finding(cid).status is Status.WAIVED


def assert_passes(entry, device):
    report = vet_entry(entry, device)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.timing is not None and report.timing.median_ms > 0
