"""What a vet holds, and where: the footprint a big problem's plan is sized by, the lean holding
that frees what one request used, the shape-only estimate of KernelBench problems, and problems
whose inputs or reference run out of memory."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import sys

import pytest
import torch

from kernelvet import checks, compact, judge, metrics, sizes, vet
from kernelvet.draws import Draws
from kernelvet.judge import api, plan
from kernelvet.errors import UsageError
from kernelvet.ids import CheckId
from kernelvet.practice import by_name
from kernelvet.report import Status, Verdict

from .matrix import failed, vet_entry
from .test_problem_data import QUICK, as_candidate, problem, write

_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "bench", "kernelbench_sizes.py")
_spec = importlib.util.spec_from_file_location("kernelbench_sizes", _TOOL)
tool = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = tool   # its dataclasses look their module up
_spec.loader.exec_module(tool)
KB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kb_problems")


# -- the footprint ----------------------------------------------------------------------------

def test_a_lean_holding_holds_fewer_sets_and_judging_on_the_host_leaves_the_device_to_the_worker():
    size = sizes.ProblemSize(input_bytes=1 << 30, largest_input=1 << 28, output_elements=1 << 28, weight_bytes=0,
                             largest_weight=0, output_itemsize=4)
    plan = sizes.PlanCounts()
    full, lean = sizes.footprint(size, sizes.Holding()), sizes.footprint(size, sizes.Holding(lean=True))
    host = sizes.footprint(size, sizes.Holding(lean=True, judge_on_host=True))
    assert full.device_terms["worker input sets"] == (plan.keys - 1 + plan.controls) << 30
    assert lean.device_terms["worker input sets"] == (plan.fresh + 1) << 30
    assert lean.host_terms["judge input sets"] < full.host_terms["judge input sets"]
    # judged on the host: the references and recorded outputs move off the device, none vanish
    assert "judge float64 references" not in host.device_terms
    assert host.host_terms["judge float64 references"] == lean.device_terms["judge float64 references"]
    # lean: the references of sets used once and the timing's outputs compared and dropped (compact.py)
    assert full.device_terms["judge float64 references"] == plan.keys * (1 << 28) * 8
    assert lean.device_terms["judge float64 references"] == (plan.fresh + 2) * (1 << 28) * 8
    assert lean.device_terms["judge recorded outputs"] < full.device_terms["judge recorded outputs"] / 3
    assert host.device < lean.device < full.device
    # the holding chosen is the first that fits
    assert sizes.holding(size, 1 << 40, 1 << 40) == sizes.Holding()
    assert sizes.holding(size, int(lean.device / sizes.HEADROOM) + (1 << 20), 1 << 40) == sizes.Holding(lean=True)
    assert sizes.holding(size, int(host.device / sizes.HEADROOM) + (1 << 20), 1 << 40) == \
        sizes.Holding(lean=True, judge_on_host=True)


def test_sets_stay_on_the_device_that_drew_them_only_where_the_holding_still_fits_judged_there():
    size = sizes.ProblemSize(input_bytes=1 << 30, largest_input=1 << 28, output_elements=1 << 28, weight_bytes=0,
                             largest_weight=0, output_itemsize=4)
    lean = sizes.Holding(lean=True)
    kept = sizes.footprint(size, sizes.Holding(lean=True, sets_on_device=True))
    plain = sizes.footprint(size, lean)
    # the judge's sets move from the host to the device, with one more for a request's lent copy,
    # and none drawn ahead (two fewer than on the host)
    assert "judge input sets" not in kept.host_terms
    assert kept.device_terms["judge input sets"] == plain.host_terms["judge input sets"] - (1 << 30)
    roomy = int(kept.device / sizes.HEADROOM) + (1 << 20)
    assert sizes.with_sets_on_device(size, lean, roomy, 1 << 40) == sizes.Holding(lean=True, sets_on_device=True)
    tight = int(plain.device / sizes.HEADROOM) + (1 << 20)
    assert sizes.with_sets_on_device(size, lean, tight, 1 << 40) == lean   # never judged on the host for it
    # a full plan whose sets would cross the host is made lean for them where that fits
    full_kept = sizes.footprint(size, sizes.Holding(sets_on_device=True))
    assert full_kept.device > kept.device
    between = int((kept.device + full_kept.device) / 2 / sizes.HEADROOM)
    assert sizes.with_sets_on_device(size, sizes.Holding(), between, 1 << 40) == \
        sizes.Holding(lean=True, sets_on_device=True)
    assert sizes.with_sets_on_device(size, sizes.Holding(), 1 << 40, 1 << 40) == sizes.Holding(sets_on_device=True)
    assert "sets kept on the device" in sizes.Holding(sets_on_device=True).describe()


def test_a_problem_too_big_under_every_holding_is_named_with_the_plan_and_sizes():
    size = sizes.ProblemSize(input_bytes=64 << 30, largest_input=16 << 30, output_elements=16 << 30, weight_bytes=0,
                             largest_weight=0, output_itemsize=4)
    hold = sizes.holding(size, 140 << 30, 128 << 30)
    assert hold == sizes.Holding(lean=True, judge_on_host=True, tight=True)
    why = sizes.fits(size, 140 << 30, hold=hold)
    assert why and "lean, judged on the host, references in float32 plan" in why and "one input set 64.0 GiB" in why and "140.0 GiB" in why


def test_the_shape_only_estimate_allocates_nothing_and_agrees_with_the_measured_size():
    model = torch.nn.Linear(512, 256)
    x = torch.randn(64, 512)
    est = sizes.shape_only(model, [x])
    got = sizes.measure([x], model(x).double(), model)
    assert est is not None and est.output_itemsize == 4
    for field in ("input_bytes", "largest_input", "output_elements", "weight_bytes", "largest_weight"):
        assert getattr(est, field) == getattr(got, field), field
    assert next(model.parameters()).device.type == "cpu"   # a copy went to meta, not the model


class _MSE(torch.nn.Module):
    def forward(self, a, b):
        return torch.mean((a - b) ** 2)


def test_the_shape_only_estimate_counts_the_float64_intermediates_a_scalar_never_shows():
    """KernelBench's MSE loss on an 80 GB card: two 4 GiB float32 inputs, one number out. Its
    float64 reference holds two input-sized float64 tensors at once (the difference, its square);
    a plan that counted the output alone let the vet start and the reference run out of the device
    beside the worker's 48 GiB. Counted, the problem is refused from its shapes."""
    with torch.device("meta"):
        a, b = torch.empty(32768, 32768), torch.empty(32768, 32768)
    est = sizes.shape_only(_MSE(), [a, b])
    assert est is not None and est.output_elements == 1
    assert est.forward_bytes64 == 2 * a.numel() * 8   # (a - b) and its square, in float64
    hold = sizes.holding(est, int(79.18 * GIB), 128 * GIB)
    assert "more than the device's 79.2 GiB" in (sizes.fits(est, int(79.18 * GIB), hold=hold) or "")   # refused
    assert not sizes.fits(dataclasses.replace(est, forward_bytes64=0), int(79.18 * GIB), hold=hold)   # as it was


