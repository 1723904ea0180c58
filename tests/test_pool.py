"""The device pool (`kernelvet batch --gpus`, `--devices`) on the CPU, with several CPU devices: a
run interrupted with SIGINT and resumed (every id once, each with its corpus verdict), a job whose
judge dies vetted once elsewhere and its device given a fresh judge, a device whose judges die
problem after problem or whose vets keep failing in the harness taken out, jobs no device is left to take recorded as such; the queue's placement
and the pool's device names as units."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest
from rich.console import Console

from kernelvet.batch import jobs as jobs_mod
from kernelvet.batch import runner
from kernelvet.batch.engine import VetOptions
from kernelvet.batch.jobs import Job, ProblemGroup
from kernelvet.batch.pool import PoolEngine, Slot, _Queue, device_slots, gpu_slots
from kernelvet.batch.results import read_records
from kernelvet.errors import UsageError

from .batch_runs import batch_command, batch_env, expected as _expected, interrupt_after_first, resume, write_manifest

FAILING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pool_judges.py")

JOBS = {   # id -> corpus entry; the hang is second, so a SIGINT after the first verdict lands in a vet
    "relu-honest": "relu",
    "mm-hang": "hang_forever",
    "relu-inplace": "inplace_relu",
    "mm-library": "torch_mm",
    "mm-honest": "broadcast_matmul",
}


def _manifest(tmp_path, jobs=JOBS) -> str:
    return write_manifest(tmp_path, jobs)


def _env() -> dict:
    return batch_env()


def _batch(*args) -> list[str]:
    return batch_command(*args, devices=("--devices", "cpu,cpu,cpu"))


def test_three_cpu_devices_interrupted_then_resumed_every_id_once(tmp_path):
    manifest, out = _manifest(tmp_path), tmp_path / "results.jsonl"
    _, first = interrupt_after_first(_batch("--manifest", manifest, "--out", out), out, JOBS, wait_s=300)
    for r in resume(_batch("--manifest", manifest, "--out", out), out, JOBS, first):
        assert r.slot in {"cpu:0", "cpu:1", "cpu:2"} and r.retried is None
    # no device judge outlives the run
    assert not [p for p in _children_named("kernelvet.batch.devjudge")], "a device judge is still running"


def _children_named(needle: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmd and str(os.getpid()) == _ppid(pid):
            found.append(cmd)
    return found


def _ppid(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return ""


def _failing(name: str, how: str) -> Slot:
    return Slot(name, "cpu", (("CUDA_VISIBLE_DEVICES", ""),), (sys.executable, FAILING, how))


def _good(name: str) -> Slot:
    return Slot(name, "cpu", (("CUDA_VISIBLE_DEVICES", ""),))


def _run(tmp_path, engine, jobs=JOBS):
    out = tmp_path / "results.jsonl"
    code = runner.run(jobs_mod.from_manifest(_manifest(tmp_path, jobs)), str(out), resume=False, engine=engine,
                      console=Console(file=open(os.devnull, "w")), show_progress=False)
    records, _ = read_records(str(out))
    return code, records


def test_a_job_whose_judge_dies_is_vetted_once_on_another_device_and_the_device_gets_a_fresh_judge(tmp_path):
    jobs = {"relu-honest": "relu", "relu-inplace": "inplace_relu"}
    engine = PoolEngine(VetOptions(device="auto"), [_failing("cpu:0", "dies-on-first-job"), _good("cpu:1")])
    code, records = _run(tmp_path, engine, jobs)
    assert code == 0
    assert sorted(r.id for r in records) == sorted(jobs)            # nothing lost, nothing twice
    assert engine.out_of_pool == {}                                 # deaths in one problem's vets: not out
    for r in records:
        verdict, checks = _expected(jobs[r.id])
        assert (r.verdict, {c for c, _ in r.failed}, r.slot) == (verdict, checks, "cpu:1"), r
    retried = [r for r in records if r.retried]
    assert retried                                                  # each job a judge on cpu:0 died in
    for r in retried:
        assert r.retried.startswith("its judge on cpu:0 died in the vet: the device judge on cpu:0 exited with code 9")


def test_a_job_whose_second_judge_dies_too_is_an_error_that_says_so(tmp_path):
    jobs = {"relu-honest": "relu"}   # one job: the device without it waits for it, then takes it
    engine = PoolEngine(VetOptions(device="auto"), [_failing("cpu:0", "dies-on-first-job"),
                                                    _failing("cpu:1", "dies-on-first-job")])
    code, records = _run(tmp_path, engine, jobs)
    assert code == 0
    [r] = records
    assert (r.id, r.verdict, r.fault) == ("relu-honest", "error", "harness")
    assert r.error.startswith("not vetted: the device judge on cpu:")
    assert "exited with code 9 (its second vet; first its judge on cpu:" in r.error
    assert r.retried.startswith("its judge on cpu:")
    assert engine.out_of_pool == {}


def test_a_judge_the_host_kills_costs_only_its_own_job(tmp_path):
    """A pool of one device (`--gpus all` on a one-GPU host): the job whose vet the host's
    out-of-memory killer ends is an error record that says so; a fresh judge vets the rest."""
    jobs = {"relu-honest": "relu", "kill-me": "relu", "relu-inplace": "inplace_relu"}
    engine = PoolEngine(VetOptions(device="auto"), [_failing("cpu:0", "killed-by-kill-jobs")])
    code, records = _run(tmp_path, engine, jobs)
    assert code == 0                                                # the run itself finished
    by_id = {r.id: r for r in records}
    assert sorted(by_id) == sorted(jobs)
    killed = by_id.pop("kill-me")
    assert (killed.verdict, killed.fault, killed.slot) == ("error", "harness", "cpu:0")
    assert "killed by signal 9 (SIGKILL: on Linux most often the out-of-memory killer" in killed.error
    for r in by_id.values():
        verdict, checks = _expected(jobs[r.id])
        assert (r.verdict, {c for c, _ in r.failed}, r.retried) == (verdict, checks, None), r
    assert engine.out_of_pool == {}


def test_judges_that_die_in_problem_after_problem_take_the_device_out(tmp_path):
    same = {f"relu-{n}": "relu" for n in range(3)}   # deaths in one problem's vets count once
    engine = PoolEngine(VetOptions(device="auto"), [_failing("cpu:0", "dies-on-first-job")], max_deaths=2)
    code, records = _run(tmp_path, engine, same)
    assert sorted(r.id for r in records) == sorted(same)
    assert all(r.error.startswith("not vetted: the device judge on cpu:0 exited with code 9") for r in records)
    assert engine.out_of_pool == {}
    (tmp_path / "results.jsonl").unlink()
    two = {"relu-honest": "relu", "mm-library": "torch_mm", "mm-honest": "broadcast_matmul"}
    engine = PoolEngine(VetOptions(device="auto"), [_failing("cpu:0", "dies-on-first-job")], max_deaths=2)
    code, records = _run(tmp_path, engine, two)
    assert sorted(r.id for r in records) == sorted(two)             # nothing lost
    assert {r.verdict for r in records} == {"error"}
    assert "its judges died in vets of 2 problems in a row" in engine.out_of_pool["cpu:0"]
    assert sum("no device of the pool is left to take it" in r.error for r in records) == 1


def test_vets_that_keep_failing_in_the_harness_take_the_device_out(tmp_path):
    jobs = {"relu-0": "relu", "relu-1": "relu", "mm-0": "broadcast_matmul", "mm-1": "broadcast_matmul"}
    engine = PoolEngine(VetOptions(device="auto"), [_failing("cpu:0", "harness-fails"), _good("cpu:1")],
                        max_harness=2)
    code, records = _run(tmp_path, engine, jobs)
    assert code == 0
    assert sorted(r.id for r in records) == sorted(jobs)
    assert "vets of 2 problems in a row on cpu:0 failed in the harness" in engine.out_of_pool["cpu:0"]
    assert {r.verdict for r in records} == {"pass"}                 # the held failures, vetted again on cpu:1
    assert {r.slot for r in records} == {"cpu:1"}
    # the held run, when the second problem's failure lands: that one, and one or both of the first's
    assert collections.Counter(bool(r.retried) for r in records)[True] in (2, 3)


def test_one_problems_harness_failures_leave_the_device_in_the_pool(tmp_path):
    """Every candidate of a problem whose own reference fails (ill-conditioned) fails in the
    harness: the problem's records say so, and the device goes on to the next problem."""
    jobs = {f"relu-{n}": "relu" for n in range(3)}
    engine = PoolEngine(VetOptions(device="auto"), [_failing("cpu:0", "harness-fails")], max_harness=2)
    code, records = _run(tmp_path, engine, jobs)
    assert sorted(r.id for r in records) == sorted(jobs)
    assert {(r.fault, r.error) for r in records} == {("harness", "the worker died before it answered (signal 9)")}
    assert engine.out_of_pool == {}


