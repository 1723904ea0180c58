"""The reference runs as KernelBench runs it, and its float64 yardstick is the whole Model in
float64: calls without autograd, closures over submodules and tensors made inside forward in
float64 too, and a forward that draws random numbers named for what it is."""

import pytest
import torch

from kernelvet import spawn, vet
from kernelvet.errors import ProblemError
from kernelvet.problem import load_problem, reference64
from kernelvet.report import Verdict

REFERENCE_AS_CANDIDATE = "\n\nclass ModelNew(Model):\n    pass\n"

# minGPT's MLP: a function stored on the module, closed over its submodules (KernelBench's level 3
# problem 44); and a hidden state made inside forward without a dtype (level 3's RNNs).
CLOSURE_AND_FACTORY = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.ModuleDict(dict(fc=nn.Linear(32, 64), proj=nn.Linear(64, 32)))
        m = self.mlp
        self.mlpf = lambda x: m.proj(torch.tanh(m.fc(x)))

    def forward(self, x):
        h = torch.zeros(x.shape[0], 32) + 0.1
        return self.mlpf(x) + h * torch.tensor(0.3)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''

RANDOM_STATE = '''
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x + 1e-3 * torch.randn(x.shape)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
'''

GRAD_MODE = '''
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))

    def forward(self, x):
        print("autograd on" if torch.is_grad_enabled() else "autograd off", flush=True)
        return torch.relu(x) * self.w
'''


@pytest.fixture(scope="module")
def launcher():
    launcher = spawn.Launcher()
    yield launcher
    launcher.close()


def test_the_float64_reference_is_float64_through_closures_and_factories(write):
    prob = load_problem(write("mlp_closure.py", CLOSURE_AND_FACTORY))
    model, inputs = prob.build_model(prob.init_inputs(), 0), prob.draw_inputs(1)
    out = reference64(model, inputs, "cpu")
    assert out.dtype == torch.float64
    x = inputs[0].double()
    fc, proj = model.mlp.fc, model.mlp.proj
    want = (torch.tanh(x @ fc.weight.double().T + fc.bias.double()) @ proj.weight.double().T + proj.bias.double()
            + 0.1 * 0.3)
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-12), (out - want).abs().max()
    assert model.mlp.fc.weight.dtype == torch.float32   # the judge's Model itself is untouched


def test_the_reference_with_a_closure_passes_as_its_own_kernel(write, launcher):
    problem = write("mlp_closure.py", CLOSURE_AND_FACTORY)
    cand = write("mlp_closure_ref.py", CLOSURE_AND_FACTORY + REFERENCE_AS_CANDIDATE)
    report = vet(cand, problem, device="cpu", allow=["library-call"], launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]


def test_a_forward_that_draws_random_numbers_is_named_so(write):
    prob = load_problem(write("random_state.py", RANDOM_STATE))
    with pytest.raises(ProblemError, match="draws random numbers"):
        reference64(prob.build_model(prob.init_inputs(), 0), prob.draw_inputs(1), "cpu")


def test_calls_run_without_autograd_as_kernelbench_runs_them(write, launcher):
    cand = write("grad_mode.py", GRAD_MODE)
    report = vet(cand, write("relu.py", RANDOM_STATE.replace("x + 1e-3 * torch.randn(x.shape)", "torch.relu(x)")),
                 device="cpu", allow=["library-call"], launcher=launcher)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert "autograd off" in report.candidate_output and "autograd on" not in report.candidate_output
