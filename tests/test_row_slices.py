"""The float64 reference of a big batch made a slice of rows at a time: only for a reference whose
rows are independent (asked of it on two rows), the same answer as made whole, and a holding that
asks for it only where nothing leaner fits."""

from __future__ import annotations

import pytest
import torch

from kernelvet import sizes, vet
from kernelvet.errors import ProblemError, ReferenceOutOfMemory, UsageError
from kernelvet.judge import api
from kernelvet.judge.row_slices import batch_rows, reference64_in_slices
from kernelvet.problem import load_problem, reference64
from kernelvet.report import Verdict

from .matrix import failed
from .test_problem_data import QUICK, as_candidate, problem, write
from .test_sizes import RIGHT_THEN_ZEROS

CPU = torch.device("cpu")
ROWS = "return [torch.rand(6, 4, 8, 8)]"


def _model(tmp_path, forward, inputs=ROWS, ctor="pass", name="p.py"):
    prob = load_problem(write(tmp_path, name, problem(forward, inputs, ctor=ctor)))
    return prob.build_model([], 0), prob.draw_inputs(1)


@pytest.mark.parametrize("forward, ctor", [
    ("return self.norm(xs[0])", "self.norm = nn.InstanceNorm2d(4)"),
    ("return torch.relu(xs[0]) * 2", "pass"),
    ("return xs[0].sum(dim=(2, 3))", "pass"),
])
def test_a_reference_whose_rows_are_independent_may_be_cut(tmp_path, forward, ctor):
    model, x = _model(tmp_path, forward, ctor=ctor)
    assert batch_rows(model, x, CPU) == 6


@pytest.mark.parametrize("forward, inputs, ctor", [
    ("return self.norm(xs[0])", ROWS, "self.norm = nn.BatchNorm2d(4)"),   # normalised over the batch
    ("return xs[0] - xs[0].mean(dim=0)", ROWS, "pass"),
    ("return torch.softmax(xs[0], dim=0)", ROWS, "pass"),
    ("return xs[0].mean()", ROWS, "pass"),                                 # one number
    ("return xs[0] * 2, xs[0] + 1", ROWS, "pass"),                         # two tensors
    ("return xs[0].view(6, -1)", ROWS, "pass"),                            # the batch's size written in
    ("return xs[0] @ xs[1]", "return [torch.rand(6, 6), torch.rand(6, 3)]", "pass"),
    ("return xs[0] * 2", "return [torch.rand(6, 4), torch.rand(5, 4)]", "pass"),
    ("return xs[0].argmax(dim=1)", ROWS, "pass"),                           # indices: not sliced
])
def test_a_reference_that_mixes_or_fixes_its_rows_is_made_whole(tmp_path, forward, inputs, ctor):
    model, x = _model(tmp_path, forward, inputs, ctor)
    assert batch_rows(model, x, CPU) == 1


def test_shapes_alone_are_probed_with_values_of_their_own(tmp_path):
    model, _ = _model(tmp_path, "return self.norm(xs[0])", ctor="self.norm = nn.InstanceNorm2d(4)")
    with torch.device("meta"):
        shapes = [torch.rand(6, 4, 8, 8)]
    assert batch_rows(model, shapes, CPU) == 6
    labels, _ = _model(tmp_path, "return xs[0] * 2", name="q.py")
    with torch.device("meta"):
        ints = [torch.zeros(6, 4, dtype=torch.int64)]
    assert batch_rows(labels, ints, CPU) == 1


@pytest.mark.parametrize("slices", [2, 4, 6])
def test_a_reference_made_in_slices_is_the_whole_ones(tmp_path, slices):
    model, x = _model(tmp_path, "return self.norm(xs[0]) * 3", ctor="self.norm = nn.InstanceNorm2d(4, affine=True)")
    whole = reference64(model, x, CPU)
    cut = reference64_in_slices(model, x, CPU, slices, CPU, None)
    assert cut.dtype == torch.float64 and torch.allclose(cut, whole, rtol=1e-12, atol=1e-12)
    kept = reference64_in_slices(model, x, CPU, slices, CPU, torch.float32)
    assert kept.dtype == torch.float32 and torch.equal(kept, whole.float())


def test_a_nondeterministic_reference_is_still_refused_in_slices(tmp_path):
    model, x = _model(tmp_path, "return xs[0] + torch.rand_like(xs[0])", name="r.py")
    with pytest.raises(ProblemError, match="nondeterministic"):
        reference64_in_slices(model, x, CPU, 3, CPU, None)


GIB = 1 << 30


def test_the_holding_cuts_references_into_slices_only_where_nothing_leaner_fits():
    """KernelBench's InstanceNorm on an H200 (bench/results/2026-12-02-cpu-estimates): 7 GiB a set
    and as much output, 112 rows, 42 GiB of float64 intermediates: no holding fits the device (the
    float64 reference in the making alone is 63 GiB); made in slices of rows, it does."""
    n = 7 * GIB // 4
    size = sizes.ProblemSize(input_bytes=7 * GIB, largest_input=n, output_elements=n, weight_bytes=0,
                             largest_weight=0, output_itemsize=4, forward_bytes64=42 * GIB)
    device, host = 139 * GIB, 160 * GIB
    asked = []
    plain = sizes.holding(size, device, host)
    assert plain.reference_slices == 1 and sizes.fits(size, int(sizes.HEADROOM * device), hold=plain)
    hold = sizes.holding(size, device, host, rows=lambda: asked.append(1) or 112)
    assert asked == [1] and hold.tight and hold.reference_slices in (2, 4, 8, 16)
    assert not sizes.fits(size, int(sizes.HEADROOM * device), hold=hold)
    assert "slices of rows" in hold.describe()
    cut = sizes.footprint(size, hold).device_terms["reference64 in the making"]
    assert cut * hold.reference_slices >= sizes.footprint(size, plain).device_terms["reference64 in the making"]
    # rows that may not be cut: the tight holding, for `fits` to name
    assert sizes.holding(size, device, host, rows=lambda: 1) == plain
    # a host too small whatever the slices: the fewest slices that fit the device, for `fits` to name the host
    short = sizes.holding(size, device, 100 * GIB, rows=lambda: 112)
    assert short.reference_slices == hold.reference_slices and sizes.host_fits(size, 90 * GIB, hold=short)
    # a problem that fits as it is never asks
    small = sizes.ProblemSize(1 << 20, 1 << 18, 1 << 18, 0, 0, output_itemsize=4)
    assert sizes.holding(small, device, host, rows=lambda: asked.append(2) or 4) == sizes.Holding() and asked == [1]


