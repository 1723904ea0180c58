"""`kernelvet batch` on the CPU: honest and cheating candidates from the practice corpus, a run
interrupted with SIGINT after its first verdicts and resumed (every id exactly once, each with its
verdict), a problem's reference shared by its candidates, and one line for each user mistake."""

from __future__ import annotations

import gc
import json
import os

import pytest
import torch

from kernelvet import cli, judge, practice
from kernelvet.batch.results import read_records
from kernelvet.errors import UsageError
from kernelvet.problem import Problem, load_problem
from kernelvet.refcache import ReferenceCache

from .batch_runs import batch_command, interrupt_after_first, resume, write_manifest

# id -> (corpus entry, the checks that must reject it: none for an honest one). hang_forever is
# second: its vet lasts its whole timeout, so the SIGINT sent after the first verdict lands in it.
JOBS = {
    "mm-library": "torch_mm",
    "mm-hang": "hang_forever",
    "mm-honest": "broadcast_matmul",
    "relu-honest": "relu",
    "relu-inplace": "inplace_relu",
}


def _batch(*args) -> list[str]:
    return batch_command(*args)


def test_interrupted_then_resumed_every_id_once_with_its_verdict(tmp_path):
    manifest, out = write_manifest(tmp_path, JOBS), tmp_path / "results.jsonl"
    stdout, first = interrupt_after_first(_batch("--manifest", manifest, "--out", out), out, JOBS, wait_s=240)
    assert "--resume continues" in stdout
    resume(_batch("--manifest", manifest, "--out", out), out, JOBS, first)


def test_a_problems_candidates_share_its_checked_sets_and_draw_their_own_unseen_ones(monkeypatch):
    built, drawn = [], []
    real_build, real_draw = Problem.build_model, judge.locked_draw

    def counted(self, init, weight_seed):
        built.append(weight_seed)
        return real_build(self, init, weight_seed)

    def recorded(problem, seed, on=None, keep=False):
        drawn.append(seed)
        return real_draw(problem, seed, on, keep)

    monkeypatch.setattr(Problem, "build_model", counted)
    monkeypatch.setattr(judge.api, "locked_draw", recorded)   # where `vet` draws
    relu = os.path.join(practice.PROBLEMS, "relu.py")
    honest, cheat = practice.by_name("relu").path, practice.by_name("inplace_relu").path
    reports, per_vet = [], []
    with ReferenceCache(load_problem(relu)) as cache:
        for path in (honest, cheat, honest):
            before = len(drawn)
            reports.append(judge.vet(path, relu, device="cpu", reference=cache))
            per_vet.append(drawn[before:])
            if len(reports) == 1:
                shared = cache.get("cpu")
        assert cache.get("cpu") is shared
        shared_keys, made = set(shared.values), set(shared.refs64)
    assert [r.verdict.value for r in reports] == ["pass", "reject", "pass"]
    assert reports[0].seed == reports[1].seed == reports[2].seed == cache.seed
    assert len(built) == 1                                  # one reference model for the three vets
    assert {0, 1, 2, 3} <= made and {0, 1, 2, 3} <= shared_keys   # the warm-up's and fresh sets', kept
    assert not (made | shared_keys) & set(range(100, 200))        # never an unseen set: those are each vet's
    first, second, third = (set(d) for d in per_vet)
    assert len(per_vet[0]) == len(first) >= 4 + 5          # shared sets once, and five unseen of its own
    assert not second                                       # rejected before timing: nothing new drawn
    assert len(third) >= 5 and not third & first            # its unseen sets, drawn for it alone


def _tensors_of_at_least(n: int) -> int:
    return sum(1 for o in gc.get_objects() if issubclass(type(o), torch.Tensor) and o.numel() >= n)