class _Loss(torch.nn.Module):
    def __init__(self, reduction):
        super().__init__()
        self.reduction = reduction

    def forward(self, a, b):
        return torch.nn.functional.smooth_l1_loss(a, b, reduction=self.reduction)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_a_loss_that_is_one_op_counts_the_elementwise_loss_it_makes_inside(reduction):
    """KernelBench's Huber loss on an 80 GB card: `smooth_l1_loss` is one aten op, two 4 GiB inputs
    in, one number out, but aten fills an input-sized loss first and reduces it after: 8 GiB more
    in float64 than its output shows, which ran the judge's float64 reference out of the device
    beside the worker's 48 GiB. Counted, the problem is refused from its shapes. Unreduced, the
    elementwise loss is the output, counted once."""
    with torch.device("meta"):
        a, b = torch.empty(32768, 32768), torch.empty(32768, 32768)
    est = sizes.shape_only(_Loss(reduction), [a, b])
    assert est is not None
    if reduction == "none":
        assert est.forward_bytes64 == a.numel() * 8   # the output itself
        return
    assert est.forward_bytes64 == a.numel() * 8 + 8   # the hidden elementwise loss beside the one number
    hold = sizes.holding(est, int(79.18 * GIB), 128 * GIB)
    assert "more than the device's 79.2 GiB" in (sizes.fits(est, int(79.18 * GIB), hold=hold) or "")
    assert not sizes.fits(dataclasses.replace(est, forward_bytes64=8), int(79.18 * GIB), hold=hold)   # as it was


