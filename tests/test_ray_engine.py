"""`--engine ray` on a local Ray cluster of CPU workers: the same verdicts as the local pool for
honest and cheating candidates, a judge actor that dies taken out and its job vetted once on
another. Skipped where Ray is not installed (`pip install kernelvet[ray]`)."""

from __future__ import annotations

import json
import os
import threading

import pytest
from rich.console import Console

from kernelvet import practice
from kernelvet.batch import jobs as jobs_mod
from kernelvet.batch import runner
from kernelvet.batch.engine import VetOptions
from kernelvet.batch.pool import PoolEngine
from kernelvet.batch.results import read_records
from kernelvet.errors import UsageError

ray = pytest.importorskip("ray")
from kernelvet.batch.ray_engine import RayJudge, ray_engine, ray_slots  # noqa: E402

JOBS = {"relu-honest": "relu", "relu-inplace": "inplace_relu", "mm-library": "torch_mm",
        "mm-honest": "broadcast_matmul"}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _expected(name: str) -> tuple[str, set[str]]:
    entry = practice.by_name(name)
    return ("pass", set()) if entry.kind == "honest" else ("reject", {str(c) for c in entry.catches})


def _run(tmp_path, engine, jobs):
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text("".join(json.dumps({"id": i, "problem": practice.by_name(n).problem_ref,
                                            "candidate": practice.by_name(n).path}) + "\n" for i, n in jobs.items()))
    out = tmp_path / "results.jsonl"
    code = runner.run(jobs_mod.from_manifest(str(manifest)), str(out), resume=False, engine=engine,
                      console=Console(file=open(os.devnull, "w")), show_progress=False)
    return code, read_records(str(out))[0]


def test_ray_actors_give_the_local_pools_verdicts(cluster, tmp_path):
    code, records = _run(tmp_path, ray_engine(VetOptions(), devices="cpu,cpu"), JOBS)
    assert code == 0
    assert sorted(r.id for r in records) == sorted(JOBS)
    for r in records:
        verdict, checks = _expected(JOBS[r.id])
        assert (r.verdict, {c for c, _ in r.failed}) == (verdict, checks), r
        assert r.slot in {"ray-cpu:0", "ray-cpu:1"}


_HANDED = threading.Event()


class _KilledOnFirstJob(RayJudge):
    """A judge actor whose process is killed as its first job arrives (a node lost)."""

    def vet(self, job):
        ray.kill(self.actor)
        _HANDED.set()
        return super().vet(job)


class _ReadyAfterTheFirstJob(RayJudge):
    """A judge that starts taking jobs only once the other has been handed one."""

    def ready(self):
        _HANDED.wait(timeout=300)
        return super().ready()


def test_a_dead_actor_is_taken_out_and_its_job_vetted_once_elsewhere(cluster, tmp_path):
    slots = ray_slots(None, "cpu,cpu")
    judges = {slots[0].name: _KilledOnFirstJob, slots[1].name: _ReadyAfterTheFirstJob}
    engine = PoolEngine(VetOptions(), slots, judge=lambda slot, options: judges[slot.name](slot, options))
    jobs = {"relu-honest": "relu", "relu-inplace": "inplace_relu"}
    code, records = _run(tmp_path, engine, jobs)
    assert code == 0
    assert sorted(r.id for r in records) == sorted(jobs)
    for r in records:
        verdict, checks = _expected(jobs[r.id])
        assert (r.verdict, {c for c, _ in r.failed}, r.slot) == (verdict, checks, "ray-cpu:1"), r
    assert _HANDED.is_set() and "the Ray judge ray-cpu:0" in engine.out_of_pool["ray-cpu:0"]
    retried = [r for r in records if r.retried]
    assert len(retried) == 1 and retried[0].retried.startswith("ray-cpu:0 taken out of the pool")


def test_ray_device_mistakes(cluster):
    with pytest.raises(UsageError, match="only cpu devices"):
        ray_slots(None, "cuda:0")
    with pytest.raises(UsageError, match="no GPU"):
        ray_slots("all", None)
    assert [s.num_gpus for s in ray_slots("2", None)] == [1.0, 1.0]