def test_a_shared_problem_frees_each_vets_tensors_and_all_of_them_at_close_without_the_collector():
    """With the collector off: what a vet made goes with the vet (the shared reference refers to
    none of it: a big problem's second vet once ran out of memory beside its first's outputs), and
    closing the problem frees its sets and references (the next problem plans on free memory)."""
    relu = os.path.join(practice.PROBLEMS, "relu.py")
    honest, cheat = practice.by_name("relu").path, practice.by_name("inplace_relu").path
    n = 1024 * 1024   # relu's set and output
    gc.collect()
    before = _tensors_of_at_least(n)
    gc.disable()
    try:
        with ReferenceCache(load_problem(relu)) as cache:
            judge.vet(honest, relu, device="cpu", reference=cache)
            after_first = _tensors_of_at_least(n)
            for path in (cheat, honest, honest):
                judge.vet(path, relu, device="cpu", reference=cache)
                assert _tensors_of_at_least(n) == after_first
        assert _tensors_of_at_least(n) == before
    finally:
        gc.enable()


def test_a_shared_reference_takes_its_own_seed():
    relu = os.path.join(practice.PROBLEMS, "relu.py")
    with ReferenceCache(load_problem(relu), seed=1) as other:
        with pytest.raises(UsageError, match="takes that reference's seed"):
            judge.vet(practice.by_name("relu").path, relu, device="cpu", reference=other, seed=2)


def test_a_broken_problem_and_a_malformed_candidate_are_records(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                      "        return x\n\ndef get_inputs():\n    raise RuntimeError('no inputs')\n\n"
                      "def get_init_inputs():\n    return []\n")
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\n")   # no ModelNew
    good = practice.by_name("relu").path
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(json.dumps(x) for x in [
        {"id": "b1", "problem": str(broken), "candidate": good},
        {"id": "b2", "problem": str(broken), "candidate": good},
        {"id": "bad", "problem": os.path.join(practice.PROBLEMS, "relu.py"), "candidate": str(bad)},
    ]) + "\n")
    out = tmp_path / "r.jsonl"
    rc = cli.main(["batch", "--manifest", str(manifest), "--out", str(out), "--device", "cpu", "--no-progress"])
    capsys.readouterr()
    assert rc == 0
    got = {r.id: r for r in read_records(str(out))[0]}
    assert got["b1"].verdict == got["b2"].verdict == "invalid" and got["b1"].fault == "problem"
    assert "get_inputs()" in got["b1"].error and got["b2"].error == got["b1"].error
    assert got["b2"].vet_s == 0.0                # the problem failed once: not vetted again
    assert got["bad"].verdict == "invalid" and got["bad"].fault == "candidate" and "ModelNew" in got["bad"].error


