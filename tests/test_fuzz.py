"""Property-based tests (Hypothesis) of the command line against random malformed input.

(a) Random problem files, candidate files and argument lists, built from valid parts, broken
    parts, random tokens, truncations and stray bytes: `cli.main` never raises, always answers
    with an exit code in {0, 1, 2, 3}, and a usage or harness error is one line, no traceback.
(b) A candidate whose forward returns no tensor (None, numbers, containers, strings, arrays, a
    look-alike whose == is always True, a tensor subclass that lies to comparisons...) is never
    passed: it is rejected (exit 1), never an error of the judge.

Examples are few (a vet costs about a second on a small CPU); most malformed files fail in the
judge before any worker starts, so they are cheap.
"""

from __future__ import annotations

import contextlib
import io
import os

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from kernelvet import cli

from .test_malformed import CANDIDATE, problem

FUZZ = settings(max_examples=20, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def run_cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([os.fspath(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def assert_answered(rc: int, err: str) -> None:
    """The judge's contract with any input: a known exit code, and an error is one line."""
    event(f"exit {rc}")  # `pytest --hypothesis-show-statistics` shows how the examples ended
    assert rc in (0, 1, 2, 3), (rc, err)
    assert "Traceback" not in err, err
    if rc in (2, 3):
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kernelvet: "), err


# --------------------------------------------------------------------------- building blocks

HEADS = ["import torch\nfrom torch import nn\n", "import torch\n", "", "from torch import nn\n"]
MODELS = [
    "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    "class Model(nn.Module):\n    def forward(self, x, y):\n        return x + y\n",
    "class Model(nn.Module):\n    def forward(self, x):\n        return x, x\n",
    "class Model(nn.Module):\n    def forward(self, x):\n        return None\n",
    "class Model(nn.Module):\n    def forward(self, x):\n        raise ValueError('broken')\n",
    "class Model(nn.Module):\n    def forward(self, x):\n        return x * torch.rand(1)\n",
    "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.n = n\n"
    "    def forward(self, x):\n        return x * self.n\n",
    "class Model:\n    def forward(self, x):\n        return x\n",
    "Model = 3\n",
    "def Model():\n    return 3\n",
    "",
]
GET_INPUTS = [
    "def get_inputs():\n    return [torch.randn(8, 8)]\n",
    "def get_inputs():\n    return []\n",
    "def get_inputs():\n    return None\n",
    "def get_inputs():\n    return [None, 'x']\n",
    "def get_inputs():\n    return torch.randn(8)\n",
    "def get_inputs():\n    return [torch.ones(8)]\n",
    "def get_inputs():\n    return [torch.randn(8, dtype=torch.complex64)]\n",
    "def get_inputs():\n    return [torch.randn(8), 3]\n",
    "def get_inputs():\n    raise RuntimeError('no inputs')\n",
    "get_inputs = [1]\n",
    "",
]
GET_INIT_INPUTS = [
    "def get_init_inputs():\n    return []\n",
    "def get_init_inputs():\n    return [2]\n",
    "def get_init_inputs():\n    return 3\n",
    "def get_init_inputs():\n    return [object()]\n",
    "def get_init_inputs():\n    return [{'a': [1, (2, 3)]}]\n",
    "def get_init_inputs():\n    raise SystemExit(1)\n",
    "",
]
EXTRAS = ["", "OUTPUT_ARG = 'x'\n", "OUTPUT_ARG = -1\n", "OUTPUT_ARG = 0\n", "FLOPS = 'many'\n",
          "1 / 0\n", "import sys\nsys.exit(0)\n", "# coding: utf-7\n"]
CANDIDATE_BODIES = [
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n",
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        return None\n",
    "class ModelNew(nn.Module):\n    def __init__(self, a, b):\n        super().__init__()\n"
    "    def forward(self, x):\n        return x * 2\n",
    "class ModelNew(nn.Module):\n    def forward(self):\n        return 1\n",
    "ModelNew = 3\n",
    "ModelNew = torch.relu\n",
    "def kernel(x):\n    return x * 2\n",
    "raise ImportError('missing')\n",
    "class Model(nn.Module):\n    pass\n",
    "",
]
# Tokens that break the grammar or the encoding; no loops or process control, so that any file
# that still parses (a problem file is imported in the judge) ends quickly and harmlessly.
TOKENS = ["(", ")", ":", "def", "class", "return", "torch", "x", "[", "]", "'", '"""', "\\", "\x00", "é",
          "\t", "    ", "lambda", "=", "1/0", "\n", "#", "@", "nn.Module", "*", "None", ",", "yield", "async"]
BYTES = [b"\xff", b"\xfe\xff", b"\xc3", b"\xef\xbb\xbf", b"\x00", b"\x80\x80"]


@st.composite
def mutated(draw, parts: list[str]) -> bytes:
    """The parts joined, then maybe a few mutations: a token in, a line out, a truncation, lines
    swapped, a stray byte. Often none: a file that parses reaches the deeper checks."""
    text = "\n\n".join(parts)
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):
        kind = draw(st.sampled_from(["insert", "drop-line", "truncate", "swap-lines"]))
        if kind == "insert":
            at = draw(st.integers(0, len(text)))
            text = text[:at] + draw(st.sampled_from(TOKENS)) + text[at:]
        elif kind == "drop-line" and text:
            lines = text.splitlines(keepends=True)
            del lines[draw(st.integers(0, len(lines) - 1))]
            text = "".join(lines)
        elif kind == "truncate":
            text = text[:draw(st.integers(0, len(text)))]
        elif kind == "swap-lines" and text.count("\n") > 1:
            lines = text.splitlines(keepends=True)
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
    raw = text.encode()
    if draw(st.integers(0, 9)) == 0:
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.sampled_from(BYTES)) + raw[at:]
    return raw


@st.composite
def files(draw, slots: list[list[str]]) -> bytes:
    """One part per slot, the first (valid) one except in up to two slots, then mutated: each
    broken part alone reaches the check meant for it."""
    broken = draw(st.sets(st.integers(0, len(slots) - 1), max_size=2))
    parts = [draw(st.sampled_from(slot[1:])) if i in broken else slot[0] for i, slot in enumerate(slots)]
    return draw(mutated(parts))


def write(path, raw: bytes):
    path.write_bytes(raw)
    return path


# --------------------------------------------------------------------------- (a) never crashes


@FUZZ
@given(source=files([HEADS, MODELS, GET_INPUTS, GET_INIT_INPUTS, EXTRAS]))
def test_random_problem_files_always_get_an_answer(workdir, source):
    prob = write(workdir / "problem.py", source)
    cand = write(workdir / "candidate.py", CANDIDATE.encode())
    assert_answered(*run_cli(["check", cand, "--ref", prob, "--device", "cpu"])[::2])


@FUZZ
@given(source=files([HEADS, CANDIDATE_BODIES]))
def test_random_candidate_files_always_get_an_answer(workdir, source):
    prob = write(workdir / "problem.py", problem().encode())
    cand = write(workdir / "candidate.py", source)
    assert_answered(*run_cli(["check", cand, "--ref", prob, "--device", "cpu"])[::2])


FLAG_VALUES = {
    "--ref": ["softmax", "matmul", "nonsense", "{problem}", "{missing}", "{dir}", ""],
    "--shape": ["4,4", "2,3,4", "0,1", "-1", "a,b", "", "1x2x3", "99999999999999999999"],
    "--dtype": ["float32", "float16", "float8", "", "int64"],
    "--device": ["cpu", "cuda", "cuda:7", "tpu", "", "auto", "cpu:0"],
    "--seed": ["0", "-1", "1.5", "abc", "99999999999999999999999"],
    "--timeout": ["0", "-1", "nan", "inf", "1e9", "abc", "0.001", "30"],
    "--allow": ["library-call", "worker", "bogus", "", "streams"],
    "--json": ["{dir}/r.json", "{dir}", "{missing}/r.json", ""],
}
EXTRA_FLAGS = sorted(set(FLAG_VALUES) - {"--ref"}) + ["--verbose", "--frobnicate", "--"]


@st.composite
def argv_(draw) -> list[str]:
    """A check, show or bad command with random flags and values, some of them missing."""
    command = draw(st.sampled_from(["check", "check", "check", "show", "", "frobnicate", "practice --bogus"]))
    argv = command.split()
    if command == "show":
        return argv + draw(st.lists(st.sampled_from(["{dir}/r.json", "{missing}", "{problem}", "{dir}"]),
                                    max_size=2))
    if command == "check":
        argv.append(draw(st.sampled_from(["{candidate}", "{candidate}", "{broken}", "{missing}", "{dir}"])))
        if draw(st.integers(0, 7)):  # --ref is required: usually there, usually a good one
            argv += ["--ref", draw(st.sampled_from(["{problem}", "softmax", *FLAG_VALUES["--ref"]]))]
        for flag in draw(st.lists(st.sampled_from(EXTRA_FLAGS), max_size=3)):
            argv.append(flag)
            if flag in FLAG_VALUES and draw(st.integers(0, 7)):  # sometimes the value is missing
                argv.append(draw(st.sampled_from(FLAG_VALUES[flag])))
    return argv


@settings(FUZZ, max_examples=25)
@given(argv=argv_())
def test_random_argument_lists_always_get_an_answer(workdir, argv):
    names = {"problem": write(workdir / "args_problem.py", problem().encode()),
             "candidate": write(workdir / "args_candidate.py", CANDIDATE.encode()),
             "broken": write(workdir / "args_broken.py", b"class ModelNew(:\n"),
             "missing": workdir / "no" / "such", "dir": workdir}
    assert_answered(*run_cli([a.format(**names) for a in argv])[::2])


# --------------------------------------------------------------------------- (b) no tensor, no pass

_HELPERS = '''
class AlwaysEqual:
    """Not a tensor: equal to anything, and it answers every attribute of the real result."""
    def __init__(self, t):
        self._t = t
    def __eq__(self, other):
        return True
    def __getattr__(self, name):
        return getattr(self._t, name)


class Liar(torch.Tensor):
    """A tensor subclass whose comparisons all say yes, holding zeros."""
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
'''

NO_TENSOR = {
    "none": "None",
    "int": "0",
    "float": "2.0",
    "bool": "True",
    "list": "[y]",
    "one-tuple": "(y,)",
    "pair": "(y, y)",
    "dict": "{'out': y}",
    "string": "'y'",
    "nested-list": "y.tolist()",
    "numpy": "y.numpy()",
    "always-equal": "AlwaysEqual(y)",
    "lying-subclass": "torch.zeros_like(y).as_subclass(Liar)",
    "generator": "(v for v in [y])",
    "size": "y.shape",
    "callable": "lambda: y",
}


def no_tensor_candidate(kind: str, noisy: bool) -> str:
    """The right answer computed, then something other than it returned."""
    noise = "        print(y.sum().item())\n" if noisy else ""
    return (f"import torch\nfrom torch import nn\n{_HELPERS}\n\nclass ModelNew(nn.Module):\n"
            f"    def forward(self, x):\n        y = x * 2\n{noise}        return {NO_TENSOR[kind]}\n")


def _no_tensor_examples(fn):
    for kind in NO_TENSOR:  # every kind always runs; Hypothesis adds random ones on top
        fn = example(kind=kind, noisy=False)(fn)
    return fn


@settings(FUZZ, max_examples=4)
@_no_tensor_examples
@given(kind=st.sampled_from(sorted(NO_TENSOR)), noisy=st.booleans())
def test_candidate_returning_no_tensor_is_never_passed(workdir, kind, noisy):
    prob = write(workdir / "nt_problem.py", problem().encode())
    cand = write(workdir / "nt_candidate.py", no_tensor_candidate(kind, noisy).encode())
    # the candidate computes with the reference's own op: the library policy off, the type is what counts
    rc, out, err = run_cli(["check", cand, "--ref", prob, "--device", "cpu", "--library-policy", "off"])
    assert_answered(rc, err)
    assert rc == 1, (kind, rc, out, err)
    assert "REJECT" in out


def test_the_no_tensor_harness_passes_the_honest_return(workdir):
    """The control: the same candidate returning `y` itself passes, so a reject above is about the type."""
    prob = write(workdir / "ctl_problem.py", problem().encode())
    source = no_tensor_candidate("none", noisy=False).replace("return None", "return y")
    cand = write(workdir / "ctl_candidate.py", source.encode())
    rc, out, err = run_cli(["check", cand, "--ref", prob, "--device", "cpu", "--library-policy", "off"])
    assert rc == 0, (out, err)
