"""The judge out of memory while a candidate's worker holds part of the device: the candidate's
doing where its side holds more than the problem's plan allows (`worker` rejects it), else an
exit 2 for this candidate alone, which a batch does not hold against the problem's others."""

from __future__ import annotations

import json
import time

import pytest
import torch

from kernelvet import cli, sizes, spawn, vet
from kernelvet.batch.results import read_records
from kernelvet.errors import OutOfMemoryBesideCandidate, ReferenceOutOfMemory
from kernelvet.ids import CheckId
from kernelvet.judge import api, memory_beside, plan
from kernelvet.refcache import PerVet
from kernelvet.report import Verdict

from .matrix import failed
from .test_problem_data import QUICK, as_candidate, problem, write

GIB = 1 << 30
ALLOW = ["library-call", "timers"]   # microsecond calls on a busy host: the data checks decide


def _plan_started(monkeypatch) -> list:
    """A list that holds an item from the candidate's load on (each vet's plan), for spies to read."""
    started = []
    real_load = plan.Plan.load

    def load(self, *a, **k):
        started.append(1)
        return real_load(self, *a, **k)

    monkeypatch.setattr(plan.Plan, "load", load)
    return started


def _out_of_memory_once_the_candidate_runs(monkeypatch) -> list:
    """Every float64 reference the judge makes while a candidate's worker runs runs out of memory,
    as beside a worker that took the device (the ones made before it, or after the worker is
    killed, do not)."""
    started, made = _plan_started(monkeypatch), []
    real_ref, real_kill = api._reference_of, spawn.WorkerHandle.kill

    def kill(self):
        started.clear()
        return real_kill(self)

    def reference_of(*a, **k):
        if started:
            made.append(a[-1])
            raise ReferenceOutOfMemory("p.py: the float64 reference (Model.forward) ran out of memory on cuda:0")
        return real_ref(*a, **k)

    monkeypatch.setattr(spawn.WorkerHandle, "kill", kill)
    monkeypatch.setattr(api, "_reference_of", reference_of)
    return made


def _problem(tmp_path):
    text = problem("return torch.relu(xs[0]) * 2", "return [torch.rand(6, 64)]")
    return write(tmp_path, "p.py", text), write(tmp_path, "h.py", as_candidate(text))


def test_the_plans_worker_share_counts_the_workers_terms_and_the_margin_is_above_it():
    size = sizes.ProblemSize(input_bytes=3 * GIB, largest_input=3 * GIB // 4, output_elements=3 * GIB // 4,
                             weight_bytes=0, largest_weight=0, output_itemsize=4)
    lean = sizes.Holding(lean=True, judge_on_host=True)
    planned = memory_beside.planned_share(size, lean)
    terms = sizes.footprint(size, lean).device_terms
    assert planned == sum(v for k, v in terms.items() if k.startswith("worker ")) and planned > 30 * GIB
    assert planned < sum(terms.values())   # the judge's own terms are not the worker's
    assert memory_beside.allowed(planned) == int(1.25 * planned) + 2 * GIB
    assert memory_beside.candidate_side("cpu") is None


def test_a_candidate_side_beyond_its_plan_when_the_judge_runs_out_is_rejected_by_worker(tmp_path, monkeypatch):
    made = _out_of_memory_once_the_candidate_runs(monkeypatch)
    monkeypatch.setattr(memory_beside, "candidate_side", lambda device: 70 * GIB)
    ref, honest = _problem(tmp_path)
    report = vet(honest, ref, device="cpu", settings=QUICK, allow=ALLOW)
    assert made, "no reference was made during the candidate's plan"
    assert report.verdict is Verdict.REJECT and failed(report) == {CheckId.WORKER}, report.dumps()
    summary = next(f.summary for f in report.failed)
    assert "70.0 GiB of the device by the device's account" in summary and "planned" in summary, summary