def test_the_runs_library_policy_reaches_every_job(tmp_path, capsys):
    """--library-policy is the run's, as for `kernelvet check`: the library call the default policy
    rejects passes under `off`."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "mm", "problem": "matmul", "candidate": practice.by_name("torch_mm").path}) + "\n")
    verdicts = {}
    for policy in ((), ("--library-policy", "off")):
        out = tmp_path / f"r{len(policy)}.jsonl"
        rc = cli.main(["batch", "--manifest", str(manifest), "--out", str(out), "--device", "cpu", "--no-progress",
                       *policy])
        assert rc == 0
        (record,) = read_records(str(out))[0]
        verdicts[policy] = (record.verdict, {c for c, _ in record.failed})
    capsys.readouterr()
    assert verdicts[()] == ("reject", {"library-call"})
    assert verdicts[("--library-policy", "off")] == ("pass", set())


def test_a_check_that_could_not_decide_leaves_an_error_record_not_a_pass(tmp_path, capsys, monkeypatch):
    from kernelvet.checks import REGISTRY
    from kernelvet.ids import CheckId
    monkeypatch.setitem(REGISTRY, CheckId.PRECISION, lambda ev: 1 / 0)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"id": "relu", "problem": os.path.join(practice.PROBLEMS, "relu.py"),
                                    "candidate": practice.by_name("relu").path}) + "\n")
    out = tmp_path / "r.jsonl"
    assert cli.main(["batch", "--manifest", str(manifest), "--out", str(out), "--device", "cpu", "--no-progress"]) == 0
    capsys.readouterr()
    (record,) = read_records(str(out))[0]
    assert record.verdict == "error" and record.fault == "harness", record
    assert "precision: the check itself failed: ZeroDivisionError" in record.error


def test_a_job_that_failed_in_the_harness_says_where_and_the_next_starts_from_a_new_reference(
        tmp_path, capsys, monkeypatch):
    from kernelvet import metrics
    real_floor, built = metrics.error_floor, []
    real_build = Problem.build_model

    def once(inputs, ref64):
        if not built or len(built) > 1:
            return real_floor(inputs, ref64)
        raise RuntimeError("out of something")

    def counted(self, init, weight_seed):
        built.append(weight_seed)
        return real_build(self, init, weight_seed)

    monkeypatch.setattr(metrics, "error_floor", once)
    monkeypatch.setattr(Problem, "build_model", counted)
    manifest = tmp_path / "m.jsonl"
    relu, honest = os.path.join(practice.PROBLEMS, "relu.py"), practice.by_name("relu").path
    manifest.write_text("".join(json.dumps({"id": i, "problem": relu, "candidate": honest}) + "\n" for i in "ab"))
    out = tmp_path / "r.jsonl"
    cli.main(["batch", "--manifest", str(manifest), "--out", str(out), "--device", "cpu", "--no-progress"])
    capsys.readouterr()
    a, b = sorted(read_records(str(out))[0], key=lambda r: r.id)
    assert a.verdict == "error" and a.fault == "harness", a
    assert "internal error at kernelvet/judge/api.py:" in a.error and "RuntimeError: out of something" in a.error
    assert b.verdict == "pass", b
    assert len(built) == 2 and built[0] == built[1]   # the model made again, under the same secret seed


@pytest.mark.parametrize("argv, needle", [
    (["--out", "r.jsonl"], "give --problems DIR with --candidates DIR, or --manifest"),
    (["--manifest", "none.jsonl", "--out", "r.jsonl"], "--manifest none.jsonl: no such file"),
    (["--problems", "nowhere", "--candidates", ".", "--out", "r.jsonl"], "--problems nowhere: no such directory"),
    (["--manifest", "m.jsonl", "--candidates", ".", "--out", "r.jsonl"], "give one"),
    (["--manifest", "m.jsonl", "--out", "r.jsonl", "--allow", "nope"], "unknown check id 'nope'"),
    (["--manifest", "m.jsonl", "--out", "nodir/r.jsonl"], "does not exist"),
])
def test_user_mistakes_are_one_line_exit_2(tmp_path, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "a", "problem": "matmul",
                                                  "candidate": practice.by_name("torch_mm").path}) + "\n")
    rc = cli.main(["batch", "--device", "cpu", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelvet: error:") and needle in lines[0], err


CUDA_JOBS = ["triton_gemm_ieee", "cuda_tiled_gemm", "hidden_stream", "torch_mm", "decoy_kernel", "triton_softmax",
             "pointer_cache", "relu", "inplace_relu"]


@pytest.mark.gpu
def test_a_cuda_batch_gives_each_candidate_its_corpus_verdict(tmp_path, capsys):
    """On the device: one judge for the run (judging there), a shared reference per problem, and
    the same verdicts as one vet per candidate (the corpus's expectations on CUDA)."""
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text("".join(json.dumps({"id": n, "problem": practice.by_name(n).problem_ref,
                                            "candidate": practice.by_name(n).path}) + "\n" for n in CUDA_JOBS))
    out = tmp_path / "r.jsonl"
    rc = cli.main(["batch", "--manifest", str(manifest), "--out", str(out), "--device", "cuda", "--no-progress",
                   "--library-policy", "no-reference-ops"])   # the corpus's own policy on CUDA
    capsys.readouterr()
    assert rc == 0
    records = {r.id: r for r in read_records(str(out))[0]}
    assert sorted(records) == sorted(CUDA_JOBS)
    for name, r in records.items():
        entry = practice.by_name(name)
        failed = {c for c, _ in r.failed}
        assert r.exit_code in (0, 1), r
        assert entry.as_expected(failed, "cuda"), (name, r.verdict, failed, r.error)
        if entry.kind == "honest":
            assert r.timing and r.timing["median_ms"] > 0