class _Sum(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def test_an_op_without_a_reduction_argument_hides_nothing():
    with torch.device("meta"):
        x = torch.empty(1024, 1024)
    est = sizes.shape_only(_Sum(), [x])
    assert est is not None and est.forward_bytes64 == 1024 * 8


class _Caching(torch.nn.Module):
    """A reference that keeps what its first call made (a mask, a plan) on itself."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.kept = None

    def forward(self, x):
        if self.kept is None:
            self.kept = torch.ones_like(x)
        return self.lin(x) * self.kept


def test_the_shape_only_run_leaves_the_model_as_it_was():
    model = _Caching()
    est = sizes.shape_only(model, [torch.randn(4, 8)])
    assert est is not None and est.output_elements == 32 and est.weight_bytes == (64 + 8) * 4
    assert model.kept is None and model.lin.weight.device.type == "cpu"


def test_a_shape_only_run_of_too_many_ops_gives_up_and_a_short_one_does_not(monkeypatch):
    """A recurrent layer unrolls step by step on the meta device (KernelBench's 6-layer LSTMs:
    46,000 ops, 5-6 s of the judge's CPU): past META_OPS_MAX the run stops, and the judge sizes
    the problem after its first reference. A deep stack of short layers is well within it."""
    lstm = torch.nn.LSTM(8, 8, num_layers=6, batch_first=True)
    x = torch.randn(2, 64, 8)   # 6 layers x 64 steps: about 5,800 ops
    assert sizes.shape_only(lstm, [x]) is None
    monkeypatch.setattr(sizes, "META_OPS_MAX", 100_000)
    est = sizes.shape_only(lstm, [x])
    assert est is not None and est.output_elements == 2 * 64 * 8 + 2 * 6 * 2 * 8
    deep = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()) for _ in range(200)])
    est = sizes.shape_only(deep, [torch.randn(4, 8)])
    assert est is not None and est.output_elements == 32


# -- the lean plan, on the CPU ----------------------------------------------------------------

def _hold(monkeypatch, hold: sizes.Holding) -> None:
    """Every vet follows `hold`, whatever its problem's size (which the judge then does not know)."""
    monkeypatch.setattr(sizes, "holding_for", lambda *a, **k: hold)
    monkeypatch.setattr(sizes, "plan_for", lambda *a, **k: (hold, None))


def _lean(monkeypatch):
    """Every vet lean (on the CPU a problem is judged on the host and never needs it), and a record
    of the sets the worker held after each release."""
    held, dropped = [], []
    real = plan._let_go

    def spy(w, ev, values, key, worker=True):
        out = real(w, ev, values, key, worker)
        held.append(ev.extra.get("worker_sets_held"))
        dropped.append(key not in values)
        return out

    _hold(monkeypatch, sizes.Holding(lean=True))
    monkeypatch.setattr(plan, "_let_go", spy)
    return held, dropped


def _digest_always(monkeypatch) -> list:
    """Digests taken on the host too (where the vet makes no accelerator's outputs), and the
    comparisons a lean vet's settling made, counted."""
    monkeypatch.setattr(compact, "worth_a_digest", lambda out, refs: True)
    passes = []
    real = metrics._compare

    def spy(out, ref, rows):
        passes.append(tuple(out.shape))
        return real(out, ref, rows)
    monkeypatch.setattr(metrics, "_compare", spy)
    return passes


def _evidence(monkeypatch) -> list:
    seen = []
    real = checks.evaluate_all

    def spy(ev, waived, *rest):
        seen.append(ev)
        return real(ev, waived, *rest)

    monkeypatch.setattr(checks, "evaluate_all", spy)
    return seen


@pytest.mark.parametrize("name", ["softmax", "inplace_relu"])
def test_a_holding_with_the_workers_copies_on_the_host_says_so_in_each_request_that_copies(name, monkeypatch):
    """The worker is told per request (a checked call, the probe, the timing): on the CPU its
    copies stay where they are, and verdicts are as ever."""
    from kernelvet import spawn
    _hold(monkeypatch, sizes.Holding(lean=True, copies_on_host=True))
    sent = []
    real = spawn.WorkerHandle._request

    def spy(self, type_, body, *rest):
        sent.append((type_, dict(body or {})))
        return real(self, type_, body, *rest)

    monkeypatch.setattr(spawn.WorkerHandle, "_request", spy)
    entry = by_name(name)
    report = vet_entry(entry, "cpu")
    told = {t for t, b in sent if b.get("copies_on_host")}
    assert {"call", "time"} <= told <= set(spawn._COPYING), sent
    assert all(not b.get("copies_on_host") for t, b in sent if t not in spawn._COPYING)
    if entry.kind == "honest":
        assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    else:
        assert report.verdict is Verdict.REJECT and failed(report) & entry.catches, [f.summary for f in report.failed]


def test_a_lean_vet_frees_each_set_after_its_one_request_and_passes_an_honest_kernel(monkeypatch):
    held, dropped = _lean(monkeypatch)
    evs = _evidence(monkeypatch)
    report = vet_entry(by_name("softmax"), "cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert held and dropped and all(dropped)
    # warm-up, probe, unseen and loop sets freed: the worker keeps only the fresh sets the timing rotates
    assert max(h for h in held if h is not None) <= judge.Settings().fresh_sets
    # the timing's outputs compared as they came and dropped, with the references of the sets used once
    ev = evs[-1]
    kept = {c.phase: c.output.device.type for c in ev.calls if c.output is not None}
    assert {kept[p] for p in ("warmup", "overwrite", "timed", "unseen", "loop")} == {"meta"}, kept
    # identity compares the fresh sets' outputs; the second launch on one was compared with it as it came
    assert kept["fresh"] == "cpu" and kept["determinism"] == "meta", kept
    assert report.finding(CheckId.DETERMINISM).evidence["bitwise_equal_launches"] == 2
    assert all(ev.refs64[c.values_of].device.type == "meta" for c in ev.records("warmup", "unseen", "loop"))
    assert all(ev.refs64[c.values_of].device.type == "cpu" for c in ev.records("fresh", "timed"))


def test_a_lean_judge_lets_each_reply_go_before_the_request_after_the_next(monkeypatch):
    """A reply's blobs map its outputs' memfds for as long as the reply lives, whatever the judge
    kept of those outputs: the timing run's reply, held through the unseen pairs, kept three
    outputs of a big problem's host mapped (bench/results/2026-12-07-cpu/). By the time a request
    goes out, no reply with blobs older than the one just before it is alive."""
    import weakref
    from kernelvet import spawn
    replies, late = [], []
    real_request = spawn.WorkerHandle.request

    def request(self, type_, *a, **k):
        late.extend((type_, t) for t, r in replies[:-1] if r() is not None)
        msg = real_request(self, type_, *a, **k)
        if msg.tensors:
            replies.append((type_, weakref.ref(msg)))
        return msg

    monkeypatch.setattr(spawn.WorkerHandle, "request", request)
    _lean(monkeypatch)
    assert vet_entry(by_name("softmax"), "cpu").verdict is Verdict.PASS
    assert len(replies) > 10 and not late, sorted(set(late))


def test_a_lean_judge_drops_the_draws_of_sets_it_will_not_ask_for(monkeypatch):
    """The loop's later attempts (one settled) and the re-measurement's unseen sets (none needed)
    were drawn ahead and held to the end of the vet: one set more each than the plan counts."""
    from kernelvet import draws
    from kernelvet.judge.settings import LOOP_ATTEMPTS, _LOOP
    forgotten, real = [], draws.Draws.forget

    def forget(self, keys):
        keys = list(keys)
        forgotten.extend(keys)
        return real(self, keys)

    monkeypatch.setattr(draws.Draws, "forget", forget)
    _lean(monkeypatch)
    evs = _evidence(monkeypatch)
    assert vet_entry(by_name("softmax"), "cpu").verdict is Verdict.PASS
    ev = evs[-1]
    assert set(forgotten) >= {_LOOP + i for i in range(len(ev.loop), LOOP_ATTEMPTS)}, forgotten
    assert forgotten and not set(forgotten) & {c.set_id for c in ev.calls}, forgotten   # none it used


def test_a_lean_judge_gives_back_the_host_memory_it_freed_between_requests_never_inside_one(monkeypatch):
    """The C allocator keeps what the judge's comparisons freed (up to 4 outputs' worth at 256 MiB
    an output, bench/results/2026-12-06-cpu/): a lean judge has it given back after each output it
    compares and each set it lets go, never while a request (which its clock may bracket) is in
    flight; a full holding, for small problems, never pays for it."""
    from kernelvet import spawn
    gave, in_flight = [], []
    real_request = spawn.WorkerHandle.request

    def request(self, *a, **k):
        in_flight.append(True)
        try:
            return real_request(self, *a, **k)
        finally:
            in_flight.pop()

    monkeypatch.setattr(spawn.WorkerHandle, "request", request)
    monkeypatch.setattr(sizes, "give_back_host", lambda: gave.append(bool(in_flight)))
    assert vet_entry(by_name("softmax"), "cpu").verdict is Verdict.PASS
    assert gave == []   # a small problem: the full holding
    _lean(monkeypatch)
    assert vet_entry(by_name("softmax"), "cpu").verdict is Verdict.PASS
    assert len(gave) >= 10 and not any(gave), gave


def test_giving_back_host_memory_is_a_no_op_where_the_c_library_cannot(monkeypatch):
    sizes._malloc_trim.cache_clear()
    monkeypatch.setattr(sizes.ctypes, "CDLL", lambda *a: object())   # a C library without malloc_trim
    try:
        sizes.give_back_host()
    finally:
        sizes._malloc_trim.cache_clear()
    sizes.give_back_host()   # glibc's, where there is one


def test_a_lean_vet_reads_each_output_once_against_each_reference_it_is_compared_with(monkeypatch):
    """A big output judged on the host costs seconds a pass: its error with and without the
    problem's floor, and row by row, come from one pass over the pair (metrics.compare), for the
    reference's outputs and the candidate's alike."""
    import weakref
    from kernelvet import metrics
    _lean(monkeypatch)
    passes, again = {}, []
    for name in ("_compare", "rel_error", "row_errors"):
        real = getattr(metrics, name)

        def spy(out, ref, *a, _real=real, _name=name, **k):
            if out.numel() > 1 and ref.dtype == torch.float64:   # an output against its float64 reference
                key = (id(out), id(ref))   # an id is reused once its tensor is gone: the weak references tell
                if key in passes and passes[key][0]() is out and passes[key][1]() is ref:
                    again.append((_name, passes[key][2]))
                passes[key] = (weakref.ref(out), weakref.ref(ref), _name)
            return _real(out, ref, *a, **k)
        monkeypatch.setattr(metrics, name, spy)
    report = vet_entry(by_name("softmax"), "cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert len(passes) > 10 and not again, again
    assert {name for *_, name in passes.values()} == {"_compare"}


# Right in the checked calls (warm-up, three fresh sets, the determinism and overwrite calls), then
# zeros: only the timing's outputs are wrong, which a lean vet keeps as numbers, not tensors.
RIGHT_THEN_ZEROS = """

class ModelNew(Model):
    calls = 0

    def forward(self, *xs):
        ModelNew.calls += 1
        out = super().forward(*xs)
        return out if ModelNew.calls <= 6 else torch.zeros_like(out)
"""


@pytest.mark.parametrize("held", ["kept", "lean", "lean, digests"])
def test_a_wrong_output_seen_only_in_the_timing_is_caught_whether_kept_or_compared_and_dropped(tmp_path, monkeypatch,
                                                                                             held):
    if held != "kept":
        _lean(monkeypatch)
    if held == "lean, digests":
        _digest_always(monkeypatch)
    text = problem("return xs[0] * 2 + 1", "return [torch.randn(64, 64)]")
    ref = write(tmp_path, "affine.py", text)
    report = vet(write(tmp_path, "c.py", text + RIGHT_THEN_ZEROS), ref, device="cpu", settings=QUICK,
                 allow=(CheckId.LIBRARY_CALL,))
    assert report.verdict is Verdict.REJECT
    assert CheckId.CACHING in failed(report), [f.summary for f in report.failed]
    assert "wrong" in report.finding(CheckId.CACHING).summary


# Each launch a little off the one before (within the precision bound): the same inputs launched
# twice give other bits.
DRIFTING = """

class ModelNew(Model):
    calls = 0

    def forward(self, *xs):
        ModelNew.calls += 1
        return super().forward(*xs) * (1 + 1e-6 * (ModelNew.calls % 2))
"""


@pytest.mark.parametrize("held", ["kept", "lean"])
def test_launches_that_differ_fail_determinism_whether_kept_or_compared_as_they_came(tmp_path, monkeypatch, held):
    if held == "lean":
        _lean(monkeypatch)
    evs = _evidence(monkeypatch)
    text = problem("return xs[0] * 2 + 1", "return [torch.randn(64, 64)]")
    ref = write(tmp_path, "affine.py", text)
    report = vet(write(tmp_path, "c.py", text + DRIFTING), ref, device="cpu", settings=QUICK,
                 allow=(CheckId.LIBRARY_CALL,))
    det = report.finding(CheckId.DETERMINISM)
    assert det.status is Status.FAIL and "two launches on identical inputs differ in" in det.summary, det.summary
    assert det.evidence["differing"] > 0 and det.evidence["elements"] == 64 * 64
    second = next(c for c in evs[-1].calls if c.phase == "determinism")
    assert second.output.device.type == ("meta" if held == "lean" else "cpu")


@pytest.mark.parametrize("name", ["pointer_cache", "content_cache"])
def test_a_lean_vet_still_rejects_a_cache_a_freed_storage_could_feed(name, monkeypatch):
    """A set sent later may land in a storage a freed one had: an answer remembered by pointer is
    then stale there, and every such output is still checked (by `precision`, where the full plan's
    sets never share a storage and `caching` alone sees it)."""
    _lean(monkeypatch)
    entry = by_name(name)
    report = vet_entry(entry, "cpu")
    assert report.verdict is Verdict.REJECT, report.dumps()
    assert failed(report) & {CheckId.CACHING, CheckId.PRECISION}, [f.summary for f in report.failed]


def _redraw_held(monkeypatch, sets_on_device: bool = False) -> list:
    """Every vet lean, tight and drawing its sets again; the fresh sets the judge held (its view and
    the layers beneath) at each request of the candidate's plan (from its load on: before, the
    judge makes its float64 references of the fresh sets it then sends the reference's run)."""
    from kernelvet import spawn
    _lean(monkeypatch)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True, tight=True, output_itemsize=4,
                                     redraw_sets=True, sets_on_device=sets_on_device))
    seen_values, held = [], []
    real_sent, real_request = judge.lean.sent, spawn.WorkerHandle.request

    def sent(values, key, redraw):
        if seen_values:
            seen_values[-1] = values
        return real_sent(values, key, redraw)

    def request(self, type_, *a, **k):
        if type_ == "load":   # the candidate's (the reference's load is sent without a wait)
            seen_values.append(None)
        if seen_values and seen_values[-1] is not None:
            values = seen_values[-1]
            layers = [values, getattr(values, "_own", None), getattr(values, "_shared", None)]
            held.append({key for layer in layers if layer is not None for key in layer if 0 < key < 1000})
        return real_request(self, type_, *a, **k)

    for module in (judge.plan, judge.reference):
        monkeypatch.setattr(module, "sent", sent)
    monkeypatch.setattr(spawn.WorkerHandle, "request", request)
    return held


def test_a_vet_that_draws_its_sets_again_holds_one_fresh_set_at_a_time_and_passes_an_honest_kernel(monkeypatch):
    """Under a holding that draws its sets again (level 1's L1Norm and L2Norm on an H200: 8 GiB a
    set), the judge keeps no fresh set once its worker holds it: at any request of the vet it
    holds at most the one it is sending, and a request carrying a copy of a seen set (a control)
    or a check reading one (identity) draws it again for that alone."""
    from kernelvet import draws
    drawn = []
    real = draws.Draws._same_as_first

    def same(self, key, value):
        drawn.append(key)
        return real(self, key, value)

    monkeypatch.setattr(draws.Draws, "_same_as_first", same)
    held = _redraw_held(monkeypatch)
    evs = _evidence(monkeypatch)
    report = vet_entry(by_name("softmax"), "cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert held and max(len(h) for h in held) <= 1, held
    fresh = sorted({c.values_of for c in evs[-1].records("fresh")})
    assert len(fresh) >= 3 and all(drawn.count(k) >= 2 for k in fresh), drawn   # sent, then drawn again
    assert report.finding(CheckId.IDENTITY).status is Status.PASS


@pytest.mark.parametrize("name", ["copy_input", "garbage_softmax"])
def test_a_vet_that_draws_its_sets_again_still_rejects(name, monkeypatch):
    """A copy of an input is still caught by `identity`, which draws each set again to compare."""
    _redraw_held(monkeypatch)
    entry = by_name(name)
    report = vet_entry(entry, "cpu")
    assert report.verdict is Verdict.REJECT and failed(report) & entry.catches, [f.summary for f in report.failed]


def test_kernelbench_l1norm_fits_an_h200_only_by_drawing_its_sets_again():
    """Level 1's L1Norm and L2Norm (8 GiB sets and outputs, float32): no tight holding fits the
    H200's host (120 GiB planned against 113) while the judge keeps its fresh sets; drawn again
    where read, one set in hand at a time, it plans 96 GiB."""
    device, host = tool.H200_DEVICE_BYTES, tool.H200_HOST_BYTES
    size = dataclasses.replace(_elementwise(8), forward_bytes64=16 * GIB)   # its float64 forward's peak
    hold = sizes.holding(size, device, host, rows=lambda: 32768)
    assert hold.redraw_sets and hold.tight and hold.reference_slices == 2, hold
    fp = sizes.footprint(size, hold)
    assert fp.device <= sizes.HEADROOM * device and fp.host <= sizes.HEADROOM * host
    kept = sizes.footprint(size, dataclasses.replace(hold, redraw_sets=False))
    assert kept.host > sizes.HEADROOM * host
    assert kept.host - fp.host == 3 * size.input_bytes   # the fresh sets the judge no longer keeps
    assert not sizes.holding(_elementwise(6), device, host, rows=lambda: 4096).redraw_sets   # 6 GiB: not needed


# -- memory the machine does not have -----------------------------------------------------------

@pytest.mark.parametrize("raise_", ["raise MemoryError()",
                                    "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 64.00 GiB')",
                                    "raise RuntimeError('[enforce fail at alloc_cpu.cpp:117] . DefaultCPUAllocator: "
                                    "can\\'t allocate memory: you tried to allocate 68719476736 bytes.')"])
@pytest.mark.parametrize("where", ["inputs", "init", "ctor"])
def test_a_problem_that_runs_out_of_memory_is_one_line_naming_memory_not_the_file(tmp_path, raise_, where):
    text = problem("return xs[0] * 2",
                   raise_ if where == "inputs" else "return [torch.randn(4, 4)]",
                   init=raise_ if where == "init" else "return []",
                   ctor=f"if True: {raise_}" if where == "ctor" else "pass")
    ref = write(tmp_path, "big.py", text)
    with pytest.raises(UsageError) as got:
        vet(write(tmp_path, "c.py", as_candidate(text)), ref, device="cpu", settings=QUICK)
    msg = str(got.value)
    assert "ran out of memory" in msg and "\n" not in msg, msg
    assert not re.search(r"big\.py:\d", msg) and "syntax" not in msg.lower(), msg   # no line of the file blamed


def test_a_reference_forward_that_runs_out_of_memory_is_one_line(tmp_path):
    text = problem("raise MemoryError()", "return [torch.randn(4, 4)]")
    ref = write(tmp_path, "fwd.py", text)
    with pytest.raises(UsageError) as got:
        vet(write(tmp_path, "c.py", as_candidate(text, "return xs[0]")), ref, device="cpu", settings=QUICK)
    msg = str(got.value)
    assert "ran out of memory" in msg and "\n" not in msg and not re.search(r"fwd\.py:\d", msg), msg


def test_a_problem_too_big_for_the_device_is_named_from_its_shapes(monkeypatch):
    """Asked before any float64 reference: the device's and the host's memory against the plan's
    footprint, one line naming the sizes; nothing to say on the CPU (the worker's limit decides there)."""
    size = _elementwise(6)
    hold = sizes.Holding(lean=True, judge_on_host=True, tight=True, output_itemsize=4)
    monkeypatch.setattr(sizes, "memories", lambda dev: (80 * GIB, 128 * GIB))   # an H100's device
    msg = sizes.too_big_for(size, hold, torch.device("cuda"))
    assert msg and "of device memory" in msg and "one input set 6.0 GiB" in msg and "\n" not in msg, msg
    monkeypatch.setattr(sizes, "memories", lambda dev: (150 * GIB, 128 * GIB))   # an H200's
    assert sizes.too_big_for(size, hold, torch.device("cuda")) is None
    monkeypatch.setattr(sizes, "memories", lambda dev: (150 * GIB, 32 * GIB))    # its host too small
    assert "of host memory" in sizes.too_big_for(size, hold, torch.device("cuda"))
    # a plan that fills more than HEADROOM of the host is refused: the judge's transients and the
    # rest of the host would not fit beside it
    need = sizes.footprint(size, hold).host
    monkeypatch.setattr(sizes, "memories", lambda dev: (150 * GIB, int(need / 0.95)))
    msg = sizes.too_big_for(size, hold, torch.device("cuda"))
    assert msg and "the 90% of the host's" in msg and "\n" not in msg, msg
    monkeypatch.setattr(sizes, "memories", lambda dev: (150 * GIB, int(need / 0.85)))
    assert sizes.too_big_for(size, hold, torch.device("cuda")) is None
    assert sizes.too_big_for(size, hold, torch.device("cpu")) is None


# -- the KernelBench sizes tool ---------------------------------------------------------------

def test_the_sizes_tool_reads_every_shape_without_allocating_and_agrees_with_a_real_draw():
    for name in sorted(os.listdir(KB)):
        if not name.startswith("l"):
            continue
        path = os.path.join(KB, name)
        sh = tool.shapes(path)
        assert sh.error is None and sh.how == "meta", (name, sh.error)
        from kernelvet.problem import load_problem, reference64
        prob = load_problem(path)
        model = prob.build_model(prob.init_inputs(), 0)
        inputs = prob.draw_inputs(1)
        real = sizes.measure(inputs, reference64(model, inputs, "cpu"), model)
        est = sh.size()
        for field in ("input_bytes", "largest_input", "output_elements", "weight_bytes", "largest_weight"):
            assert getattr(est, field) == getattr(real, field), (name, field)


def test_the_sizes_tool_names_a_problem_it_cannot_size(tmp_path):
    bad = tmp_path / "1_Nonzero.py"
    # values read into NumPy: neither a meta tensor nor a fake one has any
    bad.write_text(problem("return xs[0] + float(xs[0].numpy().sum())", "return [torch.randn(8, 8)]"))
    sh = tool.shapes(str(bad))
    assert sh.error and "meta:" in sh.error and "fake:" in sh.error, sh


def test_the_sizes_table_flags_what_the_old_estimate_refused_and_the_new_plan_fits(tmp_path):
    level = tmp_path / "KB" / "level1"
    level.mkdir(parents=True)
    # 4 GiB of float32 in, 4 GiB out: the old estimate (10 sets, 16 float64 outputs) refuses it on an H200
    (level / "19_ReLU.py").write_text(problem("return torch.relu(xs[0])", "return [torch.randn(1 << 14, 1 << 16)]"))
    (level / "1_Small.py").write_text(problem("return xs[0] @ xs[1]", "return [torch.randn(64, 64), torch.randn(64, 64)]"))
    out = tmp_path / "out"
    assert tool.main(["--kernelbench", str(tmp_path / "KB"), "--levels", "1", "--out", str(out)]) == 0
    import json
    data = json.load(open(out / "sizes.json"))
    rows = {r["problem"]: r for r in data["problems"]}
    relu, small = rows["19_ReLU.py"], rows["1_Small.py"]
    assert relu["input_set_bytes"] == 4 << 30 and relu["output_bytes"] == 4 << 30
    assert not relu["old_fits_device"] and relu["holding"]["lean"]
    assert not small["holding"]["lean"] and not small["holding"]["judge_on_host"] and small["fits_device"] and small["fits_host"]
    assert "19_ReLU.py" in (out / "sizes.md").read_text()


def test_whether_sets_stay_on_the_device_is_decided_from_shapes_before_any_draw(tmp_path, monkeypatch):
    """A 1 GiB set stays on a device of 140 GiB, not on one of 24 GiB (the same holding must
    fit with it); nothing is drawn to decide, and a device whose memory is unknown keeps nothing."""
    from kernelvet.judge.api import _sets_fit_on
    from kernelvet.problem import load_problem
    prob = load_problem(write(tmp_path, "big.py", problem("return xs[0] * 2", "return [torch.randn(1 << 14, 1 << 14)]")))
    model = prob.build_model([], 0)
    drawn = []
    monkeypatch.setattr(type(prob), "draw_inputs", lambda *a, **k: drawn.append(a))
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(sizes, "memories", lambda dev: (140 << 30, 512 << 30))
    assert _sets_fit_on(cuda, model, prob)
    monkeypatch.setattr(sizes, "memories", lambda dev: (24 << 30, 512 << 30))
    monkeypatch.setattr(api, "batch_rows", lambda *a: 1)   # rows that may not be cut (asked only now)
    assert not _sets_fit_on(cuda, model, prob)
    monkeypatch.setattr(sizes, "memories", lambda dev: (None, 512 << 30))
    assert not _sets_fit_on(cuda, model, prob) and drawn == []


def test_a_big_problems_sets_are_drawn_by_the_cuda_devices_generator_a_small_ones_by_the_hosts(tmp_path):
    """Which generator draws the sets is decided from get_inputs() on the meta device: nothing drawn,
    no CUDA started; a CPU vet always draws on the host, as KernelBench does."""
    from kernelvet.judge import placement
    from kernelvet.problem import load_problem
    big = load_problem(write(tmp_path, "big.py", problem("return xs[0] * 2", "return [torch.rand(5000, 4000)]")))
    small = load_problem(write(tmp_path, "small.py", problem("return xs[0] * 2", "return [torch.rand(64, 64)]")))
    odd = load_problem(write(tmp_path, "odd.py", problem("return xs[0] * 2",
                                                         "return [torch.rand(int(torch.rand(()).item() * 9) + 1)]")))
    assert big.set_bytes() == 5000 * 4000 * 4 > placement.DEVICE_DRAW_BYTES and small.set_bytes() == 64 * 64 * 4
    cuda = torch.device("cuda", 0)
    assert placement.draws_on(big, cuda) == cuda and placement.draws_on(small, cuda) is None
    assert placement.draws_on(big, torch.device("cpu")) is None
    assert odd.set_bytes() is None and placement.draws_on(odd, cuda) is None   # a draw that reads values: the host's
    assert not torch.cuda.is_initialized()


# -- on a CUDA device (GPU tests) ---------------------------------------------------------------

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("judge_on_host,tight", [(False, False), (True, False), (True, True)])
def test_a_lean_vet_on_cuda_frees_sets_on_the_device_and_passes_an_honest_kernel(monkeypatch, judge_on_host, tight):
    held, dropped = _lean(monkeypatch)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=judge_on_host, tight=tight, output_itemsize=4))
    evs = _evidence(monkeypatch)
    report = vet_entry(by_name("softmax"), "cuda")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert held and all(dropped) and max(h for h in held if h is not None) <= judge.Settings().fresh_sets
    ev = evs[-1]
    if judge_on_host:   # else where placement put it (a small problem is judged on the host anyway)
        assert ev.judged_on.type == "cpu"
        # outputs on the device, references on the host: a seen set's repeats compared once (compact.py)
        assert ev.extra.get("outputs_settled_again", 0) > 0, ev.extra
    # the second launch on a fresh set too, compared with its twin where each was
    assert {c.output.device.type for c in ev.records("timed", "unseen", "loop", "probe", "determinism")} == {"meta"}
    assert report.finding(CheckId.DETERMINISM).evidence["bitwise_equal_launches"] == 2
    assert all(ev.refs64[c.values_of].device.type == ev.judged_on.type for c in ev.records("fresh"))
    assert all(ev.refs64[c.values_of].dtype == (torch.float32 if tight else torch.float64) for c in ev.records("fresh"))


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("name", ["softmax", "copy_input"])
def test_a_vet_on_cuda_that_draws_its_sets_again_on_the_device_judges_as_before(name, kept, monkeypatch):
    """Sets the device's generator draws (as a big problem's are), let go once sent and drawn again
    where read, kept on the host or on the device (L1Norm's on an H200): each comes out as it first
    did (draws.py checks), an honest kernel passes with the judge holding at most one fresh set at
    a time, a copy of an input is still rejected."""
    from kernelvet.judge import placement
    monkeypatch.setattr(placement, "DEVICE_DRAW_BYTES", 1)
    held = _redraw_held(monkeypatch, sets_on_device=kept)
    entry = by_name(name)
    report = vet_entry(entry, "cuda")
    assert report.device["inputs_drawn_on"].startswith("cuda"), report.device
    assert report.device["sets_kept_on"].startswith("cuda" if kept else "cpu"), report.device
    if name == "softmax":
        assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
        assert held and max(len(h) for h in held) <= 1, held
    else:
        assert report.verdict is Verdict.REJECT and failed(report) & entry.catches, [f.summary for f in report.failed]


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("name", ["softmax", "pointer_cache"])
def test_outputs_that_come_through_the_host_are_compared_on_the_device(name, monkeypatch):
    """No device buffer lent for any reply (as where the device's free memory is short): the big
    outputs that arrive on the host are copied to the device for their comparisons, a seen set's
    repeats told by their digests there; an honest kernel still passes, a cache is still rejected."""
    from kernelvet import evidence, spawn
    _lean(monkeypatch)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True, output_itemsize=4))
    monkeypatch.setattr(spawn.WorkerHandle, "_loan", lambda self, *a: None)
    monkeypatch.setattr(evidence, "DEVICE_COMPARED_MIN", 1)
    evs = _evidence(monkeypatch)
    report = vet_entry(by_name(name), "cuda")
    if name == "softmax":
        assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
        assert evs[-1].extra.get("outputs_settled_again", 0) > 0, evs[-1].extra
    else:
        assert report.verdict is Verdict.REJECT, report.dumps()


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("drift", [False, True])
def test_a_second_launch_on_cuda_is_compared_with_its_twin_on_the_host_slice_by_slice(tmp_path, monkeypatch, drift):
    _lean(monkeypatch)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True, output_itemsize=4))
    monkeypatch.setattr(metrics, "CHUNK", 1024)   # 64 x 64 outputs: four slices across the devices
    evs = _evidence(monkeypatch)
    text = problem("return xs[0] * 2 + 1", "return [torch.randn(64, 64)]")
    ref = write(tmp_path, "affine.py", text)
    cand = text + DRIFTING if drift else as_candidate(text, "return xs[0] * 2 + 1")
    report = vet(write(tmp_path, "c.py", cand), ref, device="cuda", settings=QUICK, allow=(CheckId.LIBRARY_CALL,))
    det = report.finding(CheckId.DETERMINISM)
    assert (det.status is Status.FAIL) == drift, det.summary
    if drift:
        assert det.evidence["differing"] > 0, det.evidence
    assert next(c for c in evs[-1].calls if c.phase == "determinism").output.device.type == "meta"


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("name", ["pointer_cache", "stale_after_warmup"])
def test_a_lean_vet_on_cuda_still_rejects_a_cache(name, monkeypatch):
    _lean(monkeypatch)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True))
    report = vet_entry(by_name(name), "cuda")
    assert report.verdict is Verdict.REJECT, report.dumps()


