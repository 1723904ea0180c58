"""The keyed digest of an output's bits, and a lean vet that compares a bit-identical output once."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelvet import bits_digest, compact
from kernelvet.ids import CheckId
from kernelvet.practice import by_name
from kernelvet.report import Verdict

from .matrix import failed, vet_entry
from .test_sizes import _digest_always, _evidence, _lean

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool]


def _tensor(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    return torch.randint(0, 100, (n,), generator=g).to(dtype)


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(DTYPES), n=st.integers(1, 3000), seed=st.integers(0, 2**31), data=st.data())
def test_one_flipped_bit_anywhere_changes_the_digest_and_a_copy_keeps_it(dtype, n, seed, data):
    x = _tensor(dtype, n, seed)
    key = data.draw(st.integers(0, 2**128 - 1))
    assert bits_digest.digest(x.clone(), key) == bits_digest.digest(x, key)
    raw = x.clone().view(torch.uint8) if dtype != torch.bool else x.clone().view(torch.uint8)
    at = data.draw(st.integers(0, raw.numel() - 1))
    bit = data.draw(st.integers(0, 0 if dtype == torch.bool else 7))
    raw[at] ^= 1 << bit
    assert bits_digest.digest(raw.view(dtype), key) != bits_digest.digest(x, key)


def test_the_digest_names_dtype_and_shape_and_depends_on_the_key():
    x = torch.arange(12, dtype=torch.float32)
    d = bits_digest.digest(x, 7)
    assert d != bits_digest.digest(x.reshape(3, 4), 7)   # the same bits, another shape
    assert d != bits_digest.digest(x.view(torch.int32), 7)   # the same bits, another dtype
    assert d != bits_digest.digest(x, 8)
    assert bits_digest.digest(x.reshape(3, 4).t(), 7) == bits_digest.digest(x.reshape(3, 4).t().contiguous(), 7)
    assert bits_digest.digest(torch.zeros(0), 7) == ("torch.float32", (0,), 0, 0)


def test_words_that_differ_by_the_modulus_still_differ():
    """Each 16-bit word is below p: no two words are the same number mod p, as two 32-bit ones could be."""
    a = torch.tensor([0, 0], dtype=torch.int16)
    b = torch.tensor([0, 0], dtype=torch.int16)
    b[0] = -1   # 0xFFFF: the largest word, still below p
    assert bits_digest.digest(a, 1) != bits_digest.digest(b, 1)


def test_slices_past_the_first_count(monkeypatch):
    monkeypatch.setattr(bits_digest, "CHUNK", 16)
    x = torch.randn(100)
    y = x.clone()
    y[-1] += 1
    assert bits_digest.digest(x, 3) != bits_digest.digest(y, 3)
    assert bits_digest.digest(x, 3) == bits_digest.digest(x.clone(), 3)


# -- a lean vet, its outputs digested as they would be on an accelerator -----------------------

def test_a_lean_vet_compares_an_output_bit_identical_to_a_settled_one_once(monkeypatch):
    _lean(monkeypatch)
    evs = _evidence(monkeypatch)
    passes = _digest_always(monkeypatch)
    report = vet_entry(by_name("softmax"), "cpu")
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    ev = evs[-1]
    again = ev.extra.get("outputs_settled_again", 0)
    assert again >= 3, again   # the seen sets' outputs in the pair and control requests
    timed = ev.records("timed")
    assert all(c.output.device.type == "meta" for c in timed)
    # every settled output's numbers are there for the checks, repeats and first ones alike
    for c in timed:
        assert ev.compared(c.output, c.values_of) is not None
    # what is kept per digest holds no tensor of the vet's: a reference goes when its set does
    kept = [v for facts in ev.settled_bits.values() for _fn, v, _key, more in facts] + \
           [m for facts in ev.settled_bits.values() for *_, more in facts for m in more]
    assert not any(isinstance(v, torch.Tensor) for v in kept)
    with_digests = len(passes)
    passes.clear()
    monkeypatch.setattr(compact, "worth_a_digest", lambda out, refs: False)
    assert vet_entry(by_name("softmax"), "cpu").verdict is Verdict.PASS
    assert with_digests + again <= len(passes), (with_digests, again, len(passes))


@pytest.mark.parametrize("name", ["pointer_cache", "content_cache"])
def test_a_lean_vet_with_digests_still_rejects_a_cache(name, monkeypatch):
    _lean(monkeypatch)
    _digest_always(monkeypatch)
    report = vet_entry(by_name(name), "cpu")
    assert report.verdict is Verdict.REJECT, report.dumps()
    assert failed(report) & {CheckId.CACHING, CheckId.PRECISION}, [f.summary for f in report.failed]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_one_flipped_bit_changes_the_digest_and_a_copy_keeps_it():
    x = torch.randn(3 << 20, device="cuda")
    d = bits_digest.digest(x, 99)
    assert bits_digest.digest(x.clone(), 99) == d
    y = x.clone()
    y.view(torch.int32)[(3 << 20) - 1] ^= 1
    assert bits_digest.digest(y, 99) != d
