"""The cheat-per-check matrix on the CPU (DESIGN.md principles 7 and 9).

Every CPU cheat is rejected by the checks its entry names; a `sole` cheat by exactly that one
check, and waiving that check lets it through (the check earns its place). Every honest kernel
passes. The CUDA half of the corpus runs in test_gpu.py on a CUDA machine.
"""

import pytest

from kernelvet import vet
from kernelvet.ids import ALL_CHECKS, CheckId
from kernelvet.practice import CORPUS, entries
from kernelvet.report import Verdict

from .matrix import ablatable, assert_passes, assert_rejected, assert_waiving_lets_it_through, failed, vet_entry

CPU_CHEATS = entries("cpu", "cheat")
CPU_HONEST = entries("cpu", "honest")


@pytest.mark.parametrize("entry", CPU_CHEATS, ids=lambda e: e.name)
def test_cheat_is_rejected_by_its_checks(entry):
    assert_rejected(entry, "cpu")


@pytest.mark.parametrize("entry", ablatable(CPU_CHEATS, "cpu"), ids=lambda e: e.name)
def test_waiving_the_one_check_lets_the_cheat_through(entry):
    assert_waiving_lets_it_through(entry, "cpu")


@pytest.mark.parametrize("entry", CPU_HONEST, ids=lambda e: e.name)
def test_honest_kernel_passes(entry):
    assert_passes(entry, "cpu")


def test_every_check_has_a_cheat_only_it_catches():
    sole = {next(iter(e.catches)) for e in CORPUS if e.kind == "cheat" and e.sole_on}
    # parameters: its cheats are wrong on the fresh weights too (tests/test_problem_data.py)
    assert sole == set(ALL_CHECKS) - {CheckId.PARAMETERS}


def test_every_cpu_checkable_check_has_a_cpu_cheat_only_it_catches():
    """Streams and kernel traces do not exist on the CPU; every other check has a CPU cheat of its own."""
    sole = {next(iter(e.catches)) for e in CPU_CHEATS if e.sole("cpu")}
    assert sole == set(ALL_CHECKS) - {CheckId.STREAMS, CheckId.KERNEL_AUDIT, CheckId.PARAMETERS}


def test_corpus_files_exist_and_say_their_pattern():
    for e in CORPUS:
        with open(e.path) as fh:
            text = fh.read()
        assert text.startswith('"""'), e.name
        if e.kind == "cheat":
            assert "Which check" in text and "Mechanism" in text, e.name


@pytest.mark.slow
@pytest.mark.parametrize("name", ["triton_gemm_ieee", "triton_softmax"])
def test_triton_kernels_pass_on_cpu_under_the_interpreter(name, monkeypatch):
    """The CUDA honest kernels' Triton code, run by Triton's interpreter through the whole harness."""
    from kernelvet import spawn
    from kernelvet.practice import by_name
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    launcher = spawn.Launcher()   # the environment is fixed when a launcher starts
    try:
        entry = by_name(name)
        report = vet(entry.path, entry.problem_ref, device="cpu", launcher=launcher)
    finally:
        launcher.close()
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


@pytest.mark.parametrize("name", ["broadcast_matmul", "racy_accumulate"])
def test_one_timed_rep_per_sync_still_verifies_every_output(name):
    """`reps_per_sync=1`: each timed rep's output is read, verified and freed before the next rep
    (the allocator then reuses one block for every output, as under do_bench). The honest kernel
    still passes; a cheat whose timed outputs differ from run to run is still rejected by
    `determinism` alone."""
    from kernelvet.judge import Settings
    from kernelvet.practice import by_name
    entry = by_name(name)
    report = vet_entry(entry, "cpu", settings=Settings(early_exit=False, reps_per_sync=1))
    if entry.kind == "honest":
        assert report.verdict is Verdict.PASS and report.timing.reps >= 10, [f.summary for f in report.failed]
    else:
        assert failed(report) == {CheckId.DETERMINISM}, [f.summary for f in report.failed]


def test_reps_per_sync_below_one_is_a_usage_error():
    from kernelvet.errors import UsageError
    from kernelvet.judge import Settings
    from kernelvet.practice import by_name
    with pytest.raises(UsageError, match="reps_per_sync"):
        vet(by_name("relu").path, "relu", device="cpu", settings=Settings(reps_per_sync=0))


def test_reps_per_sync_reaches_the_worker():
    from kernelvet import judge, worker
    body = judge._time_body([1, 2, 3], judge.Settings(reps_per_sync=4))
    assert body["reps_per_sync"] == 4 and set(body) <= worker.REQUESTS["time"]