@pytest.mark.gpu
@CUDA
@pytest.mark.parametrize("name", ["softmax", "pointer_keyed_graph", "inplace_relu", "pointer_cache"])
def test_a_vet_whose_worker_keeps_its_input_copies_on_the_host_judges_as_before(name, monkeypatch):
    """A checked call's inputs and a seen set's own values copied to the worker's host memory,
    compared and put back from there: an honest kernel passes (a graph keyed on pointers replays
    on the values put back), a kernel that writes its input or answers by pointer is rejected."""
    _lean(monkeypatch)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True, tight=True, copies_on_host=True, output_itemsize=4))
    evs = _evidence(monkeypatch)
    entry = by_name(name)
    report = vet_entry(entry, "cuda")
    assert evs[-1].extra["holding"]["copies_on_host"]
    if entry.kind == "honest":
        assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    else:
        # a fresh set may land in the storage a released one left (no device copy of it is made
        # here): the pointer cache then gives it that set's answer, wrong, and precision names it
        # before caching's overwrite (on an H100 at 5e92552; on the CPU a lean holding does so too)
        named = entry.catches | ({CheckId.PRECISION} if name == "pointer_cache" else set())
        assert report.verdict is Verdict.REJECT and failed(report) & named, [f.summary for f in report.failed]


