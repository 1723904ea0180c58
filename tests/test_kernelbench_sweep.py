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
