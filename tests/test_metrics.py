"""The numbers the checks decide on, against the H200 calibration (shared/CALIBRATION.md):
honest float32 in any summation order passes; TF32, float16 and bfloat16 operands fail."""

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from kernelvet import metrics


def _matmul64(a, b):
    return a.double() @ b.double()


def _tf32(x):
    return (x.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


THIN = {"tf32": _tf32, "float16": lambda x: x.half().float(), "bfloat16": lambda x: x.bfloat16().float()}


@pytest.mark.parametrize("n", [64, 256, 512])
@pytest.mark.parametrize("fmt", sorted(THIN))
def test_thin_formats_exceed_the_float32_bound(n, fmt):
    g = torch.Generator().manual_seed(n)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    ref = _matmul64(a, b)
    out = (THIN[fmt](a) @ THIN[fmt](b)).float()
    err = metrics.rel_error(out, ref)
    assert err > 5 * metrics.tolerance(torch.float32, None), (fmt, err)


@settings(max_examples=25, deadline=None)
@given(n=st.sampled_from([16, 64, 128, 256]), k=st.sampled_from([8, 64, 512]), order=st.sampled_from(["fwd", "rev", "pairwise", "blocked"]))
def test_any_honest_float32_order_passes(n, k, order):
    g = torch.Generator().manual_seed(n * 7 + k)
    a, b = torch.randn(n, k, generator=g), torch.randn(k, n, generator=g)
    prods = a[:, :, None] * b[None, :, :]          # float32 products
    if order == "fwd":
        out = torch.zeros(n, n)
        for j in range(k):
            out += prods[:, j]
    elif order == "rev":
        out = torch.zeros(n, n)
        for j in reversed(range(k)):
            out += prods[:, j]
    elif order == "pairwise":
        out = prods.sum(1)
    else:
        out = sum(prods[:, j:j + 8].sum(1) for j in range(0, k, 8))
    err = metrics.rel_error(out, _matmul64(a, b))
    assert err < metrics.tolerance(torch.float32, None) / 5, err


def test_nonfinite_output_is_infinite_error():
    ref = torch.ones(4, dtype=torch.float64)
    assert metrics.rel_error(torch.tensor([1.0, float("nan"), 1.0, 1.0]), ref) == math.inf


def test_reference_slack_widens_the_bound_for_ill_conditioned_ops():
    assert metrics.tolerance(torch.float32, 1e-4) == pytest.approx(8e-4)
    assert metrics.tolerance(torch.float32, 1e-9) == metrics.TOLERANCE[torch.float32]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_poison_words_are_nans_with_a_payload(dtype):
    for rand in (0, 1, 12345, 2**63 - 1):
        word = metrics.nan_poison_word(dtype, rand)
        width = torch.tensor([], dtype=dtype).element_size()
        ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
        value = torch.tensor([word], dtype=ints).view(dtype)
        assert torch.isnan(value).all()
        canonical = torch.tensor([float("nan")], dtype=dtype).view(ints).item()
        assert word != canonical  # arithmetic NaNs never carry the secret payload


def test_poison_count_counts_exact_bit_patterns():
    word = metrics.nan_poison_word(torch.float32, 99)
    out = torch.randn(100)
    out.view(torch.int32)[:7] = word
    out[50] = float("nan")
    assert metrics.poison_count(out, (word,)) == 7


def test_ulp_stats_of_honest_float32_are_small():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(128, 128, generator=g), torch.randn(128, 128, generator=g)
    stats = metrics.ulp_stats(a @ b, _matmul64(a, b), torch.float32)
    assert stats["ulp_median"] < 50


def test_the_judges_warm_up_runs_every_metric_and_never_raises_for_a_bad_device(monkeypatch):
    """`warm_judge` (the CLI's, while its launcher starts) runs each metric on a 256 x 256 tensor of
    each output dtype (past the small-tensor kernels: a real output's size); a device that does not
    resolve is left for the vet to report."""
    from kernelvet import judge
    ran = []
    for name in ("rel_error", "ulp_stats", "rel_distance", "same_bits", "poison_count"):
        real = getattr(metrics, name)
        monkeypatch.setattr(metrics, name, lambda *a, _real=real, _name=name: ran.append((_name, a[0].numel())) or _real(*a))
    judge.warm_judge("cpu")
    assert sorted({n for n, _ in ran}) == ["poison_count", "rel_distance", "rel_error", "same_bits", "ulp_stats"]
    assert len(ran) == 15 and all(numel == 256 * 256 for _, numel in ran)
    judge.warm_judge("no-such-device")   # returns; the vet says what is wrong with it


# -- comparisons in slices (metrics.CHUNK): a big output's comparison holds no float64 copy of it --

@pytest.mark.parametrize("ref_dtype", [torch.float64, torch.float32])
def test_comparisons_in_slices_give_the_numbers_of_the_whole(monkeypatch, ref_dtype):
    torch.manual_seed(3)
    ref = torch.randn(41, 33, 29, dtype=torch.float64)
    out = (ref + 1e-5 * torch.randn_like(ref)).float()
    bad = out.clone()
    bad[7, 3, 2] = float("nan")
    ref = ref.to(ref_dtype)
    whole = {}
    for chunk in (1 << 24, 997):
        monkeypatch.setattr(metrics, "CHUNK", chunk)
        whole[chunk] = (metrics.rel_error(out, ref), metrics.rel_error(out, ref, 1e6), metrics.rel_distance(out, ref),
                        metrics.rel_error(bad, ref), metrics.rel_distance(bad, ref), metrics.row_errors(out, ref),
                        metrics.row_errors(bad, ref), metrics.ulp_stats(out, ref, torch.float32),
                        metrics.poison_count(bad, (int(bad.view(torch.int32)[7, 3, 2]),)))
    a, b = whole[1 << 24], whole[997]
    for x, y in zip(a[:3], b[:3]):
        assert x == pytest.approx(y, rel=1e-12) and 0 < x
    assert a[3] == b[3] == math.inf and a[4] == b[4] == math.inf
    assert torch.allclose(a[5], b[5], rtol=1e-12, atol=0) and torch.equal(a[6].isinf(), b[6].isinf()) and b[6].isinf().sum() == 1
    assert a[7] == pytest.approx(b[7], rel=1e-12) and a[8] == b[8] == 1


def _pairs():
    """(out, ref) pairs of each kind the one-pass comparison meets: an honest output, one with a
    NaN and one with an infinity, a zero output against a zero reference, zero rows, a 1-D output."""
    torch.manual_seed(5)
    ref = torch.randn(24, 16, 40, dtype=torch.float64)
    out = (ref + 1e-5 * torch.randn_like(ref)).float()
    nan, inf, rows0 = out.clone(), out.clone(), out.clone()
    nan[3, 2, 1], inf[5, 0, 7] = float("nan"), -float("inf")
    ref0 = ref.clone()
    ref0[4], rows0[4] = 0.0, 0.0
    ref0[6] = 0.0   # a zero reference row the output misses
    flat = torch.randn(5000, dtype=torch.float64)
    return [(out, ref), (nan, ref), (inf, ref), (torch.zeros(8, 300), torch.zeros(8, 300, dtype=torch.float64)),
            (rows0, ref0), (flat.float(), flat)]


@pytest.mark.parametrize("chunk", [1 << 24, 997])
def test_one_pass_comparison_gives_rel_error_and_row_errors_as_their_own_passes(monkeypatch, chunk):
    monkeypatch.setattr(metrics, "CHUNK", chunk)
    monkeypatch.setattr(metrics, "HOST_SLICE", 1 << 10)   # several slices, rows split across none
    for out, ref in _pairs():
        c, cr = metrics.compare(out, ref), metrics.compare_rows(out, ref)
        for floor in (0.0, 1e3):
            want = metrics.rel_error(out, ref, floor)
            for got in (metrics.rel_error_of(c, floor), metrics.rel_error_of(cr, floor)):
                assert got == pytest.approx(want, rel=1e-12) or got == want == math.inf
        want_rows, got_rows = metrics.row_errors(out, ref), metrics.row_errors_of(cr)
        assert torch.equal(want_rows.isinf(), got_rows.isinf()) and torch.equal(want_rows.isnan(), got_rows.isnan())
        finite = want_rows.isfinite()
        assert torch.allclose(want_rows[finite], got_rows[finite], rtol=1e-12, atol=0)


def test_one_pass_comparison_leaves_integer_outputs_and_non_finite_references_to_rel_error():
    ref = torch.randn(10, 300, dtype=torch.float64)
    ref[2, 5] = float("inf")
    assert metrics.compare(ref.float(), ref) is None and metrics.compare_rows(ref.float(), ref) is None
    assert metrics.compare(torch.zeros(4, dtype=torch.int64), torch.zeros(4, dtype=torch.int64)) is None
    assert metrics.compare(torch.zeros(4), torch.zeros(5, dtype=torch.float64)) is None


def test_a_device_output_is_compared_on_its_device_against_a_host_reference():
    """Where the pass runs: on the output's accelerator when the reference is on the host (the meta
    device stands in for it here; the GPU test below computes there), else where the reference is."""
    host, dev = torch.zeros(4, dtype=torch.float64), torch.zeros(4, device="meta")
    assert metrics._compared_on(dev, host) == dev.device
    assert metrics._compared_on(host.float(), host) == host.device
    assert metrics._compared_on(host.float(), torch.zeros(4, dtype=torch.float64, device="meta")).type == "meta"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_one_pass_comparison_of_a_device_output_against_a_host_reference(monkeypatch):
    """Judged on the host, an output still on the device is compared there, its host reference moved
    CHUNK elements at a time: the numbers of the output compared on the host whole, the row errors
    on the host as the reference is."""
    monkeypatch.setattr(metrics, "CHUNK", 4099)
    for out, ref in _pairs():
        on_device = out.cuda()
        c, cr = metrics.compare(on_device, ref), metrics.compare_rows(on_device, ref)
        want = metrics.rel_error(out, ref)
        assert metrics.rel_error_of(c) == pytest.approx(want, rel=1e-12) or metrics.rel_error_of(c) == want == math.inf
        assert metrics.rel_error_of(cr) == pytest.approx(want, rel=1e-12) or metrics.rel_error_of(cr) == want == math.inf
        want_rows = metrics.row_errors(out, ref)
        assert torch.equal(want_rows.isinf(), metrics.row_errors_of(cr).isinf())
        assert cr.rows[0].device.type == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_two_host_tensors_compared_on_an_accelerator_read_as_on_the_host(monkeypatch):
    """rel_distance's `on`: two big tensors on the host (a fresh output and another, two references)
    compared on the device, each slice crossing to it: the distance the host reads, NaN as far."""
    monkeypatch.setattr(metrics, "CHUNK", 4099)
    a, b = torch.randn(50_000), torch.randn(50_000, dtype=torch.float64)
    for x in (a, a.clone().index_fill_(0, torch.tensor([7]), math.nan)):
        want = metrics.rel_distance(x, b)
        got = metrics.rel_distance(x, b, on=torch.device("cuda"))
        assert got == pytest.approx(want, rel=1e-12) or got == want == math.inf