@pytest.mark.gpu
@CUDA
def test_the_device_memory_the_holding_is_chosen_by_is_the_devices():
    device_bytes, host_bytes = sizes.memories(torch.device("cuda"))
    assert device_bytes == torch.cuda.get_device_properties(0).total_memory and host_bytes
    # a problem of 6 GiB sets and outputs, as KernelBench's level-1 activations: not the full plan
    size = sizes.ProblemSize(6 << 30, 3 << 29, 3 << 29, 0, 0, output_itemsize=4)
    assert sizes.holding(size, device_bytes, host_bytes).lean


@pytest.mark.parametrize("tight", [False, True, "redraw"])
def test_lean_vets_sharing_a_reference_let_go_of_the_sets_used_once(tmp_path, monkeypatch, tight):
    """A set used for one request leaves the problem's shared sets and references too (a later vet
    draws it again): kept there, every such set of a big problem would outlive its vet. Under a
    holding that draws sets again, the fresh sets leave them too, and each vet draws them again."""
    from kernelvet.problem import load_problem
    from kernelvet.refcache import ReferenceCache
    _lean(monkeypatch)
    if tight:
        _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True, tight=True, output_itemsize=4,
                                         redraw_sets=tight == "redraw"))
    text = problem("return xs[0] * 2 + 1", "return [torch.randn(64, 64)]")
    ref = write(tmp_path, "affine.py", text)
    honest, zeros = write(tmp_path, "h.py", as_candidate(text)), write(tmp_path, "z.py", text + RIGHT_THEN_ZEROS)
    allow = (CheckId.LIBRARY_CALL, CheckId.TIMERS)   # microsecond calls on a busy host: the data checks decide
    with ReferenceCache(load_problem(ref)) as cache:
        first = vet(honest, ref, device="cpu", settings=QUICK, allow=allow, reference=cache)
        shared = cache.get(torch.device("cpu"))
        once, fresh = judge.settings._WARMUP, [k for k in shared.refs64 if 0 < k < 1000]
        assert once not in shared.refs64 and once not in shared.values and fresh   # the fresh sets' references stay
        assert (set(fresh) & set(shared.values)) == (set() if tight == "redraw" else set(fresh))
        assert shared.refs64[once].device.type == "cpu"   # made again on use, not a stand-in
        assert shared.refs64[once].dtype == (torch.float32 if tight else torch.float64)
        second = vet(zeros, ref, device="cpu", settings=QUICK, allow=allow, reference=cache)
        kept = []
        real = judge.lean._let_go

        def spy(w, ev, values, key, worker=True):   # a later vet's own never-seen sets: let go whole
            out = real(w, ev, values, key, worker)
            if worker and key in ev.refs64._own:
                kept.append(key)
            return out

        monkeypatch.setattr(judge.lean, "_let_go", spy)
        monkeypatch.setattr(judge.plan, "_let_go", spy)
        third = vet(honest, ref, device="cpu", settings=QUICK, allow=allow, reference=cache)
    assert not kept
    assert first.verdict is Verdict.PASS and third.verdict is Verdict.PASS, [f.summary for f in third.failed]
    assert second.verdict is Verdict.REJECT and CheckId.CACHING in failed(second)


