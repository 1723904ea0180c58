"""bench/kernelbench_sweep.py without a run: the three candidates it generates for a problem, the
manifest they go into, and the table it makes of a batch's records."""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import shutil

import pytest
import torch

from kernelvet import practice
from kernelvet.batch import jobs
from kernelvet.batch.results import Record

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "bench", "kernelbench_sweep.py")
_spec = importlib.util.spec_from_file_location("kernelbench_sweep", _PATH)
sweep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)


@pytest.fixture
def tree(tmp_path):
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    shutil.copy(os.path.join(practice.PROBLEMS, "relu.py"), level / "19_ReLU.py")
    (level / "51_Argmax.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.argmax(x, dim=1), x.sum()\n\n"
        "def get_inputs():\n    return [torch.randn(8, 5)]\n\ndef get_init_inputs():\n    return []\n")
    (level / "notes.txt").write_text("not a problem")
    return tmp_path / "KernelBench"


def test_three_candidates_per_problem_and_a_manifest_batch_reads(tree, tmp_path):
    chosen = sweep.problems(str(tree), [1], sweep.parse_ranges("19-60"))
    assert [(lv, n) for lv, n, _ in chosen] == [(1, 19), (1, 51)]
    manifest, info = sweep.generate(chosen, str(tmp_path / "work"))
    got = jobs.from_manifest(manifest)
    assert [(j.id, j.allow) for j in got] == [
        ("level1_019_ref", ()), ("level1_019_ref-allowed", ("library-call",)), ("level1_019_zeros", ("library-call",)),
        ("level1_051_ref", ()), ("level1_051_ref-allowed", ("library-call",)), ("level1_051_zeros", ("library-call",))]
    assert info[(1, 19)]["output"] == {"tensor": [1024, 1024], "dtype": "float32"}
    assert info[(1, 19)]["shape_from"] == "meta"     # no arithmetic to learn the shape
    assert info[(1, 51)]["output"] == [{"tensor": [8], "dtype": "int64"}, {"tensor": [], "dtype": "float32"}]

    ref = runpy.run_path(got[0].candidate)
    assert issubclass(ref["ModelNew"], ref["Model"])  # the reference as its own candidate
    zeros = runpy.run_path(got[5].candidate)["ModelNew"]()
    a, b = zeros(torch.randn(8, 5))
    assert a.dtype == torch.int64 and a.shape == (8,) and not a.any()
    assert b.shape == () and b.dtype == torch.float32 and b.item() == 0.0


def test_a_parts_problems_run_in_the_order_its_ranges_name_them(tree):
    """A device's time is short: the problems named first run first, whatever their numbers."""
    assert [n for _, n, _ in sweep.problems(str(tree), [1], sweep.parse_ranges("51,19"))] == [51, 19]
    assert [n for _, n, _ in sweep.problems(str(tree), [1], sweep.parse_ranges("40-60,1-50"))] == [51, 19]
    assert [n for _, n, _ in sweep.problems(str(tree), [1], None)] == [19, 51]
    assert sweep.problems(str(tree), [1], sweep.parse_ranges("2-3")) == []


def test_output_shapes_an_earlier_part_recorded_are_not_worked_out_again(tree, tmp_path, monkeypatch):
    """A part resumed (or its tables rebuilt) takes the shapes from problems.json where the problem's
    source is the same: a meta run of a deep LSTM takes a CPU tens of seconds."""
    chosen = sweep.problems(str(tree), [1], sweep.parse_ranges("19"))
    _, info = sweep.generate(chosen, str(tmp_path / "work"))
    sweep.save_info(str(tmp_path), info, ["first"])
    known, commands = sweep.load_parts(str(tmp_path))
    monkeypatch.setattr(sweep, "output_spec", lambda path: pytest.fail("worked out again"))
    _, again = sweep.generate(chosen, str(tmp_path / "work"), known)
    assert again == info and commands == ["first"]
    changed = {k: {**v, "sha256": "another source"} for k, v in known.items()}
    monkeypatch.setattr(sweep, "output_spec", lambda path: {"output": None, "how": None})
    assert sweep.generate(chosen, str(tmp_path / "work"), changed)[1][(1, 19)]["output"] is None


def _r(i, verdict, failed=(), error=None, fault=None):
    return Record(id=i, problem="p", candidate="c", verdict=verdict, failed=tuple((c, "s") for c in failed),
                  error=error, fault=fault, vet_s=1.0)


def test_the_table_counts_rows_and_exits():
    info = {(1, 1): {"name": "1_A", "output": {"tensor": [2], "dtype": "float32"}, "shape_from": "meta",
                     "shape_error": None},
            (1, 2): {"name": "2_B", "output": None, "shape_from": None, "shape_error": "meta: no kernel"}}
    records = [_r("level1_001_ref", "reject", ["library-call"]), _r("level1_001_ref-allowed", "pass"),
               _r("level1_001_zeros", "reject", ["precision"]),
               _r("level1_002_ref", "error", error="the reference failed", fault="problem")]
    table = sweep.tabulate(records, info)
    assert table["as_expected"] == 1 and table["unexpected"] == ["level1_002"]
    assert table["counts"]["ref"] == {"reject": 1, "error": 1}
    assert table["missing"] == ["level1_002_ref-allowed", "level1_002_zeros"]
    assert [e["id"] for e in table["exits"]] == ["level1_002_ref", "level1_002_zeros"]
    md = sweep.markdown(table, "python bench/kernelbench_sweep.py --levels 1")
    assert "| 1 | 1 1_A | reject (library-call) | pass | reject (precision) | 1.0 / 1.0 / 1.0 | yes |" in md
    assert "| level1_002_ref | 3 | problem | the reference failed |" in md
    json.dumps(table)