def test_the_worker_beyond_its_plan_is_asked_what_it_holds_and_its_word_is_shown_as_its_own(tmp_path, monkeypatch):
    """The census travels in the worker's `release` reply (empty off CUDA); its word, where it
    gives one, stands in the summary beside the device's account."""
    _out_of_memory_once_the_candidate_runs(monkeypatch)
    monkeypatch.setattr(memory_beside, "candidate_side", lambda device: 70 * GIB)
    real, asked = memory_beside.worker_account, []

    def account(w, census=True):
        got = real(w, census)
        asked.append((census, got))
        return {"allocated": 60 * GIB, "reserved": 61 * GIB, "storages": [[4 * GIB, 15]]} if census else got

    monkeypatch.setattr(memory_beside, "worker_account", account)
    ref, honest = _problem(tmp_path)
    report = vet(honest, ref, device="cpu", settings=QUICK, allow=ALLOW)
    assert (True, {}) in asked, asked   # asked on the CPU: an empty census, the reply accepted
    summary = next(f.summary for f in report.failed)
    assert "the worker says its allocator held 60.0 GiB in tensors and reserved 61.0 GiB, its largest " \
           "storages 4.0 GiB x15" in summary, summary


def test_a_candidate_side_within_its_plan_is_an_exit_2_naming_both_sides(tmp_path, monkeypatch):
    _out_of_memory_once_the_candidate_runs(monkeypatch)
    monkeypatch.setattr(memory_beside, "candidate_side", lambda device: 1 << 20)
    ref, honest = _problem(tmp_path)
    with pytest.raises(OutOfMemoryBesideCandidate, match=r"the candidate's worker held 1\.0 MiB of the device "
                                                         r"\(its plan: "):
        vet(honest, ref, device="cpu", settings=QUICK, allow=ALLOW)


def _batch_of_two(tmp_path, ref, honest, capsys) -> dict:
    """Two vets of `honest` against `ref` in one `kernelvet batch` on the CPU: their records by id."""
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("\n".join(json.dumps({"id": f"j{i}", "problem": ref, "candidate": honest}) for i in (1, 2)) + "\n")
    out = tmp_path / "r.jsonl"
    rc = cli.main(["batch", "--manifest", str(manifest), "--out", str(out), "--device", "cpu", "--no-progress",
                   *[a for w in ALLOW for a in ("--allow", w)]])
    capsys.readouterr()
    assert rc == 0
    return {r.id: r for r in read_records(str(out))[0]}


def test_a_judges_own_torch_out_of_memory_during_the_plan_is_judged_the_same(tmp_path, monkeypatch):
    started = _plan_started(monkeypatch)   # from the candidate's load on, the judge's allocations fail
    real_ref = api._reference_of

    def reference_of(*a, **k):
        if started:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_ref(*a, **k)

    monkeypatch.setattr(api, "_reference_of", reference_of)
    ref, honest = _problem(tmp_path)
    with pytest.raises(OutOfMemoryBesideCandidate, match="the judge ran out of memory on cpu"):
        vet(honest, ref, device="cpu", settings=QUICK, allow=ALLOW)


def _runs_out_once(monkeypatch, owner, name: str, exc: BaseException) -> tuple[list, list]:
    """`owner.name` raises `exc` the first time it runs during a candidate's plan. Returns that
    call's arguments (once it happened) and the worker's `release` requests, in order, each marked
    whether it came after that failure."""
    started, failed_once, asked = _plan_started(monkeypatch), [], []
    real, real_request = getattr(owner, name), spawn.WorkerHandle.request

    def once(*a, **k):
        if started and not failed_once:
            failed_once.append(a)
            raise exc
        return real(*a, **k)

    def request(self, type_, body=None, *a, **k):
        if type_ == "release":
            asked.append(dict(body or {}, after_failure=bool(failed_once)))
        return real_request(self, type_, body, *a, **k)

    monkeypatch.setattr(owner, name, once)
    monkeypatch.setattr(spawn.WorkerHandle, "request", request)
    monkeypatch.setattr(memory_beside, "candidate_side", lambda device: 1 << 20)
    return failed_once, asked


def test_a_reference_that_runs_out_once_during_the_plan_is_made_again_after_the_worker_returns_its_cache(
        tmp_path, monkeypatch):
    """An honest worker's allocator keeps the blocks of outputs and copies it freed: the judge asks
    for them back (a `release` with `empty_cache`) before it calls the device full."""
    failed_once, asked = _runs_out_once(monkeypatch, api, "_reference_of", ReferenceOutOfMemory(
        "p.py: the float64 reference (Model.forward) ran out of memory on cuda:0"))
    ref, honest = _problem(tmp_path)
    report = vet(honest, ref, device="cpu", settings=QUICK, allow=ALLOW)
    assert failed_once, "no reference was made during the candidate's plan"
    assert report.verdict is Verdict.PASS, report.dumps()
    assert any(body.get("empty_cache") for body in asked), asked