@pytest.mark.gpu
@CUDA
def test_a_set_drawn_on_the_device_is_the_seeds_on_the_host_and_a_big_vet_passes_the_reference(tmp_path):
    """The device's generator draws a big problem's sets: one seed, one set, kept on the host; the
    vet says so, and the problem's own Model still passes with the library allowed."""
    from kernelvet.problem import load_problem
    text = problem("return torch.relu(xs[0])", "return [torch.randn(8192, 4096)]")   # 128 MiB a set
    path = write(tmp_path, "problem.py", text)
    prob = load_problem(path)
    cuda = torch.device("cuda", 0)
    a, b, a2 = prob.draw_inputs(1, cuda), prob.draw_inputs(2, cuda), prob.draw_inputs(1, cuda)
    assert a[0].device.type == "cpu" and torch.equal(a[0], a2[0]) and not torch.equal(a[0], b[0])
    assert not torch.equal(a[0], prob.draw_inputs(1)[0])   # another generator than the host's
    report = vet(write(tmp_path, "cand.py", as_candidate(text)), path, device="cuda", allow=["library-call"])
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.device["inputs_drawn_on"] == "cuda:0" and report.device["sets_kept_on"] == "cuda:0"
    assert report.device["transfers"] == "device (CUDA IPC)"


@pytest.mark.gpu
@CUDA
def test_a_lean_vet_on_cuda_gives_the_judges_freed_blocks_back_to_the_device(tmp_path, monkeypatch):
    """Whenever the judge sets its worker to work, its allocator holds no freed blocks of the draws,
    float64 references and outputs compared so far: kept there, they would be memory the worker
    cannot have, which the plan does not count. On an H200, before the judge gave them back at
    each request, a draw found five outputs' blocks (640 MiB) cached."""
    from kernelvet import protocol, wire
    slack = []
    real = protocol.send

    def spy(sock, type_, *a, **k):
        # requests a vet's holding governs: not "prepare", which starts the next vet's spare worker
        # from a thread of its own (spares.start_early), at any moment of this vet's
        if type_ in wire.REQUESTS and type_ not in ("load", "bye", "prepare"):
            slack.append((type_, torch.cuda.memory_reserved() - torch.cuda.memory_allocated()))
        return real(sock, type_, *a, **k)

    monkeypatch.setattr(protocol, "send", spy)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True, tight=True, output_itemsize=4))
    torch.cuda.empty_cache()   # what earlier tests of this process left
    text = problem("return torch.relu(xs[0])", "return [torch.randn(8192, 4096)]")   # 128 MiB a set
    path = write(tmp_path, "problem.py", text)
    report = vet(write(tmp_path, "cand.py", as_candidate(text)), path, device="cuda", allow=["library-call"])
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert len(slack) > 10 and max(s for _, s in slack) < 64 << 20, [(t, s >> 20) for t, s in slack]


