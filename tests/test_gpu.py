"""The CUDA half of the corpus, on a real GPU (run on the lent H200: `pytest -m gpu`).

Same matrix as test_corpus.py: every CUDA cheat rejected by its checks, `sole` ones by exactly one
check that, waived, lets it through; every honest CUDA kernel passes. Plus the 4096^3 cases of
the streams check (hidden work caught, honest and synced side streams not).
"""

import pytest

from kernelvet import load_problem, vet
from kernelvet.ids import CheckId
from kernelvet.practice import by_name, entries
from kernelvet.report import Status, Verdict

pytestmark = pytest.mark.gpu

CUDA_CHEATS = entries("cuda", "cheat")
CUDA_HONEST = entries("cuda", "honest")


def _vet(entry, problem=None, **kw):
    timeout = 10.0 if entry.name == "kill_parent" else 300.0
    return vet(entry.path, problem or entry.problem_ref, device="cuda", timeout=timeout, **kw)


def _failed(report):
    return {f.check for f in report.findings if f.status is Status.FAIL}


@pytest.mark.parametrize("entry", CUDA_CHEATS, ids=lambda e: e.name)
def test_cuda_cheat_is_rejected(entry):
    report = _vet(entry)
    failed = _failed(report)
    assert report.verdict is Verdict.REJECT, report.dumps()
    if entry.sole("cuda"):
        assert failed == set(entry.catches), [f.summary for f in report.failed]
    else:
        assert set(entry.catches) <= failed, [f.summary for f in report.failed]


@pytest.mark.parametrize("entry", [e for e in CUDA_CHEATS if e.sole("cuda") and CheckId.WORKER not in e.catches],
                         ids=lambda e: e.name)
def test_cuda_ablation(entry):
    report = _vet(entry, allow=sorted(entry.catches, key=str))
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


@pytest.mark.parametrize("entry", CUDA_HONEST, ids=lambda e: e.name)
def test_cuda_honest_passes(entry):
    report = _vet(entry)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


@pytest.mark.parametrize("name, want", [("hidden_stream", Status.FAIL), ("triton_gemm_ieee", Status.PASS),
                                        ("synced_side_stream", Status.PASS)])
def test_streams_at_4096(name, want):
    report = _vet(by_name(name), problem=load_problem("matmul", (4096, 4096, 4096)))
    assert report.finding(CheckId.STREAMS).status is want, report.finding(CheckId.STREAMS)
