"""Problems of every shape KernelBench has: limits that follow from the problem, integer and
truly-zero outputs, dropout in the reference, inputs that do not fit in memory. Each problem is
written here, small; the candidates are the problem's own Model (honest, the library waived) or a
variant that is wrong in one way."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import hypothesis
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernelvet import metrics, sizes, vet
from kernelvet.errors import HarnessError, ProblemError, UsageError
from kernelvet.ids import CheckId
from kernelvet.judge import Settings
from kernelvet.report import Status, Verdict

QUICK = Settings(budget_ms=20.0, warmup_ms=5.0, loop_ms=10.0)
LIB = (CheckId.LIBRARY_CALL,)
# Honest candidates here are microseconds a call: on a host busy with other work, the clock checks
# (timers, caching) can see noise; these tests are about the data, and assert on the data checks.
HONEST = LIB + (CheckId.TIMERS, CheckId.CACHING)


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def problem(forward: str, inputs: str, init: str = "return []", ctor: str = "pass", head: str = "") -> str:
    return (f"import torch\nfrom torch import nn\n{head}\n\nclass Model(nn.Module):\n"
            f"    def __init__(self, *args):\n        super().__init__()\n        {ctor}\n\n"
            f"    def forward(self, *xs):\n        {forward}\n\n\n"
            f"def get_inputs():\n    {inputs}\n\n\ndef get_init_inputs():\n    {init}\n")


def as_candidate(problem_text: str, forward: str | None = None) -> str:
    """The problem's own Model as the candidate, or with its forward replaced."""
    body = "    pass\n" if forward is None else f"    def forward(self, *xs):\n        {forward}\n"
    return problem_text + "\n\nclass ModelNew(Model):\n" + body


def failed(report) -> set:
    return {f.check for f in report.failed}


ARGMAX = problem("return torch.argmax(xs[0], dim=1)", "return [torch.rand(8, 64, 16)]")
MEAN_AFTER_NORM = problem("return self.norm(xs[0]).mean(dim=(1, 2, 3))", "return [torch.randn(4, 8, 6, 6)]",
                          ctor="self.norm = nn.GroupNorm(2, 8)")
DROPOUT = problem("return torch.softmax(self.drop(self.fc(xs[0])), dim=1)", "return [torch.randn(16, 32)]",
                  ctor="self.fc = nn.Linear(32, 24); self.drop = nn.Dropout(0.3)")
SCALAR_LOSS = problem("return torch.nn.functional.mse_loss(xs[0], xs[1])",
                      "return [torch.randn(32, 16), torch.randn(32, 16)]")