def test_the_candidate_side_is_read_after_the_worker_was_asked_for_its_cache(tmp_path, monkeypatch):
    """A comparison of the judge's that runs out (not made again): the worker is asked to give its
    cached blocks back before its side is read, which then counts what it holds."""
    from kernelvet import metrics
    started, order = _plan_started(monkeypatch), []
    real_compare, real_request = metrics._compare, spawn.WorkerHandle.request

    def compare(*a, **k):
        if started:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 128.00 MiB")
        return real_compare(*a, **k)

    def request(self, type_, body=None, *a, **k):
        if type_ == "release" and (body or {}).get("empty_cache"):
            order.append("release")
        return real_request(self, type_, body, *a, **k)

    def side(device):
        order.append("read")
        return 1 << 20

    monkeypatch.setattr(metrics, "_compare", compare)
    monkeypatch.setattr(spawn.WorkerHandle, "request", request)
    monkeypatch.setattr(memory_beside, "candidate_side", side)
    ref, honest = _problem(tmp_path)
    with pytest.raises(OutOfMemoryBesideCandidate, match=r"\(OutOfMemoryError at kernelvet/\S+:\d+ in \w+\)"):
        vet(honest, ref, device="cpu", settings=QUICK, allow=ALLOW)
    # made once more after the worker gave its cache back, then its side read after it was asked again
    assert order == ["release", "release", "read"], order


