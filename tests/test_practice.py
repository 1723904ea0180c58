"""`kernelvet practice`: the naive bench believes the cheats, kernelvet rejects them, honest
kernels pass both, and the ablation names the check that catches each cheat alone."""

import json

import pytest

from kernelvet import cli
from kernelvet.errors import UsageError
from kernelvet.practice import CORPUS, naive, runner


def test_selection_by_number_name_and_entry():
    names = lambda sel: {e.name for e in runner.select(sel) if e.kind == "cheat"}  # noqa: E731
    assert names(["9"]) == names(["cache"]) == {"pointer_cache", "content_cache", "stalled_cache", "shape_cache",
                                               "stale_after_warmup", "seed_table"}
    assert names(["copy_input"]) == {"copy_input"}
    assert {"inplace_relu", "blind_harness", "exit_zero"} <= names(["harness"])
    assert {e.name for e in runner.select(["9"]) if e.kind == "honest"} == {e.name for e in CORPUS if e.kind == "honest"}
    with pytest.raises(UsageError, match="unknown pattern"):
        runner.select(["11"])


def test_naive_bench_believes_a_cheat_kernelvet_rejects(practice_dir):
    """The tutorial's point, measured: a copy of the input is 'correct' and 10x faster to the naive bench."""
    from kernelvet.practice import by_name
    e = by_name("copy_input")
    got = naive.run(e.path, e.problem_ref, "cpu")
    assert got["believed"] is True and got["speedup"] > 2


def test_naive_bench_has_no_verdict_for_a_process_that_exits():
    from kernelvet.practice import by_name
    got = runner.run_naive(by_name("exit_zero"), "cpu")
    assert got["believed"] is None and "no verdict" in got["note"]


def test_practice_cli_writes_rows_and_ablation(tmp_path, capsys):
    out = tmp_path / "practice.json"
    code = cli.main(["practice", "identity", "cache", "timers", "--device", "cpu", "--ablate", "--json", str(out)])
    assert code == 0, capsys.readouterr().out
    data = json.loads(out.read_text())
    rows = {r["cheat"]: r for r in data["rows"]}
    copy = rows["copy_input"]
    assert copy["naive"]["believed"] is True
    assert copy["kernelvet"]["verdict"] == "reject" and copy["kernelvet"]["check"] == ["identity"]
    # what else caught a cheat with its check waived is in the message (a busy host's doing?)
    assert copy["caught_alone_by"] == ["identity"], copy
    assert rows["pointer_cache"]["caught_alone_by"] == ["caching"], rows["pointer_cache"]
    assert rows["patched_timers"]["caught_alone_by"] == ["timers"], rows["patched_timers"]
    assert rows["hidden_stream"]["skipped"].startswith("needs cuda") if "hidden_stream" in rows else True
    assert all(r["kernelvet"]["verdict"] == "pass" for r in data["rows"] if r["kind"] == "honest" and "skipped" not in r)
    assert any("skipped" in r for r in data["rows"])   # CUDA-only controls are listed, never dropped
    text = capsys.readouterr().out
    assert "ablation" in text and "copy_input" in text


def test_practice_unknown_pattern_is_a_usage_error(capsys):
    assert cli.main(["practice", "nonsense", "--device", "cpu"]) == 2
    assert "unknown pattern" in capsys.readouterr().err


def test_the_naive_bench_compares_as_the_tutorials_typical_bench():
    """A loose allclose, atol and rtol 1e-3, for float32 outputs (half formats: their own rounding)."""
    import torch
    assert naive.FLOAT32_TOLERANCE == 1e-3 and naive.TOLERANCE.get(torch.float32) is None


def test_every_pattern_that_exists_on_the_cpu_has_a_cheat_the_naive_bench_believes():
    """The practice run teaches each pattern: at least one of its cheats fools the naive bench
    (the corpus matrix proves kernelvet rejects every one)."""
    from kernelvet.practice import PATTERN_NAMES, entries
    cheats = [e for e in entries("cpu", "cheat") if e.pattern is not None]
    fooled, tried = set(), set()
    with runner.NaiveBench() as bench:
        for e in cheats:
            tried.add(e.pattern)
            if e.pattern not in fooled and runner.run_naive(e, "cpu", bench).get("believed"):
                fooled.add(e.pattern)
    assert tried == set(PATTERN_NAMES) - {1}   # streams exist only on CUDA
    assert fooled == tried, {PATTERN_NAMES[p] for p in tried - fooled}