def _group(problem: str, n: int) -> ProblemGroup:
    return ProblemGroup(problem, tuple(Job(f"{problem}-{i}", problem, f"/c/{problem}{i}.py") for i in range(n)))


def test_the_queue_keeps_a_device_on_its_problem_and_spreads_the_problems():
    q = _Queue([_group("a", 3), _group("b", 3)])
    first = {s: q.take(s).job.problem for s in ("x", "y")}
    assert first == {"x": "a", "y": "b"}                 # a free device takes a problem nobody is on
    q.done("x")
    q.done("y")
    assert q.take("x").job.problem == "a"                # and keeps to its own
    q.done("x")
    assert q.take("x").job.problem == "a"
    q.done("x")
    assert q.take("x").job.problem == "b"                # then joins the open one that is left
    q.done("x")


def test_a_job_given_back_goes_to_another_device_only():
    from kernelvet.batch.pool import _Task
    q = _Queue([])
    q.give_back("x", [_Task(Job("j", "p", "/c.py"), retried="x taken out", not_on="x")])
    assert q.take("x") is None                           # nobody else is busy: nothing for x
    task = q.take("y")
    assert task.job.id == "j" and task.retried == "x taken out"


def test_gpu_slots_see_one_gpu_each(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    slots = gpu_slots("all", count=lambda: 3)
    assert [(s.name, s.device, dict(s.env)) for s in slots] == [
        (f"cuda:{i}", "cuda", {"CUDA_VISIBLE_DEVICES": str(i)}) for i in range(3)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")   # indices are those this process sees
    assert [dict(s.env)["CUDA_VISIBLE_DEVICES"] for s in gpu_slots("0,1")] == ["4", "6"]
    assert [s.name for s in device_slots("cpu,cpu")] == ["cpu:0", "cpu:1"]


@pytest.mark.parametrize("spec, needle", [("0,0", "named twice"), ("5", "does not exist"), ("a,b", "comma-separated")])
def test_gpu_mistakes_are_one_line(monkeypatch, spec, needle):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with pytest.raises(UsageError, match=needle):
        gpu_slots(spec)


def test_pool_flags_conflicting_with_device_exit_2(tmp_path, capsys):
    from kernelvet import cli
    manifest = _manifest(tmp_path, {"relu-honest": "relu"})
    code = cli.main(["batch", "--manifest", manifest, "--out", str(tmp_path / "o.jsonl"), "--device", "cpu",
                     "--devices", "cpu,cpu"])
    assert code == 2
    assert "give one" in capsys.readouterr().err
    code = cli.main(["batch", "--manifest", manifest, "--out", str(tmp_path / "o.jsonl"), "--devices", "cpu,tpu"])
    assert code == 2
    assert "'tpu' is not cpu or cuda:N" in capsys.readouterr().err


@pytest.mark.gpu
def test_every_gpu_of_the_host_gives_each_candidate_its_corpus_verdict(tmp_path):
    import torch
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    jobs = {"relu-honest": "relu", "relu-inplace": "inplace_relu", "mm-library": "torch_mm",
            "mm-honest": "broadcast_matmul"}
    manifest, out = _manifest(tmp_path, jobs), tmp_path / "results.jsonl"
    done = subprocess.run([sys.executable, "-m", "kernelvet", "batch", "--gpus", "all", "--no-progress",
                           "--manifest", manifest, "--out", str(out)], env=_env(), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, (done.stdout, done.stderr)
    records, _ = read_records(str(out))
    assert sorted(r.id for r in records) == sorted(jobs)
    for r in records:
        verdict, checks = _expected(jobs[r.id])
        assert (r.verdict, {c for c, _ in r.failed}) == (verdict, checks), r
    assert len({r.slot for r in records}) >= 2                     # the work was spread


def test_a_device_judge_whose_device_stops_computing_says_so_and_ends(monkeypatch):
    from kernelvet.batch import devjudge
    from kernelvet.batch.results import Record
    monkeypatch.setattr(devjudge.DeviceJudge, "start", lambda self: "cuda:0")
    monkeypatch.setattr(devjudge.DeviceJudge, "handle", lambda self, job: Record(
        id=job.id, problem=job.problem, candidate=job.candidate, verdict="error", fault="harness", error="x"))
    monkeypatch.setattr(devjudge, "probe", lambda device: "CUDA error: an illegal memory access was encountered")
    job = Job("j", "matmul", "/c.py").to_json()
    lines = iter([json.dumps({"options": {"device": "cuda"}}), json.dumps({"job": job}), json.dumps({"job": job})])
    sent = []
    assert devjudge.serve(lines, sent.append) == 3
    assert [next(iter(m)) for m in sent] == ["ready", "record", "poisoned"]   # the second job never ran
    assert "illegal memory access" in sent[2]["poisoned"]
