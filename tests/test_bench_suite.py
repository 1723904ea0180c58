"""bench/ is a suite: each entry point answers one question, is indexed in bench/README.md, and
imports without a device; the scripts that measure on a GPU build their runs from one engine."""

import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench")
sys.path.insert(0, BENCH)   # as when a bench script runs: its siblings import by name

import cost            # noqa: E402
import practice_table  # noqa: E402
import timing          # noqa: E402


def _read(*path):
    with open(os.path.join(BENCH, *path)) as fh:
        return fh.read()


def _scripts(*folder):
    return sorted(f for f in os.listdir(os.path.join(BENCH, *folder)) if f.endswith((".py", ".sh")))


def test_every_script_in_bench_is_indexed_and_none_is_a_loose_diagnostic():
    index = _read("README.md")
    assert [f for f in _scripts() if f not in index] == []
    assert [f for f in _scripts() if f.startswith("diag")] == []
    diagnostics = _read("diagnostics", "README.md")
    assert [f for f in _scripts("diagnostics") if f not in diagnostics] == []


def test_each_results_directory_has_a_readme_naming_its_commits():
    results = os.path.join(BENCH, "results")
    for d in sorted(os.listdir(results)):
        readme = _read("results", d, "README.md")
        assert "commit" in readme and d.split("-", 3)[-1].upper() in readme.upper(), d


def test_timing_and_cost_between_them_run_every_default_part_of_the_engine():
    import gpu_bench
    assert set(timing.PARTS) | set(cost.PARTS[None]) == set(gpu_bench.DEFAULT_PARTS)
    assert not set(timing.PARTS) & set(cost.PARTS[None])


def test_entry_points_turn_their_options_into_the_engines_parts(capsys):
    assert timing.bench_args(["out"]) == ["out", "--parts=small,big"]
    assert timing.bench_args(["out", "--quick", "--kernel", "--pin=3"]) == \
        ["out", "--parts=small,big,kernel", "--quick", "--pin=3"]
    assert cost.bench_args(["out"]) == ["out", "--parts=latency,cli"]
    assert cost.bench_args(["out", "--cli"]) == ["out", "--parts=cli"]
    for entry, bad in ((cost, []), (cost, ["--api"]), (cost, ["out", "--quick"]),
                       (cost, ["out", "--api", "--cli"]), (timing, []), (timing, ["--quick"])):
        with pytest.raises(SystemExit) as exc:
            entry.bench_args(bad)
        assert exc.value.code == 2


def test_practice_table_runs_kernelvets_own_practice_command(capsys):
    cmd = practice_table.practice_command("o.json", "cpu", ["3"])
    assert cmd[1:] == ["-m", "kernelvet", "practice", "3", "--device", "cpu", "--ablate", "--json", "o.json"]
    assert practice_table.main([]) == 2 and "Usage" in capsys.readouterr().err


def test_the_index_commands_print_their_usage_without_a_device():
    for script in ("timing.py", "cost.py"):
        proc = subprocess.run([sys.executable, os.path.join(BENCH, script)], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and "Usage: python bench/" + script in proc.stderr, proc.stderr


def _record(rid, verdict, slot, vet_s, finished_at, retried=None):
    return {"id": rid, "verdict": verdict, "slot": slot, "vet_s": vet_s, "finished_at": finished_at,
            "retried": retried, "error": None, "failed": [], "fault": None}


def test_batch_scaling_derives_throughput_busy_shares_and_the_tail_from_the_records():
    import batch_scaling
    run = {"started_at": 100.0, "ended_at": 140.0, "records": [
        _record("a", "pass", "cuda:0", 10.0, 115.0), _record("b", "reject", "cuda:1", 12.0, 118.0),
        _record("c", "pass", "cuda:0", 10.0, 125.0), _record("d", "reject", "cuda:0", 10.0, 138.0)]}
    s = batch_scaling.summarise(run)
    assert (s["devices"], s["candidates"], s["wall_s"]) == (2, 4, 40.0)
    assert s["per_hour"] == 3600.0 * 4 / 40.0
    assert s["busy_share"] == {"cuda:0": 30.0 / 40.0, "cuda:1": 12.0 / 40.0}
    assert s["start_s"] == 5.0                     # the first verdict's vet began 5 s into the run
    assert s["tail_s"] == 138.0 - 118.0            # cuda:1 ran out of work 20 s before the end
    assert s["verdicts"] == {"pass": 2, "reject": 2}


def test_batch_scaling_names_ids_whose_verdicts_differ_and_checks_the_failover_records():
    import batch_scaling
    one = {"records": [_record("a", "pass", "cuda:0", 1, 1), _record("b", "reject", "cuda:0", 1, 2)]}
    two = {"records": [_record("a", "pass", "cuda:0", 1, 1), _record("b", "pass", "cuda:1", 1, 2)]}
    assert batch_scaling.agreement([one, two]) == {"ids": 2, "differ": ["b"]}
    jobs = [{"id": i} for i in "abc"]
    records = [_record("a", "pass", "cuda:0", 1, 1), _record("b", "reject", "cuda:0", 1, 2, retried="cuda:1 out"),
               _record("b", "reject", "cuda:0", 1, 3)]
    c = batch_scaling.failover_check(records, jobs)
    assert c["missing"] == ["c"] and c["twice"] == ["b"]
    assert c["retried"] == [{"id": "b", "slot": "cuda:0", "why": "cuda:1 out", "verdict": "reject"}]