def test_a_vet_with_references_in_slices_passes_the_honest_and_rejects_the_zeros(tmp_path, monkeypatch):
    monkeypatch.setattr(sizes, "holding", lambda *a, **k: sizes.Holding(
        lean=True, judge_on_host=True, tight=True, reference_slices=3, output_itemsize=4))
    made = []
    from kernelvet.judge import api
    real = api.reference64_in_slices
    monkeypatch.setattr(api, "reference64_in_slices", lambda *a, **k: made.append(a[3]) or real(*a, **k))
    text = problem("return self.norm(xs[0]) * 2", ROWS, ctor="self.norm = nn.InstanceNorm2d(4)")
    ref = write(tmp_path, "norm.py", text)
    allow = ["library-call", "timers"]   # microsecond calls on a busy host: the data checks decide
    honest = vet(write(tmp_path, "h.py", as_candidate(text)), ref, device="cpu", settings=QUICK, allow=allow)
    assert honest.verdict is Verdict.PASS, [f.summary for f in honest.failed]
    assert made and set(made) == {3}
    zeros = vet(write(tmp_path, "z.py", text + RIGHT_THEN_ZEROS), ref, device="cpu", settings=QUICK, allow=allow)
    assert zeros.verdict is Verdict.REJECT, [f.summary for f in zeros.failed]
    assert failed(zeros)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_vet_with_references_in_slices_judges_on_the_host(tmp_path, monkeypatch):
    """On the device: each slice of a set's float64 reference made there and kept on the host in
    float32 as it is made; the problem's own Model passes with the library allowed."""
    monkeypatch.setattr(sizes, "holding", lambda *a, **k: sizes.Holding(
        lean=True, judge_on_host=True, tight=True, reference_slices=4, output_itemsize=4))
    text = problem("return self.norm(xs[0]) * 2", "return [torch.rand(64, 32, 64, 64)]",
                   ctor="self.norm = nn.InstanceNorm2d(32)")
    ref = write(tmp_path, "norm.py", text)
    report = vet(write(tmp_path, "h.py", as_candidate(text)), ref, device="cuda", allow=["library-call"],
                 prepare_next=False)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.device["judged_on"] == "cpu"


def _out_of_memory_above(rows: int, monkeypatch):
    """row_slices' float64 forward, failing as a device out of memory does for more than `rows`
    rows; the row counts it was asked for, in order."""
    from kernelvet.judge import row_slices
    asked, forward = [], row_slices._forward64

    def limited(m64, part, device, where):
        n = part[0].shape[0]
        asked.append(n)
        if n > rows:
            raise ReferenceOutOfMemory(f"{where}: the float64 reference (Model.forward) ran out of memory")
        return forward(m64, part, device, where)
    monkeypatch.setattr(row_slices, "_forward64", limited)
    return asked


def test_a_slice_out_of_memory_is_made_again_in_halves(tmp_path, monkeypatch):
    model, x = _model(tmp_path, "return torch.relu(xs[0]) * 2")
    whole = reference64(model, x, CPU)
    asked = _out_of_memory_above(2, monkeypatch)
    sliced = reference64_in_slices(model, x, CPU, 2, CPU, None)
    assert asked == [3, 2, 2, 2] and torch.equal(sliced, whole)


def test_a_row_out_of_memory_is_the_machines_limit(tmp_path, monkeypatch):
    model, x = _model(tmp_path, "return torch.relu(xs[0]) * 2")
    asked = _out_of_memory_above(0, monkeypatch)
    with pytest.raises(UsageError, match="ran out of memory"):
        reference64_in_slices(model, x, CPU, 2, CPU, None)
    assert asked == [3, 2, 1]


def _whole_out_of_memory(monkeypatch):
    def whole(model, inputs, device):
        raise ReferenceOutOfMemory("p.py: the float64 reference (Model.forward) ran out of memory on cuda:0")
    monkeypatch.setattr(api, "reference64", whole)


def test_a_whole_reference_out_of_memory_is_made_in_slices_where_its_rows_may_be_cut(tmp_path, monkeypatch):
    model, x = _model(tmp_path, "return self.norm(xs[0])", ctor="self.norm = nn.InstanceNorm2d(4)")
    expected = reference64(model, x, CPU)
    _whole_out_of_memory(monkeypatch)
    made = api._reference_of(model, CPU, CPU, sizes.Holding(), {"a": x}, "a")
    assert torch.allclose(made, expected, rtol=1e-12, atol=0)


def test_a_whole_reference_out_of_memory_whose_rows_mix_says_so(tmp_path, monkeypatch):
    model, x = _model(tmp_path, "return torch.softmax(xs[0], dim=0)", name="q.py")
    _whole_out_of_memory(monkeypatch)
    with pytest.raises(ReferenceOutOfMemory, match="p.py: the float64 reference .* ran out of memory on cuda:0"):
        api._reference_of(model, CPU, CPU, sizes.Holding(), {"a": x}, "a")