def test_a_comparison_that_runs_out_once_as_an_output_arrives_is_made_again_after_the_worker_returns_its_cache(
        tmp_path, monkeypatch):
    """A lean vet compares each output as it arrives. On a card where an honest worker's allocator
    keeps the blocks of the outputs it freed (50 GiB beside an 8 GiB output on an H100), the judge's
    comparison runs out: made again once the worker gave them back, the vet goes on."""
    from kernelvet import metrics

    from .test_sizes import _lean
    _lean(monkeypatch)
    failed_once, asked = _runs_out_once(monkeypatch, metrics, "_compare",
                                        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB"))
    ref, honest = _problem(tmp_path)
    report = vet(honest, ref, device="cpu", settings=QUICK, allow=ALLOW)
    assert failed_once, "no comparison was made during the candidate's plan"
    assert report.verdict is Verdict.PASS, report.dumps()
    # the worker was asked for its cache once the comparison ran out, not before
    assert [body["after_failure"] for body in asked if body.get("empty_cache")][:1] == [True], asked


def test_a_batch_vets_the_problems_other_candidates_after_an_out_of_memory_beside_one(tmp_path, monkeypatch, capsys):
    """One candidate's vet out of memory beside its worker (within the plan): fault `memory`, and
    the problem's next candidate is vetted, not handed the same record."""
    ref, honest = _problem(tmp_path)
    real_load, real_ref = plan.Plan.load, api._reference_of
    state = {"vets": 0, "running": False}

    def load(self, *a, **k):
        state["vets"] += 1
        state["running"] = True
        return real_load(self, *a, **k)

    def reference_of(*a, **k):
        if state["running"] and state["vets"] == 1:
            raise ReferenceOutOfMemory("p.py: the float64 reference (Model.forward) ran out of memory on cuda:0")
        return real_ref(*a, **k)

    monkeypatch.setattr(plan.Plan, "load", load)
    monkeypatch.setattr(api, "_reference_of", reference_of)
    got = _batch_of_two(tmp_path, ref, honest, capsys)
    assert got["j1"].verdict == "invalid" and got["j1"].fault == "memory", got["j1"]
    assert got["j2"].verdict == "pass" and got["j2"].vet_s > 0, got["j2"]


def test_a_shared_reference_made_again_during_a_vet_is_retried_after_its_worker_returns_its_cache(
        tmp_path, monkeypatch, capsys):
    """A batch shares a problem's references among its vets; a lean holding lets each go with its
    set, so a vet makes one again (the warm-up's, the overwrite's) beside its candidate's worker.
    Out of memory there once: made again after that worker gave its cached blocks back, as the
    vet's own references are."""
    from .test_sizes import _lean
    _lean(monkeypatch)
    ref, honest = _problem(tmp_path)
    real_load, real_ref, real_request = plan.Plan.load, api._reference_of, spawn.WorkerHandle.request
    state = {"vets": 0, "running": False, "failed": [], "asked": 0}

    def load(self, *a, **k):
        state["vets"] += 1
        state["running"] = True
        return real_load(self, *a, **k)

    def reference_of(model, made_on, judged_on, hold, values, key):
        shared = not isinstance(values, PerVet)   # the shared maker reads the shared draws
        if state["running"] and shared and not state["failed"]:
            state["failed"].append(key)
            raise ReferenceOutOfMemory("p.py: the float64 reference (Model.forward) ran out of memory on cuda:0")
        return real_ref(model, made_on, judged_on, hold, values, key)

    def request(self, type_, body=None, *a, **k):
        if type_ == "release" and (body or {}).get("empty_cache"):
            state["asked"] += 1
        return real_request(self, type_, body, *a, **k)

    monkeypatch.setattr(plan.Plan, "load", load)
    monkeypatch.setattr(api, "_reference_of", reference_of)
    monkeypatch.setattr(spawn.WorkerHandle, "request", request)
    monkeypatch.setattr(memory_beside, "candidate_side", lambda device: 1 << 20)
    got = _batch_of_two(tmp_path, ref, honest, capsys)
    assert state["failed"], "no shared reference was made again during a candidate's plan"
    assert [got[i].verdict for i in ("j1", "j2")] == ["pass", "pass"], got
    assert state["asked"] >= 1


# -- on a CUDA device (GPU test) ------------------------------------------------------------------

HOG = '''
import torch


class ModelNew(torch.nn.Module):
    """relu, right; and every byte of the device it can take, held between its calls, less 512 MiB
    left in its own allocator's cache (the worker's copies of its inputs and its outputs come from
    there, the judge's draws and float64 references cannot), so that the judge finds none."""

    def __init__(self, *args):
        super().__init__()
        self.held = []
        self._take()

    def _take(self):
        chunk = 256 << 20
        while chunk >= 2 << 20:
            try:
                self.held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
            except torch.OutOfMemoryError:
                chunk //= 2
        del self.held[:2]   # freed into this process's cache, not to the device

    def forward(self, x):
        out = torch.relu(x)
        self._take()
        return out
'''


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_candidate_that_takes_the_device_from_the_judge_is_rejected_by_worker_on_cuda(tmp_path, monkeypatch):
    """Right outputs, and the rest of the device held between its calls: the judge's next draw or
    float64 reference runs out of memory. Without the bound that was an exit 2 blamed on the
    problem (and, in a batch, the same record for the problem's later candidates)."""
    hold = sizes.Holding(lean=True, judge_on_host=True, output_itemsize=4)
    monkeypatch.setattr(sizes, "holding_for", lambda *a, **k: hold)
    monkeypatch.setattr(sizes, "plan_for", lambda *a, **k: (hold, None))
    text = problem("return torch.relu(xs[0])", "return [torch.randn(8192, 4096)]")   # 128 MiB a set
    ref = write(tmp_path, "p.py", text)
    try:
        report = vet(write(tmp_path, "hog.py", HOG), ref, device="cuda", allow=["library-call"])
    finally:   # the worker ends off the vet's clock: its memory back before the next test's worker starts
        deadline = time.monotonic() + 60
        while torch.cuda.mem_get_info()[0] < torch.cuda.mem_get_info()[1] // 2 and time.monotonic() < deadline:
            time.sleep(0.5)
    assert report.verdict is Verdict.REJECT and CheckId.WORKER in failed(report), report.dumps()
    summary = next(f.summary for f in report.failed if f.check is CheckId.WORKER)
    assert "by the device's account" in summary, summary


def test_a_reference_out_of_memory_in_its_worker_says_which_request_and_torchs_account():
    from kernelvet.judge import reference
    text = ("out of memory in the worker while answering 'time': OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 9.56 GiB is free.\n"
            "Including non-PyTorch memory, this process has 69.62 GiB memory in use. Of the allocated memory "
            "64.12 GiB is allocated by PyTorch, and 4.50 GiB is reserved by PyTorch but unallocated. If reserved "
            "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    said = reference._where_it_ran_out(spawn.CandidateRaised("time", text, ""))
    assert said == (" (in its 'time' request: Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
                    "of which 9.56 GiB is free. Including non-PyTorch memory, this process has 69.62 GiB memory "
                    "in use. Of the allocated memory 64.12 GiB is allocated by PyTorch, and 4.50 GiB is reserved "
                    "by PyTorch but unallocated.)"), said
    assert reference._where_it_ran_out(spawn.CandidateRaised("call", "MemoryError", "")) == " (in its 'call' request)"