@pytest.mark.gpu
@CUDA
def test_a_problem_too_big_for_the_device_is_refused_before_any_float64_reference(tmp_path, monkeypatch):
    """A device of 1 GiB, as the judge reads it, and a problem of 256 MiB sets: exit 2 from the
    shapes, before the judge makes a float64 reference or starts the reference's run."""
    made = []
    real = api.reference64
    monkeypatch.setattr(api, "reference64", lambda *a, **k: made.append(1) or real(*a, **k))
    monkeypatch.setattr(sizes, "memories", lambda dev: (1 << 30, 128 * GIB))
    text = problem("return torch.relu(xs[0])", "return [torch.randn(16384, 4096)]")
    path = write(tmp_path, "problem.py", text)
    with pytest.raises(UsageError) as got:
        vet(write(tmp_path, "cand.py", as_candidate(text)), path, device="cuda", allow=["library-call"])
    assert "of device memory" in str(got.value) and "more than the device's 1.0 GiB" in str(got.value), got.value
    assert not made


# -- tight: the host barely holds the problem ---------------------------------------------------

GIB = 1 << 30


def _elementwise(gib: int, itemsize: int = 4) -> sizes.ProblemSize:
    """An elementwise problem of `gib` GiB a set and as much output (KernelBench's activations: 6 GiB)."""
    n = gib * GIB // itemsize
    return sizes.ProblemSize(input_bytes=gib * GIB, largest_input=n, output_elements=n, weight_bytes=0,
                             largest_weight=0, output_itemsize=itemsize)


def test_tight_keeps_float32_outputs_references_at_half_and_draws_nothing_ahead():
    size = _elementwise(6)
    host = sizes.footprint(size, sizes.Holding(lean=True, judge_on_host=True))
    tight = sizes.footprint(size, sizes.Holding(lean=True, judge_on_host=True, tight=True))
    assert tight.host_terms["judge float64 references"] * 2 == host.host_terms["judge float64 references"]
    assert host.host_terms["judge input sets"] - tight.host_terms["judge input sets"] == 2 * size.input_bytes
    assert tight.device == host.device   # the worker's side is the same
    # a float64 output's references stay float64 (rounding them would be the whole error budget)
    wide = _elementwise(6, itemsize=8)
    assert sizes.footprint(wide, sizes.Holding(lean=True, judge_on_host=True, tight=True)).host_terms[
        "judge float64 references"] == sizes.footprint(wide, sizes.Holding(lean=True, judge_on_host=True)).host_terms[
        "judge float64 references"]
    assert sizes.Holding(tight=True, output_itemsize=4).reference_dtype() is torch.float32
    assert sizes.Holding(tight=True, output_itemsize=8).reference_dtype() is None
    assert sizes.Holding(output_itemsize=4).reference_dtype() is None


@pytest.mark.parametrize("gib", [6, 7])
def test_kernelbench_activations_and_norms_fit_an_h200_only_tight(gib):
    """6 and 7 GiB a set (level 1's activations and norms): judged on the host they need more than
    a 128 GiB host plans for; tight, they fit, on the device too."""
    device, host = tool.H200_DEVICE_BYTES, tool.H200_HOST_BYTES
    size = _elementwise(gib)
    assert sizes.host_fits(size, host, hold=sizes.Holding(lean=True, judge_on_host=True))
    hold = sizes.holding(size, device, host)
    assert hold == sizes.Holding(lean=True, judge_on_host=True, tight=True)
    assert not sizes.fits(size, int(sizes.HEADROOM * device), hold=hold)
    assert not sizes.host_fits(size, host, hold=hold)   # within HEADROOM of it
    assert "references in float32" in hold.describe()


