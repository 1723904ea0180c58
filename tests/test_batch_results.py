"""The batch results file and job lists: records appended whole, resume parsing, a torn last line,
and every user mistake as one UsageError. No worker starts here."""

from __future__ import annotations

import json
import os

import pytest

from kernelvet import practice
from kernelvet.batch import jobs
from kernelvet.batch.results import RECORD_VERSION, Record, ResultsFile, read_records
from kernelvet.errors import UsageError


def rec(i: str, verdict: str = "pass", **kw) -> Record:
    return Record(id=i, problem="p.py", candidate=f"{i}.py", verdict=verdict, vet_s=1.5, finished_at=1.0, **kw)


# --------------------------------------------------------------------------- results file


def test_append_writes_one_versioned_line_per_record(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultsFile(str(out), resume=False) as f:
        f.append(rec("a"))
        f.append(rec("b", "reject", failed=(("library-call", "calls torch.mm"),),
                     timing={"median_ms": 1.0, "speedup": float("inf")}))
    lines = out.read_text().splitlines()
    assert len(lines) == 2
    a, b = (json.loads(x) for x in lines)
    assert a["version"] == RECORD_VERSION and a["id"] == "a" and a["exit"] == 0 and a["failed"] == []
    assert b["exit"] == 1 and b["failed"] == [{"check": "library-call", "summary": "calls torch.mm"}]
    assert b["timing"] == {"median_ms": 1.0, "speedup": None}   # JSON has no inf
    records, end = read_records(str(out))
    assert [r.id for r in records] == ["a", "b"] and end == out.stat().st_size
    assert records[1].failed == (("library-call", "calls torch.mm"),)


def test_each_record_is_on_disk_as_append_returns(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultsFile(str(out), resume=False) as f:
        f.append(rec("a"))
        assert [r.id for r in read_records(str(out))[0]] == ["a"]   # read by another handle, file still open
        f.append(rec("b"))
        assert [r.id for r in read_records(str(out))[0]] == ["a", "b"]


def test_resume_skips_written_ids_and_keeps_appending(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultsFile(str(out), resume=False) as f:
        f.append(rec("a"))
    with ResultsFile(str(out), resume=True) as f:
        assert set(f.done) == {"a"}
        f.append(rec("b", "error", error="boom", fault="harness"))
    records, _ = read_records(str(out))
    assert [(r.id, r.verdict, r.fault) for r in records] == [("a", "pass", None), ("b", "error", "harness")]


def test_a_torn_last_line_is_dropped_and_cut_before_appending(tmp_path):
    out = tmp_path / "r.jsonl"
    whole = rec("a").line()
    torn = rec("b").line()[:37]           # a write cut short: no newline
    out.write_bytes(whole + torn)
    records, end = read_records(str(out))
    assert [r.id for r in records] == ["a"] and end == len(whole)
    with ResultsFile(str(out), resume=True) as f:
        assert set(f.done) == {"a"}       # b runs again
        f.append(rec("b"))
    assert out.read_bytes() == whole + rec("b").line()


def test_without_resume_a_file_with_verdicts_is_refused(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_bytes(rec("a").line())
    with pytest.raises(UsageError, match="already holds 1 verdicts; --resume"):
        ResultsFile(str(out), resume=False)
    assert out.read_bytes() == rec("a").line()   # untouched


def test_a_corrupt_line_in_the_middle_names_its_line(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_bytes(rec("a").line() + b"{not json\n" + rec("b").line())
    with pytest.raises(UsageError, match=r"r\.jsonl:2: not a kernelvet batch record"):
        ResultsFile(str(out), resume=True)
    out.write_bytes(rec("a").line() + json.dumps({"version": 99, "id": "x"}).encode() + b"\n")
    with pytest.raises(UsageError, match=r":2: not a kernelvet batch record \(not a version-1"):
        read_records(str(out))


def test_two_batches_cannot_write_one_file(tmp_path):
    out = tmp_path / "r.jsonl"
    with ResultsFile(str(out), resume=False):
        with pytest.raises(UsageError, match="another kernelvet batch is writing it"):
            ResultsFile(str(out), resume=True)


def test_out_in_a_missing_directory_or_a_directory(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        ResultsFile(str(tmp_path / "nope" / "r.jsonl"), resume=False)
    with pytest.raises(UsageError, match="is a directory"):
        ResultsFile(str(tmp_path), resume=False)


def test_a_record_has_a_known_verdict():
    with pytest.raises(ValueError):
        rec("a", "maybe")


# --------------------------------------------------------------------------- manifests


def _manifest(tmp_path, *lines) -> str:
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return str(path)


def test_manifest_paths_resolve_against_its_folder(tmp_path):
    (tmp_path / "p.py").write_text("x = 1\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "k.py").write_text("x = 1\n")
    path = _manifest(tmp_path, {"id": 7, "problem": "p.py", "candidate": "c/k.py", "allow": ["library-call"]},
                     "# a comment", "", {"id": "b", "problem": "matmul", "candidate": "c/k.py", "timeout": 5})
    got = jobs.from_manifest(path)
    assert [(j.id, j.problem, j.candidate, j.allow, j.timeout) for j in got] == [
        ("7", str(tmp_path / "p.py"), str(tmp_path / "c" / "k.py"), ("library-call",), None),
        ("b", "matmul", str(tmp_path / "c" / "k.py"), (), 5.0)]


@pytest.mark.parametrize("line, needle", [
    ("{oops", ":1: not a JSON object"),
    ("[1, 2]", ":1: expected a JSON object"),
    ({"id": "a", "problem": "matmul"}, ":1: missing candidate"),
    ({"id": "a", "problem": "matmul", "candidate": "k.py", "seed": 1}, ":1: unknown key 'seed'"),
    ({"id": "", "problem": "matmul", "candidate": "k.py"}, ":1: id must be"),
    ({"id": "a", "problem": "matmul", "candidate": "gone.py"}, "candidate"),
    ({"id": "a", "problem": "gone.py", "candidate": "k.py"}, "problem"),
    ({"id": "a", "problem": "matmul", "candidate": "k.py", "allow": ["no-such"]}, "unknown check id 'no-such'"),
    ({"id": "a", "problem": "matmul", "candidate": "k.py", "allow": ["worker"]}, "cannot be waived"),
    ({"id": "a", "problem": "matmul", "candidate": "k.py", "timeout": -1}, "timeout must be"),
])
def test_bad_manifest_lines_name_file_and_line(tmp_path, line, needle):
    (tmp_path / "k.py").write_text("x = 1\n")
    path = _manifest(tmp_path, line)
    with pytest.raises(UsageError) as exc:
        jobs.from_manifest(path)
    assert needle in str(exc.value) and "m.jsonl:1" in str(exc.value)


def test_duplicate_ids_and_empty_or_missing_manifests(tmp_path):
    (tmp_path / "k.py").write_text("x = 1\n")
    line = {"id": "a", "problem": "matmul", "candidate": "k.py"}
    with pytest.raises(UsageError, match=r"m\.jsonl:2: id 'a' is already used at .*m\.jsonl:1"):
        jobs.from_manifest(_manifest(tmp_path, line, line))
    with pytest.raises(UsageError, match="no jobs"):
        jobs.from_manifest(_manifest(tmp_path, "# nothing"))
    with pytest.raises(UsageError, match="no such file"):
        jobs.from_manifest(str(tmp_path / "none.jsonl"))


# --------------------------------------------------------------------------- problem and candidate folders


def _kernelbench_tree(tmp_path):
    for level, names in {1: ["1_Square_matmul.py", "19_ReLU.py"], 2: ["3_Conv_Add.py"]}.items():
        d = tmp_path / "KernelBench" / f"level{level}"
        d.mkdir(parents=True)
        for n in names:
            (d / n).write_text("x = 1\n")
    runs = tmp_path / "runs"
    runs.mkdir()
    for n in ["level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_1_kernel.py",
              "level_2_problem_3_sample_0_kernel.py"]:
        (runs / n).write_text("x = 1\n")
    return tmp_path / "KernelBench", runs


def test_kernelbench_tree_pairs_samples_by_level_and_problem(tmp_path):
    root, runs = _kernelbench_tree(tmp_path)
    got = {j.id: os.path.relpath(j.problem, root) for j in jobs.from_dirs(str(root), str(runs))}
    assert got == {"level_1_problem_19_sample_0": "level1/19_ReLU.py",
                   "level_1_problem_19_sample_1": "level1/19_ReLU.py",
                   "level_2_problem_3_sample_0": "level2/3_Conv_Add.py"}
    groups = jobs.group_by_problem(jobs.from_dirs(str(root), str(runs)))
    assert [len(g.jobs) for g in groups] == [2, 1]
    # one level's folder as --problems: its samples of other levels have no problem there
    (runs / "level_1_problem_19_sample_0_kernel.py").unlink()
    (runs / "level_1_problem_19_sample_1_kernel.py").unlink()
    assert [j.id for j in jobs.from_dirs(str(root / "level2"), str(runs))] == ["level_2_problem_3_sample_0"]


def test_kernelbench_tree_mistakes(tmp_path):
    root, runs = _kernelbench_tree(tmp_path)
    (runs / "level_3_problem_1_sample_0_kernel.py").write_text("x = 1\n")
    with pytest.raises(UsageError, match="no level 3 problem 1 under --problems"):
        jobs.from_dirs(str(root), str(runs))
    (runs / "level_3_problem_1_sample_0_kernel.py").unlink()
    (runs / "my_kernel.py").write_text("x = 1\n")
    with pytest.raises(UsageError, match="not named as KernelBench names its samples"):
        jobs.from_dirs(str(root), str(runs))
    with pytest.raises(UsageError, match="--problems .*: no such directory"):
        jobs.from_dirs(str(tmp_path / "none"), str(runs))
    with pytest.raises(UsageError, match="--candidates .*: no such directory"):
        jobs.from_dirs(str(root), str(tmp_path / "none"))


def test_a_flat_problem_folder_pairs_by_subfolder(tmp_path):
    probs = tmp_path / "problems"
    probs.mkdir()
    (probs / "relu.py").write_text("x = 1\n")
    cands = tmp_path / "cands" / "relu"
    cands.mkdir(parents=True)
    (cands / "a.py").write_text("x = 1\n")
    got = jobs.from_dirs(str(probs), str(tmp_path / "cands"))
    assert [(j.id, j.problem) for j in got] == [("relu/a", str(probs / "relu.py"))]
    (tmp_path / "cands" / "stray.py").write_text("x = 1\n")
    with pytest.raises(UsageError, match="expected under a folder named after its problem file"):
        jobs.from_dirs(str(probs), str(tmp_path / "cands"))


def test_the_practice_problems_folder_is_a_problem_set():
    index = jobs.problem_index(practice.PROBLEMS)
    assert "relu" in index and all(p.endswith(".py") for p in index.values())


def test_resume_names_ids_recorded_for_another_candidate(tmp_path):
    import io
    from rich.console import Console
    from kernelvet.batch import runner
    out = tmp_path / "r.jsonl"
    with ResultsFile(str(out), resume=False) as f:
        f.append(rec("a"))
    job = jobs.Job("a", "matmul", str(tmp_path / "other.py"))
    text = io.StringIO()

    class NoEngine:
        def run(self, groups):
            assert [j.id for g in groups for j in g.jobs] == []   # nothing left to vet
            return iter(())
    rc = runner.run([job], str(out), resume=True, engine=NoEngine(), console=Console(file=text, width=200),
                    show_progress=False)
    assert rc == 0
    assert "1 ids in" in text.getvalue() and "recorded for other candidate files (first: a)" in text.getvalue()
    assert "1 already in the file, skipped" in text.getvalue()