def test_integer_outputs_are_compared_exactly(tmp_path):
    ref = write(tmp_path, "argmax.py", ARGMAX)
    honest = vet(write(tmp_path, "honest.py", as_candidate(ARGMAX)), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert honest.verdict is Verdict.PASS, [f.summary for f in honest.failed]
    # one index off in one row: an integer output has no tolerance
    off_by_one = as_candidate(ARGMAX, "out = torch.argmax(xs[0], dim=1)\n        out[0, 0] = (out[0, 0] + 1) % 64\n"
                                      "        return out")
    report = vet(write(tmp_path, "off.py", off_by_one), ref, device="cpu", allow=LIB, settings=QUICK)
    assert report.verdict is Verdict.REJECT
    assert CheckId.PRECISION in failed(report), [f.summary for f in report.failed]


def test_float_indices_are_not_integer_indices(tmp_path):
    ref = write(tmp_path, "argmax.py", ARGMAX)
    as_float = as_candidate(ARGMAX, "return torch.argmax(xs[0], dim=1).float()")
    report = vet(write(tmp_path, "f.py", as_float), ref, device="cpu", allow=LIB, settings=QUICK)
    assert report.verdict is Verdict.REJECT
    assert failed(report) & {CheckId.PRECISION, CheckId.OUTPUT_TYPE}


def test_an_output_that_is_truly_zero_is_judged_at_the_problems_scale(tmp_path):
    ref = write(tmp_path, "mean.py", MEAN_AFTER_NORM)
    honest = vet(write(tmp_path, "honest.py", as_candidate(MEAN_AFTER_NORM)), ref, device="cpu", allow=HONEST,
                 settings=QUICK)
    assert honest.verdict is Verdict.PASS, [f.summary for f in honest.failed]
    # an output off by a constant far above rounding is still wrong
    shifted = as_candidate(MEAN_AFTER_NORM, "return self.norm(xs[0]).mean(dim=(1, 2, 3)) + 0.01")
    report = vet(write(tmp_path, "shift.py", shifted), ref, device="cpu", allow=LIB, settings=QUICK)
    assert CheckId.PRECISION in failed(report)


def test_error_floor_follows_the_inputs_scale():
    x = torch.randn(1000, dtype=torch.float64)
    ref = torch.zeros(100, dtype=torch.float64)
    floor = metrics.error_floor([x], ref)
    assert floor == pytest.approx(metrics.FLOOR_FRACTION * 10 * x.pow(2).mean().sqrt().item())
    assert metrics.error_floor([x * 1000], ref) == pytest.approx(1000 * floor)
    tiny = torch.full((100,), 1e-9, dtype=torch.float64)
    assert metrics.rel_error(tiny, ref) == float("inf")            # purely relative: hopeless
    assert metrics.rel_error(tiny, ref, floor) < 2e-6              # at the problem's scale: rounding
    assert metrics.error_floor([torch.arange(5)], ref) == 0.0      # no floating inputs: purely relative


def test_error_floor_reads_a_many_dimensional_set_slice_by_slice_and_skips_non_finite_values():
    """Over several slices of a 5-D float32 set, non-finite values left out of the RMS; and no
    index tensor of the whole (a mask indexing a 4 GiB 5-D set asked the device for 40 GiB)."""
    x = torch.randn(4, 2, 8, 16, 2 * metrics.HOST_SLICE // 4096 + 3)
    x.view(-1)[::1001] = float("inf")
    x.view(-1)[7] = float("nan")
    finite = x[torch.isfinite(x)].double()
    ref = torch.zeros(100, dtype=torch.float64)
    want = metrics.FLOOR_FRACTION * 10 * finite.pow(2).mean().sqrt().item()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        got = metrics.error_floor([x], ref)
    seen = {e.name for e in prof.events()}
    assert got == pytest.approx(want, rel=1e-9)
    assert not seen & {"aten::nonzero", "aten::index", "aten::masked_select"}, seen


def test_integer_rel_error_is_the_fraction_that_differs():
    ref = torch.tensor([1, 2, 3, 4])
    assert metrics.rel_error(torch.tensor([1, 2, 3, 4]), ref) == 0.0
    assert metrics.rel_error(torch.tensor([1, 2, 0, 4]), ref) == 0.25
    assert metrics.rel_error(torch.tensor([1.0, 2.0, 3.0, 4.0]), ref) == 1.0
    assert metrics.rel_error(torch.tensor([True, False]), torch.tensor([True, True])) == 0.5


def test_dropout_in_the_reference_is_put_in_eval_mode(tmp_path):
    ref = write(tmp_path, "drop.py", DROPOUT)
    report = vet(write(tmp_path, "honest.py", as_candidate(DROPOUT)), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


def test_a_reference_drawing_at_random_in_forward_is_refused_saying_why(tmp_path):
    text = problem("return torch.nn.functional.dropout(xs[0], 0.5, training=True)", "return [torch.randn(16, 16)]")
    ref = write(tmp_path, "fdrop.py", text)
    with pytest.raises(ProblemError, match="nondeterministic.*dropout in training mode"):
        vet(write(tmp_path, "c.py", as_candidate(text)), ref, device="cpu", allow=LIB, settings=QUICK)


def test_scalar_loss_output(tmp_path):
    ref = write(tmp_path, "loss.py", SCALAR_LOSS)
    honest = vet(write(tmp_path, "honest.py", as_candidate(SCALAR_LOSS)), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert honest.verdict is Verdict.PASS, [f.summary for f in honest.failed]
    halved = as_candidate(SCALAR_LOSS, "return torch.nn.functional.mse_loss(xs[0], xs[1]) * 0.5")
    assert CheckId.PRECISION in failed(vet(write(tmp_path, "half.py", halved), ref, device="cpu", allow=LIB,
                                           settings=QUICK))


def test_a_reply_larger_than_the_problem_allows_is_a_protocol_violation(tmp_path):
    text = problem("return xs[0] * 2", "return [torch.randn(16, 16)]")
    ref = write(tmp_path, "small.py", text)
    # 16 MiB back for a 1 KiB output: no honest worker of this problem needs that
    huge = as_candidate(text, "return torch.zeros(2048, 2048)")
    report = vet(write(tmp_path, "huge.py", huge), ref, device="cpu", settings=QUICK)
    worker = report.finding(CheckId.WORKER)
    assert worker.status is Status.FAIL and "protocol violation" in worker.summary, worker.summary
    assert "allowed" in worker.summary


def test_a_wrong_shape_of_an_inputs_size_is_a_wrong_output_not_a_violation(tmp_path):
    text = problem("return xs[0].sum(dim=1)", "return [torch.randn(64, 4096)]")
    ref = write(tmp_path, "sum.py", text)
    report = vet(write(tmp_path, "same.py", as_candidate(text, "return xs[0].clone()")), ref, device="cpu",
                 allow=LIB, settings=QUICK)
    assert report.verdict is Verdict.REJECT
    assert report.finding(CheckId.WORKER).status is not Status.FAIL
    assert failed(report) & {CheckId.OUTPUT_TYPE, CheckId.PRECISION}


def test_message_limits_follow_the_problem():
    x, out = torch.randn(64, 4096), torch.randn(64, dtype=torch.float64)
    size = sizes.measure([x], out, torch.nn.Linear(8, 8))
    assert size.largest_input == 64 * 4096 and size.output_elements == 64 and size.largest_weight == 64
    assert size.message_limit(1) == max(sizes.FLOOR_BYTES, sizes.MARGIN * 8 * 64 * 4096)
    assert size.message_limit(9) == 9 * size.message_limit(1)
    big = sizes.measure([torch.empty(0)], torch.empty(1 << 28, dtype=torch.float64), None)   # 2 GiB of float64
    assert big.message_limit(1) > 1 << 30   # no fixed cap of 1 GiB


def test_a_problem_too_large_for_the_device_is_named_with_its_sizes():
    size = sizes.ProblemSize(input_bytes=8 << 30, largest_input=1 << 31, output_elements=1 << 30,
                             weight_bytes=0, largest_weight=0)
    why = sizes.fits(size, 141 << 30)
    assert why and "141.0 GiB" in why and "8.0 GiB" in why
    assert sizes.fits(size, None) is None
    small = sizes.ProblemSize(1 << 20, 1 << 18, 1 << 18, 0, 0)
    assert sizes.fits(small, 141 << 30) is None
    # the stated largest set fits under the holding chosen for it, one a tenth larger does not
    dev, host = 140 << 30, 128 << 30
    n = sizes.largest_fitting_set(dev, host)
    at_n = sizes.ProblemSize(n, n // 4, n // 4, 0, 0, output_itemsize=4)
    hold = sizes.holding(at_n, dev, host)
    assert sizes.fits(at_n, dev, hold=hold) is None and sizes.host_fits(at_n, host, hold=hold) is None
    over = sizes.ProblemSize(int(n * 1.1), n // 4, int(n * 1.1) // 4, 0, 0, output_itemsize=4)
    hold = sizes.holding(over, dev, host)
    assert sizes.fits(over, dev, hold=hold) or sizes.host_fits(over, host, hold=hold)


def test_inputs_that_run_out_of_memory_are_a_usage_error_not_the_files_fault(tmp_path):
    text = problem("return xs[0]", "raise MemoryError()")
    ref = write(tmp_path, "oom.py", text)
    with pytest.raises(UsageError, match="get_inputs\\(\\) ran out of memory") as got:
        vet(write(tmp_path, "c.py", as_candidate(text)), ref, device="cpu", settings=QUICK)
    assert not re.search(r"oom\.py:\d", str(got.value))   # no line of the file blamed


# -- weights are secret inputs ---------------------------------------------------------------

LAYERNORM = problem("return self.ln(xs[0])", "return [torch.randn(8, 4, 6, 6)]", ctor="self.ln = nn.LayerNorm((4, 6, 6))")

# The affine weights declared per channel (4,), not per element (4, 6, 6): right only while the
# reference's hold their init, ones and zeros.
LAYERNORM_WRONG_SHAPE = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))
        self.bias = nn.Parameter(torch.zeros(4))

    def forward(self, x):
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        var = x.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
        y = (x - mean) / torch.sqrt(var + 1e-5)
        return y * self.weight.view(1, 4, 1, 1) + self.bias.view(1, 4, 1, 1)
"""

LINEAR = problem("return self.fc(xs[0])", "return [torch.randn(16, 32)]", ctor="self.fc = nn.Linear(32, 24)")

# Honest: stores the weight transposed, under other names, and says how to load the reference's.
LINEAR_TRANSPOSED = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.w_t = nn.Parameter(torch.empty(32, 24))
        self.shift = nn.Parameter(torch.empty(24))

    def load_reference_state(self, state):
        with torch.no_grad():
            self.w_t.copy_(state["fc.weight"].t())
            self.shift.copy_(state["fc.bias"])

    def forward(self, x):
        return torch.addmm(self.shift, x, self.w_t)
"""

# Honest: the same shapes under other names (matched by order and shape, no hook needed).
LINEAR_RENAMED = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.proj = nn.Linear(32, 24)

    def forward(self, x):
        return torch.addmm(self.proj.bias, x, self.proj.weight.t())
"""


def test_weights_right_only_at_init_are_rejected(tmp_path):
    ref = write(tmp_path, "ln.py", LAYERNORM)
    report = vet(write(tmp_path, "wrong.py", LAYERNORM_WRONG_SHAPE), ref, device="cpu", allow=LIB,
                 settings=Settings(early_exit=False, budget_ms=20.0, warmup_ms=5.0, loop_ms=10.0))
    assert report.verdict is Verdict.REJECT
    assert {CheckId.PARAMETERS, CheckId.PRECISION} <= failed(report), [f.summary for f in report.failed]
    params = report.finding(CheckId.PARAMETERS)
    assert "(4, 6, 6)" in params.summary and "(4,)" in params.summary
    assert {"name": "ln.weight", "shape": [4, 6, 6]} in params.evidence["missing"]
    # waiving the finding leaves the wrong output: the fresh weights decide
    waived = vet(write(tmp_path, "wrong2.py", LAYERNORM_WRONG_SHAPE), ref, device="cpu",
                 allow=LIB + (CheckId.PARAMETERS,), settings=QUICK)
    assert CheckId.PRECISION in failed(waived)


def test_the_reference_as_candidate_gets_the_fresh_weights(tmp_path):
    ref = write(tmp_path, "ln.py", LAYERNORM)
    report = vet(write(tmp_path, "same.py", as_candidate(LAYERNORM)), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.finding(CheckId.PARAMETERS).status is Status.PASS


def test_an_honest_candidate_that_transposes_its_weights_through_the_hook_passes(tmp_path):
    ref = write(tmp_path, "lin.py", LINEAR)
    report = vet(write(tmp_path, "t.py", LINEAR_TRANSPOSED), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.finding(CheckId.PARAMETERS).evidence["hook"] is True


def test_the_same_candidate_without_its_hook_is_rejected(tmp_path):
    ref = write(tmp_path, "lin.py", LINEAR)
    text = LINEAR_TRANSPOSED.replace("def load_reference_state", "def _unused")
    report = vet(write(tmp_path, "nohook.py", text), ref, device="cpu", allow=LIB,
                 settings=Settings(early_exit=False, budget_ms=20.0, warmup_ms=5.0, loop_ms=10.0))
    assert {CheckId.PARAMETERS, CheckId.PRECISION} <= failed(report)
    assert "(24, 32)" in report.finding(CheckId.PARAMETERS).summary


def test_an_honest_candidate_with_renamed_weights_of_the_same_shapes_passes(tmp_path):
    ref = write(tmp_path, "lin.py", LINEAR)
    report = vet(write(tmp_path, "r.py", LINEAR_RENAMED), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


def test_redraw_keeps_the_scale_and_leaves_masks():
    from kernelvet import weights

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(64, 64)
            self.ln = torch.nn.LayerNorm(64)
            self.register_buffer("mask", torch.tril(torch.ones(8, 8)))

    torch.manual_seed(0)
    m = M()
    w0, mask0 = m.fc.weight.detach().clone(), m.mask.clone()
    drawn = dict((n, t) for n, t, _ in weights.redraw(m, 123))
    assert "mask" not in drawn and torch.equal(m.mask, mask0)
    assert not torch.equal(m.fc.weight, w0)
    assert abs(m.fc.weight.std().item() / w0.std().item() - 1) < 0.1
    assert (m.ln.weight > 0.4).all() and (m.ln.weight < 1.6).all() and m.ln.weight.std() > 0.1
    assert m.ln.bias.abs().max() > 0
    torch.manual_seed(0)
    again = M()
    weights.redraw(again, 123)
    assert torch.equal(again.fc.weight, m.fc.weight)   # one seed, one set of weights



def test_redraw_of_a_big_weight_is_the_same_whatever_its_threads_do():
    """Drawn in chunks on several threads, each chunk by a generator of its own: one seed, one
    set of values, of the module's scale, differing from chunk to chunk."""
    from kernelvet import weights
    torch.manual_seed(0)
    m = torch.nn.Linear(2048, 2100, bias=False)
    assert m.weight.numel() > weights.CHUNK
    w0 = m.weight.detach().clone()
    first = weights.redraw(m, 7)[0][1]
    m.weight.data.copy_(w0)
    again = weights.redraw(m, 7)[0][1]
    assert torch.equal(first, again) and torch.equal(m.weight, again)
    assert abs(first.std().item() / w0.std().item() - 1) < 0.01
    head, tail = first.view(-1)[:1000], first.view(-1)[weights.CHUNK:weights.CHUNK + 1000]
    assert not torch.equal(head, tail)

# -- outputs of any structure ----------------------------------------------------------------

MAX_WITH_INDICES = problem("v, i = torch.max(xs[0], dim=1)\n        return v, i", "return [torch.randn(16, 32)]")
TWO_OUTPUTS = problem("return [xs[0] * 2, (xs[0].sum(dim=1), xs[0].mean())]", "return [torch.randn(16, 32)]")
NUMBER = problem("return float(xs[0].double().sum())", "return [torch.randn(16, 32)]")


@pytest.mark.parametrize("text", [MAX_WITH_INDICES, TWO_OUTPUTS, NUMBER], ids=["values-indices", "nested", "number"])
def test_structured_outputs_pass_as_the_reference(tmp_path, text):
    ref = write(tmp_path, "ref.py", text)
    report = vet(write(tmp_path, "honest.py", as_candidate(text)), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


@pytest.mark.parametrize("text,wrong", [
    (MAX_WITH_INDICES, "v, i = torch.max(xs[0], dim=1)\n        return i, v"),                 # swapped
    (TWO_OUTPUTS, "return [xs[0] * 2, (xs[0].sum(dim=1), xs[0].mean() + 1)]"),               # one leaf off
    (NUMBER, "return float(xs[0].double().sum()) + 0.5"),
], ids=["swapped", "one-leaf", "number"])
def test_a_wrong_leaf_of_a_structure_is_rejected(tmp_path, text, wrong):
    ref = write(tmp_path, "ref.py", text)
    report = vet(write(tmp_path, "wrong.py", as_candidate(text, wrong)), ref, device="cpu", allow=LIB, settings=QUICK)
    assert report.verdict is Verdict.REJECT
    assert failed(report) & {CheckId.PRECISION, CheckId.OUTPUT_TYPE}, [f.summary for f in report.failed]


def test_pack():
    from kernelvet.outputs import pack
    t = torch.randn(3)
    assert pack(t) is t
    assert pack(2).dtype == torch.int64 and pack(True).dtype == torch.bool and pack(1.5).dtype == torch.float32
    assert pack(1.5, torch.float64).dtype == torch.float64
    both = pack((torch.ones(2), torch.tensor([3, 4])))
    assert both.dtype == torch.float32 and both.tolist() == [1.0, 1.0, 3.0, 4.0]
    assert pack([torch.tensor([1, 2]), [torch.tensor([3])]]).tolist() == [1, 2, 3]
    odd = (torch.ones(2), {"a": 1})
    assert pack(odd) is odd   # not a structure of tensors and numbers: left for the checks to see


# -- argmax/argmin ties: any index of the extreme --------------------------------------------

TIED = problem("return torch.argmax(xs[0], dim=1)", "return [torch.randint(0, 3, (8, 64, 16)).float()]")
TIED_MIN = problem("return torch.argmin(xs[0].flatten(1), dim=1, keepdim=True)",
                   "return [torch.randint(0, 3, (8, 64, 16)).float()]")
# the last index of the extreme, where torch picks the first
LAST = "n = xs[0].shape[1]\n        return n - 1 - torch.argmax(xs[0].flip(1), dim=1)"
LAST_MIN = ("v = xs[0].flatten(1)\n        n = v.shape[1]\n"
            "        return n - 1 - torch.argmin(v.flip(1), dim=1, keepdim=True)")


def test_argmax_ties_accept_any_index_of_the_maximum(tmp_path):
    ref = write(tmp_path, "tied.py", TIED)
    report = vet(write(tmp_path, "last.py", as_candidate(TIED, LAST)), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    ref_min = write(tmp_path, "tied_min.py", TIED_MIN)
    report = vet(write(tmp_path, "last_min.py", as_candidate(TIED_MIN, LAST_MIN)), ref_min, device="cpu", allow=HONEST,
                 settings=QUICK)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


def test_an_index_that_is_not_of_the_maximum_is_rejected(tmp_path):
    ref = write(tmp_path, "tied.py", TIED)
    wrong = as_candidate(TIED, "return torch.argmin(xs[0], dim=1)")
    report = vet(write(tmp_path, "min.py", wrong), ref, device="cpu", allow=LIB, settings=QUICK)
    assert CheckId.PRECISION in failed(report)


def test_index_mismatches_counts_only_non_extremes():
    from kernelvet import index_ties
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], dtype=torch.float64)
    rec = index_ties.Recorder()
    with rec:
        ref = torch.argmax(x, dim=1)
    ties = rec.ties_of(ref)
    assert ties is not None and ties.n == 3 and ties.rows.tolist() == [0, 1]
    assert index_ties.mismatches(torch.tensor([2, 2]), ref, ties) == 0
    assert index_ties.mismatches(torch.tensor([0, 1]), ref, ties) == 2
    assert index_ties.mismatches(torch.tensor([7, -1]), ref, ties) == 2   # out of range is never right


def _brute_mismatches(x, out, ref, dim, keepdim):
    """The definition: an index is right where its value is the extreme torch's own index holds."""
    if dim is None:
        x, dim, out, ref = x.reshape(-1), 0, out.reshape(1), ref.reshape(1)
    elif not keepdim:
        out, ref = out.unsqueeze(dim), ref.unsqueeze(dim)
    n = x.shape[dim]
    got, want = x.gather(dim, out.clamp(0, n - 1)), x.gather(dim, ref)
    ok = (out >= 0) & (out < n) & ((got == want) | (torch.isnan(got) & torch.isnan(want)))
    return int((~ok).sum())


@hypothesis.settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(),
       kind=st.sampled_from(["argmax", "argmin"]), nan=st.booleans(), seed=st.integers(0, 2**16))
def test_index_ties_agree_with_their_definition(shape, data, kind, nan, seed):
    from kernelvet import index_ties
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 3, shape, generator=g).double()
    if nan:
        x.view(-1)[seed % x.numel()] = float("nan")
    dim = data.draw(st.one_of(st.none(), st.integers(0, len(shape) - 1)))
    keepdim = dim is not None and data.draw(st.booleans())
    rec = index_ties.Recorder()
    with rec:
        ref = getattr(torch, kind)(x) if dim is None else getattr(torch, kind)(x, dim=dim, keepdim=keepdim)
    n = x.numel() if dim is None else x.shape[dim]
    out = torch.randint(-1, n + 1, ref.shape, generator=g)
    ties = rec.ties_of(ref)
    assert index_ties.mismatches(out, ref, ties) == _brute_mismatches(x, out, ref, dim, keepdim)
    assert index_ties.mismatches(ref, ref, ties) == 0


def test_index_ties_keep_the_tied_rows_not_a_copy_of_the_values():
    """A float64 copy of what an argmax ran over, kept with each reference, is 16 GiB a set at
    KernelBench's argmax size; the ties keep one byte an index of tied rows only."""
    from kernelvet import index_ties
    x = torch.randn(64, 512, 33, dtype=torch.float64)
    x[3, :, 7] = 2.0   # one element's extreme held by every index
    rec = index_ties.Recorder()
    with rec:
        ref = torch.argmax(x, dim=1)
    ties = rec.ties_of(ref)
    assert ties.rows.tolist() == [3 * 33 + 7] and ties.nbytes == 8 + 512
    other = ref.clone()
    other[3, 7] = 100   # any index of the tied element
    assert index_ties.mismatches(other, ref, ties) == 0
    other[0, 0] = (ref[0, 0] + 1) % 512   # not an extreme of an untied one
    assert index_ties.mismatches(other, ref, ties) == 1
    flat = torch.zeros(1000, 300, dtype=torch.float64)
    with index_ties.Recorder() as rec:
        ref = torch.argmin(flat, dim=1)
    assert rec.ties_of(ref).nbytes == 1000 * (8 + 300) < flat.nbytes / 7


def test_a_problem_too_large_for_the_workers_memory_is_refused_before_it_runs(tmp_path):
    from kernelvet import spawn
    text = problem("return xs[0] * 2", "return [torch.randn(2048, 4096)]")   # 32 MiB a set
    ref = write(tmp_path, "big.py", text)
    launcher = spawn.Launcher(mem_limit=256 << 20)
    try:
        with pytest.raises(UsageError, match=r"needs about .* of device memory .*one input set 32\.0 MiB.*memory limit of 256\.0 MiB"):
            vet(write(tmp_path, "c.py", as_candidate(text)), ref, device="cpu", settings=QUICK, launcher=launcher)
    finally:
        launcher.close()


def test_a_problem_whose_own_reference_outlasts_the_timeout_says_so(tmp_path):
    # slow only in float64, where the judge computes its references
    text = problem("if xs[0].dtype == torch.float64:\n            time.sleep(30)\n        return xs[0] * 2",
                   "return [torch.randn(16, 16)]", head="import time")
    ref = write(tmp_path, "slow.py", text)
    with pytest.raises(UsageError, match="the problem itself ran out of time: .* took longer than the --timeout of 2 s"):
        vet(write(tmp_path, "c.py", as_candidate(text)), ref, device="cpu", settings=QUICK, timeout=2.0)


def test_candidates_of_a_shared_reference_get_its_fresh_weights(tmp_path):
    from kernelvet.refcache import ReferenceCache
    from kernelvet.problem import load_problem
    ref = write(tmp_path, "lin.py", LINEAR)
    with ReferenceCache(load_problem(ref)) as cache:
        first = vet(write(tmp_path, "a.py", as_candidate(LINEAR)), ref, device="cpu", allow=HONEST,
                    settings=QUICK, reference=cache)
        second = vet(write(tmp_path, "b.py", LINEAR_TRANSPOSED), ref, device="cpu", allow=HONEST,
                     settings=QUICK, reference=cache)
    assert first.verdict is Verdict.PASS and second.verdict is Verdict.PASS, \
        [f.summary for f in [*first.failed, *second.failed]]
    assert first.seed == second.seed


def test_a_shared_problem_runs_its_reference_in_its_first_vets_worker_only(tmp_path):
    # The reference's run is the problem's: later vets' workers hold the candidate alone, and their
    # reports carry the first run's reference times.
    from kernelvet.refcache import ReferenceCache
    from kernelvet.problem import load_problem
    ref = write(tmp_path, "lin.py", LINEAR)
    lib = (CheckId.LIBRARY_CALL,)
    with ReferenceCache(load_problem(ref)) as cache:
        # timers waived: the null requests are not priced, so the next vet, which needs them, runs
        # the reference itself; the one after that reuses its run
        unpriced = vet(write(tmp_path, "a.py", as_candidate(LINEAR)), ref, device="cpu", allow=HONEST,
                       settings=QUICK, reference=cache)
        priced = vet(write(tmp_path, "b.py", as_candidate(LINEAR)), ref, device="cpu", allow=lib,
                     settings=QUICK, reference=cache)
        reused = vet(write(tmp_path, "c.py", LINEAR_TRANSPOSED), ref, device="cpu", allow=lib,
                     settings=QUICK, reference=cache)
        zeros = vet(write(tmp_path, "d.py", as_candidate(LINEAR, "return torch.zeros(16, 24)")), ref,
                    device="cpu", allow=lib, settings=QUICK, reference=cache)
    loads = [r.requests_s["load"][0] for r in (unpriced, priced, reused, zeros)]
    assert loads == [2, 2, 1, 1], loads
    assert reused.timing.reference_raw_ms == priced.timing.reference_raw_ms
    assert unpriced.timing.reference_raw_ms != priced.timing.reference_raw_ms
    assert CheckId.PRECISION in {f.check for f in zeros.failed}
    assert CheckId.GLOBAL_STATE not in {f.check for f in reused.failed}, [f.summary for f in reused.failed]


# -- the judge's own work on a big model ------------------------------------------------------

def test_a_models_float64_weights_are_made_once_a_device_and_remade_when_either_side_changes():
    import copy
    from kernelvet import problem as problem_mod
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.LayerNorm(32)).eval()
    x = [torch.randn(5, 64)]
    first = problem_mod.reference64(model, x, "cpu")
    made = problem_mod._PARAMS64[model]["cpu"]
    again = problem_mod.reference64(model, x, "cpu")
    assert problem_mod._PARAMS64[model]["cpu"] is made   # not converted again
    assert torch.equal(first, again) and torch.equal(first, copy.deepcopy(model).double()(x[0].double()))
    with torch.no_grad():   # the model's own weights changed (weights.redraw writes in place)
        model[0].weight.mul_(2.0)
    changed = problem_mod.reference64(model, x, "cpu")
    assert problem_mod._PARAMS64[model]["cpu"] is not made and not torch.equal(changed, first)


class _WritesItsWeights(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            self.w.add_(1.0)
        return x * self.w


def test_a_forward_that_writes_its_own_float64_weights_starts_from_the_models_next_time():
    from kernelvet import problem as problem_mod
    model, x = _WritesItsWeights(), [torch.ones(4)]
    outs = [problem_mod._forward64(problem_mod._model64(model, "cpu"), x, "cpu", "w") for _ in range(2)]
    assert torch.equal(outs[0], outs[1]) and outs[0][0].item() == 2.0
    assert model.w[0].item() == 1.0   # the model itself is untouched


def test_a_big_models_flops_are_counted_on_the_meta_device_whatever_its_inputs(monkeypatch):
    from kernelvet.judge import reference
    monkeypatch.setattr(reference, "META_COUNT_ELEMENTS", 1 << 12)
    monkeypatch.setattr(reference, "_flops_in_float64", lambda *a: pytest.fail("counted by a float64 call"))
    model = torch.nn.Linear(128, 128)   # 16k weights, an input of 128 elements
    assert reference._count_flops(model, [torch.ones(1, 128)]) == 2 * 128 * 128


# A reference whose float32 library does not repeat bitwise (as cuDNN's atomics-based algorithms do
# on a GPU; the judge's float64 runs do repeat): every other float32 call rounds differently.
WOBBLY = problem("self.calls += 1; return torch.tanh(xs[0]) * (1 + (self.calls % 2) * 3e-7 * "
                 "(xs[0].dtype == torch.float32))", "return [torch.randn(64, 256)]", ctor="self.calls = 0")


def test_a_reference_that_does_not_repeat_bitwise_lets_the_candidate_differ_within_the_bound(tmp_path):
    ref = write(tmp_path, "wobbly.py", WOBBLY)
    honest = vet(write(tmp_path, "honest.py", as_candidate(WOBBLY)), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert honest.verdict is Verdict.PASS, [f.summary for f in honest.failed]
    det = next(f for f in honest.findings if f.check is CheckId.DETERMINISM)
    assert "launches_differ" in det.evidence or "timed_reps_differing" in det.evidence, det
    far = as_candidate(WOBBLY, "self.calls += 1; return torch.tanh(xs[0]) * (1 + (self.calls % 2) * 5e-4)")
    report = vet(write(tmp_path, "far.py", far), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert report.verdict is Verdict.REJECT and failed(report) & {CheckId.DETERMINISM, CheckId.PRECISION}


# A reference whose float32 arithmetic drifts while cuDNN's TF32 is on, as deep convolutional
# networks do on a GPU (KernelBench's ResNet101 missed float64 by 0.07 on an H200, by 1.1e-4 on a
# CPU): the judge's float64 runs and a worker with TF32 off do not drift.
TF32_DRIFT = problem("return torch.tanh(xs[0]) * (1 + 0.05 * float(torch.backends.cudnn.allow_tf32 "
                     "and xs[0].dtype == torch.float32))", "return [torch.randn(64, 256)]")


@pytest.fixture
def drifts_as_on_cuda(monkeypatch):
    """The judge takes this CPU problem's float32 reference for a convolution's on CUDA."""
    from kernelvet.judge import reference
    monkeypatch.setattr(reference, "_tf32_may_drift", lambda dtype, dev, ops: dtype == torch.float32)


def test_a_problem_whose_tf32_yardstick_drifts_is_judged_in_float32_proper(tmp_path, drifts_as_on_cuda):
    ref = write(tmp_path, "drift.py", TF32_DRIFT)
    honest = vet(write(tmp_path, "honest.py", as_candidate(TF32_DRIFT)), ref, device="cpu", allow=HONEST,
                 settings=QUICK)
    assert honest.verdict is Verdict.PASS, [f.summary for f in honest.failed]
    assert "missed float64 by 0.05 with it" in honest.device["float32"]
    zeros = as_candidate(TF32_DRIFT, "return torch.zeros_like(xs[0])")
    assert CheckId.PRECISION in failed(vet(write(tmp_path, "zeros.py", zeros), ref, device="cpu", allow=HONEST,
                                           settings=QUICK))
    # a candidate that turns TF32 back on for itself
    tf32 = "import torch\ntorch.backends.cudnn.allow_tf32 = True\n" + as_candidate(TF32_DRIFT)
    report = vet(write(tmp_path, "tf32.py", tf32), ref, device="cpu", allow=HONEST, settings=QUICK)
    assert {CheckId.GLOBAL_STATE, CheckId.PRECISION} & failed(report), [f.summary for f in report.findings]


def test_a_later_vet_of_a_drifting_problem_runs_its_candidate_in_float32_proper(tmp_path, drifts_as_on_cuda):
    from kernelvet.problem import load_problem
    from kernelvet.refcache import ReferenceCache
    ref = write(tmp_path, "drift.py", TF32_DRIFT)
    honest = write(tmp_path, "honest.py", as_candidate(TF32_DRIFT))
    with ReferenceCache(load_problem(ref)) as cache:
        first = vet(honest, ref, device="cpu", allow=HONEST, settings=QUICK, reference=cache)
        second = vet(honest, ref, device="cpu", allow=HONEST, settings=QUICK, reference=cache)
    assert first.verdict is Verdict.PASS and second.verdict is Verdict.PASS, [f.summary for f in second.failed]
    assert "float32" in second.device


def test_a_drift_that_float32_proper_does_not_cure_is_still_the_problems(tmp_path, drifts_as_on_cuda):
    text = problem("return torch.tanh(xs[0]) * (1 + 0.05 * float(xs[0].dtype == torch.float32))",
                   "return [torch.randn(64, 256)]")
    ref = write(tmp_path, "always.py", text)
    with pytest.raises(HarnessError, match=r"misses its float64 result by 0\.05 .*with cuDNN's TF32 on: 0\.05"):
        vet(write(tmp_path, "c.py", as_candidate(text)), ref, device="cpu", allow=HONEST, settings=QUICK)


_TIES_PEAK = '''
import resource, torch
from kernelvet import index_ties
x = torch.empty(64, 2048, 256, dtype=torch.float64).uniform_()   # 256 MiB
x[5, :, 9] = 2.0
before = max(int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]),
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
ties = index_ties.ties_over(x, 1, "max")
assert ties.rows.tolist() == [5 * 256 + 9]
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024, x.nbytes)
'''


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_index_ties_take_one_byte_an_element_beside_the_values():
    """Finding the tied rows by a count of extremes made an int64 copy of the mask first, 8 bytes
    an element: 16 GiB beside KernelBench's argmax reference. The peak beside the values is the
    mask, one byte an element (an eighth of float64 values), and little more."""
    run = subprocess.run([sys.executable, "-c", _TIES_PEAK], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0, run.stderr
    grew, values = map(int, run.stdout.split())
    assert grew < values / 2, (grew, values)   # 1.14x the values with the count


class _ReadsValues(torch.nn.Module):
    def forward(self, x):
        return x[x > 0.5].sum() * torch.ones(2) @ torch.ones(2, 2)   # a shape only the values give


def test_a_big_model_with_no_counted_flops_is_not_run_in_float64_to_count_them(monkeypatch):
    """Elementwise ops, pooling and losses count no FLOPs on the meta device, nor would they in a
    float64 call (a float64 copy of a 16 GiB input on the host); a forward that cannot run there
    is counted by the float64 call."""
    from kernelvet.judge import reference
    monkeypatch.setattr(reference, "META_COUNT_ELEMENTS", 1 << 12)
    float64_calls = []
    real = reference._flops_in_float64
    monkeypatch.setattr(reference, "_flops_in_float64", lambda *a: float64_calls.append(1) or real(*a))
    assert reference._count_flops(torch.nn.AvgPool2d(3), [torch.rand(1, 4, 64, 64)]) is None
    assert reference._count_flops(torch.nn.ReLU(), [torch.rand(8, 1024)]) is None
    assert float64_calls == []
    assert reference._count_flops(_ReadsValues(), [torch.rand(64, 128)]) == 8.0
    assert float64_calls == [1]