def test_a_tight_vet_keeps_float32_references_draws_nothing_ahead_and_still_tells_honest_from_cheat(monkeypatch):
    from kernelvet.draws import Draws
    _lean(monkeypatch)
    _hold(monkeypatch, sizes.Holding(lean=True, judge_on_host=True, tight=True, output_itemsize=4))
    aheads = []
    real_init = Draws.__init__

    def spy_init(self, *a, **k):
        real_init(self, *a, **k)
        aheads.append(self)

    monkeypatch.setattr(Draws, "__init__", spy_init)
    evs = _evidence(monkeypatch)
    report = vet_entry(by_name("softmax"), "cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    ev = evs[-1]
    assert all(ev.refs64[c.values_of].dtype == torch.float32 for c in ev.records("fresh"))
    assert aheads and all(d.ahead == 0 for d in aheads[:1]), [d.ahead for d in aheads]
    assert report.to_json()["phases_s"] is not None
    # float16 operands: a relative error of ~1e-4, which float32 references still see (6e-8 is theirs)
    cheat = vet_entry(by_name("fp16_softmax"), "cpu")
    assert cheat.verdict is Verdict.REJECT and CheckId.PRECISION in failed(cheat), [f.summary for f in cheat.failed]


def test_a_big_input_small_output_problem_keeps_its_sets_on_an_h200_drawing_none_ahead():
    """KernelBench's matrix-vector product (an 8 GiB set, a 2048-element output): lean, its sets
    drawn and kept on the device at use (a draw there costs milliseconds), never through the host."""
    n = 8 * GIB // 4
    size = sizes.ProblemSize(input_bytes=8 * GIB, largest_input=n, output_elements=2048, weight_bytes=0,
                             largest_weight=0, output_itemsize=4)
    device, host = tool.H200_DEVICE_BYTES, tool.H200_HOST_BYTES
    hold = sizes.holding(size, device, host)
    assert hold.lean and not hold.tight
    kept = sizes.with_sets_on_device(size, hold, device, host)
    assert kept.sets_on_device
    values = Draws(lambda k: k, order=[1, 2, 3])
    assert api._drawn_ahead(values, kept).ahead == 0
    assert api._drawn_ahead(Draws(lambda k: k, order=[1, 2]), sizes.Holding(sets_on_device=True)).ahead == 2


@pytest.mark.parametrize("hold,ahead", [(sizes.Holding(lean=True, judge_on_host=True, tight=True), 0),
                                        (sizes.Holding(), 2)])
def test_sets_the_device_draws_are_drawn_at_use_until_the_holding_has_room_for_more(monkeypatch, hold, ahead):
    """A big problem's sets (drawn by the device; here the host stands in for it) are drawn as
    they are used until the holding is known: one drawn ahead would sit beside the judge's first
    float64 reference, which the plan does not count (before this, the judge of a 6 GiB ReLU on an
    80 GB H100 held up to 18.7 GiB of the device against a planned 7.5). Then as the holding says."""
    from kernelvet import draws
    monkeypatch.setattr(api, "draws_on", lambda prob, dev: torch.device("cpu"))
    made, at_plan = [], []
    real_init = draws.Draws.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        made.append(self)

    def plan_for(*a, **k):
        at_plan.append([(len(d), len(d._pending)) for d in made])
        return hold, None

    monkeypatch.setattr(draws.Draws, "__init__", init)
    monkeypatch.setattr(sizes, "holding_for", lambda *a, **k: hold)
    monkeypatch.setattr(sizes, "plan_for", plan_for)
    report = vet_entry(by_name("softmax"), "cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert at_plan[0][0][1] == 0, at_plan   # every set drawn so far was asked for, none ahead
    assert made[0].ahead == ahead


def test_the_holding_a_cuda_vet_follows_keeps_its_sets_where_it_decided_to(monkeypatch):
    """KernelBench's batched matmul (1.25 GiB a set) on an H200: the full plan fits only with its
    sets on the host; the vet that keeps them on the device (decided before the first draw) follows
    the lean plan that fits with them there, never the full plan with sets it has no room for."""
    monkeypatch.setattr(sizes, "memories", lambda dev: (tool.H200_DEVICE_BYTES, tool.H200_HOST_BYTES))

    class Bmm(torch.nn.Module):
        def forward(self, a, b):
            return torch.bmm(a, b)

    inputs = [torch.empty(128, 512, 1024, device="meta"), torch.empty(128, 1024, 2048, device="meta")]
    cuda = torch.device("cuda")
    assert sizes.holding_for(Bmm(), inputs, cuda, True) == sizes.Holding(output_itemsize=4)
    kept = sizes.holding_for(Bmm(), inputs, cuda, True, sets_on_device=True)
    assert kept == sizes.Holding(lean=True, sets_on_device=True, output_itemsize=4)
    size = sizes.shape_only(Bmm(), inputs)
    assert sizes.footprint(size, kept).device <= sizes.HEADROOM * tool.H200_DEVICE_BYTES
    assert sizes.footprint(size, sizes.Holding(sets_on_device=True)).device > sizes.HEADROOM * tool.H200_DEVICE_BYTES


def test_kernelbench_activations_keep_their_sets_on_an_h200_when_references_are_made_in_slices():
    """A 6 GiB activation (level 1, 19-32): tight, its sets cross the host unless its float64
    references are made in slices of rows; with two slices they stay on the device. A reference
    whose rows may not be cut keeps its sets on the host."""
    device, host = tool.H200_DEVICE_BYTES, tool.H200_HOST_BYTES
    size = _elementwise(6)
    hold = sizes.holding(size, device, host)
    assert hold.tight and hold.reference_slices == 1
    asked = []
    kept = sizes.with_sets_on_device(size, hold, device, host, rows=lambda: asked.append(1) or 4096)
    assert kept == dataclasses.replace(hold, reference_slices=2, sets_on_device=True) and asked == [1]
    fp = sizes.footprint(size, kept)
    assert fp.device <= sizes.HEADROOM * device and fp.host <= sizes.HEADROOM * host
    assert fp.host_terms["judge fresh inputs (identity)"] == 3 * size.input_bytes   # compared on the host
    assert sizes.with_sets_on_device(size, hold, device, host, rows=lambda: 1) == hold
    assert sizes.with_sets_on_device(size, hold, device, host) == hold


def test_kernelbench_activations_fit_an_80_gb_card_only_with_the_workers_copies_on_the_host():
    """A 6 GiB activation on an 80 GB H100 (79.2 GiB) and its host (125.7 GiB): no holding whose
    worker keeps its two input copies on the device fits; with them on the host (CUDA only) the
    tight holding with its references made in slices does, the copies counted on the host."""
    device, host, rows = int(79.2 * GIB), int(125.7 * GIB), (lambda: 4096)
    size = _elementwise(6)
    assert not sizes.holding(size, device, host, rows=rows).copies_on_host
    assert sizes.footprint(size, sizes.holding(size, device, host, rows=rows)).device > sizes.HEADROOM * device
    hold = sizes.holding(size, device, host, rows=rows, copies_on_host=True)
    assert hold.copies_on_host and hold.tight and hold.reference_slices > 1 and not hold.redraw_sets
    fp = sizes.footprint(size, hold)
    assert fp.device <= sizes.HEADROOM * device and fp.host <= sizes.HEADROOM * host
    assert fp.host_terms["worker input copies"] == 2 * size.input_bytes and "worker input copies" not in fp.device_terms
    assert fp.device_terms["worker copy staging"] == sizes.STAGING_BYTES
    assert "the worker's input copies on the host" in hold.describe()
    # a problem that fits without it never crosses the bus for its copies
    assert not sizes.holding(_elementwise(1), device, host, rows=rows, copies_on_host=True).copies_on_host


def test_a_memory_note_is_for_cuda_devices_only():
    # the line that says the judge ran out of a device's memory names what the device held; a host
    # has no such account
    assert sizes.device_memory_note("cpu") == ""


@pytest.mark.gpu
def test_a_cuda_memory_note_names_the_judges_share_and_the_free_memory():
    torch.zeros(1 << 20, device="cuda")
    note = sizes.device_memory_note("cuda")
    assert re.fullmatch(r"the judge held [\d.]+ [MG]iB \([\d.]+ [MG]iB reserved\), the device [\d.]+ [MG]iB "
                        r"free of [\d.]+ GiB", note), note