def test_help_runs(capsys):
    with pytest.raises(SystemExit) as exc:
        sweep.main(["--help"])
    assert exc.value.code == 0 and "--results" in capsys.readouterr().out


# --------------------------------------------------------------------------- bench/kernelbench_eval_compare.py

_CPATH = os.path.join(os.path.dirname(_PATH), "kernelbench_eval_compare.py")
_cspec = importlib.util.spec_from_file_location("kernelbench_eval_compare", _CPATH)
compare = importlib.util.module_from_spec(_cspec)
_cspec.loader.exec_module(compare)


def test_compare_pairs_each_candidate_with_kernelbench_and_sums_the_hours():
    records = [_r("level1_001_ref", "reject", ["library-call"]), _r("level1_001_zeros", "reject", ["precision"])]
    kb = {"level1_001_ref": {"correct": True, "compiled": True, "eval_s": 2.0, "wall_s": 6.0},
          "level1_001_zeros": {"error": "timed out after 180 s", "wall_s": 180.0}}
    rows = compare.pair(records, kb)
    assert [(r["id"], r["kernelvet_verdict"], r["kernelbench_correct"]) for r in rows] == [
        ("level1_001_ref", "reject", True), ("level1_001_zeros", "reject", None)]
    s = compare.summary(rows)
    assert s["kernelvet_total_s"] == 2.0 and s["kernelbench_wall_total_s"] == 186.0
    assert s["kernelvet_per_hour"] == 3600.0 and s["kernelbench_passed"] == 1 and s["kernelvet_passed"] == 0
    md = compare.markdown(rows, s, "python bench/kernelbench_eval_compare.py --sweep R")
    assert "| level1_001_ref | reject (library-call) | 1.00 | yes | 2.00 | 6.00 |" in md
    assert "| level1_001_zeros | reject (precision) | 1.00 | - (timed out after 180 s) | - | 180.00 |" in md


def test_compare_stand_ins_only_for_absent_modules(monkeypatch):
    import sys
    for name in compare._UNUSED:
        monkeypatch.delitem(sys.modules, name, raising=False)
    made = compare._stand_ins()
    try:
        for name in made:
            assert name in compare._UNUSED and sys.modules[name].__name__ == name
        if "pydantic" in made:
            class Result(sys.modules["pydantic"].BaseModel):
                compiled: bool = False
                metadata: dict = {}
            a, b = Result(compiled=True), Result()
            a.metadata["x"] = 1
            assert a.compiled and not b.compiled and b.metadata == {}   # defaults are per instance
    finally:
        for name in made:
            sys.modules.pop(name, None)


def test_parts_run_apart_merge_into_one_table(tmp_path):
    info = {(1, n): {"name": f"{n}_P", "file": f"level1/{n}_P.py", "output": {"tensor": [2], "dtype": "float32"},
                     "shape_from": "meta", "shape_error": None} for n in (1, 2)}
    for n in (1, 2):
        part = tmp_path / f"part{n}"
        part.mkdir()
        records = [_r(f"level1_00{n}_ref", "reject", ["library-call"]), _r(f"level1_00{n}_ref-allowed", "pass"),
                   _r(f"level1_00{n}_zeros", "reject", ["precision"])]
        (part / "results.jsonl").write_bytes(b"".join(r.line() for r in records))
        # part 2 resumed part 1's folder: its commands begin with part 1's
        sweep.write_tables(str(part), records, {(1, n): info[(1, n)]}, [f"run part {k}" for k in range(1, n + 1)], 0)
    table = sweep.merge([str(tmp_path / "part1"), str(tmp_path / "part2")], str(tmp_path / "all"))
    assert table["problems"] == 2 and table["as_expected"] == 2 and not table["missing"]
    assert table["commands"] == ["run part 1", "run part 2"]   # each once
    saved = json.loads((tmp_path / "all" / "sweep.json").read_text())
    assert [r["number"] for r in saved["rows"]] == [1, 2]
    assert "run part 1" in (tmp_path / "all" / "sweep.md").read_text()


def test_reasons_in_the_tables_name_no_folder_of_the_machine():
    r = Record(id="level1_051_ref", problem="/srv/x/KernelBench/level1/51_Argmax.py",
               candidate="/srv/x/sweep/level1/051_ref.py", verdict="error", fault="problem",
               error="/srv/x/KernelBench/level1/51_Argmax.py:9: the reference failed")
    info = {(1, 51): {"name": "51_Argmax", "file": "level1/51_Argmax.py", "output": None, "shape_from": None,
                      "shape_error": "meta: no kernel"}}
    table = sweep.tabulate([r], info)
    assert table["exits"][0]["reason"] == "level1/51_Argmax.py:9: the reference failed"
    assert "/srv/x" not in json.dumps(table)
