"""The reference's worker builds the trusted Model without running its init, from the judge's
every tensor (weights.whole_state, weights.build_whole): the same model as a build on the host
given the fresh weights, or, where that cannot be had, no such build at all."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from kernelvet import weights


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.bn = nn.BatchNorm1d(16)
        self.register_buffer("mask", torch.tril(torch.ones(16, 16)))
        self.register_buffer("scratch", torch.arange(16.0), persistent=False)

    def forward(self, x):
        return self.bn(self.fc(x)) @ self.mask + self.scratch


class Conv(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, 8, 3)
        self.ln = nn.LayerNorm([8, 6, 6])

    def forward(self, x):
        return self.ln(self.conv(x))


class PlainTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.offset = torch.randn(4)   # neither a parameter nor a buffer

    def forward(self, x):
        return self.fc(x) + self.offset


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4, bias=False)
        self.b = nn.Linear(4, 4, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


class ReadsValues(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = float(torch.rand(()).item()) + 1.0
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * self.scale


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 4)   # its flat weights: a list of the same tensors

    def forward(self, x):
        return self.rnn(x)[0]


def _judge_side(make, seed=5):
    torch.manual_seed(0)
    model = make()
    state = weights.redraw(model, seed)
    return model, state, dict([(n, t) for n, t, _ in state] + weights.whole_state(model, state))


@pytest.mark.parametrize("make, x", [(Masked, torch.randn(8, 16)), (lambda: Conv(3), torch.randn(2, 3, 8, 8))])
def test_a_model_built_whole_is_the_judges(make, x):
    model, state, values = _judge_side(make)
    built = weights.build_whole(make, values, torch.device("cpu"))
    assert built is not None
    torch.manual_seed(0)
    host = make()
    weights.hand_over(host, [(n, t) for n, t, _ in state], reference=True)
    for m in (model, built, host):
        m.eval()
    with torch.no_grad():
        assert torch.equal(built(x), model(x)) and torch.equal(built(x), host(x))
    assert all(t.device.type == "cpu" and not t.is_meta for t in [*built.parameters(), *built.buffers()])


@pytest.mark.parametrize("make", [PlainTensor, Tied, ReadsValues, Recurrent])
def test_a_model_that_cannot_be_built_whole_is_not(make):
    _model, _state, values = _judge_side(make)
    assert weights.build_whole(make, values, torch.device("cpu")) is None


def test_names_shapes_or_dtypes_other_than_the_judges_are_not_built():
    _model, _state, values = _judge_side(Masked)
    missing = {k: v for k, v in values.items() if k != "mask"}
    assert weights.build_whole(Masked, missing, torch.device("cpu")) is None
    wrong = {**values, "mask": values["mask"][:4]}
    assert weights.build_whole(Masked, wrong, torch.device("cpu")) is None
    cast = {**values, "mask": values["mask"].double()}
    assert weights.build_whole(Masked, cast, torch.device("cpu")) is None
