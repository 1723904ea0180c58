"""The malformed-input corpus: every broken problem file, candidate file or flag a user can hand in
ends in exit code 2 and one line naming the file, the line where there is one, and what was
expected. A reference that fails or is nondeterministic on its own inputs is an `error` verdict
about the problem (exit 3), also naming the problem file.

The first cases of each kind are in test_cli.py (BAD_CANDIDATES, BAD_PROBLEMS, BAD_USAGE); these
are the rest. Only the candidate that raises at import starts a worker: every other case here
stops in the judge, before any worker.
"""

from __future__ import annotations

import ast
import json

import pytest

from kernelvet.formats import kernelbench

from .test_cli import assert_usage_error, kv, line_of  # noqa: F401 - kv is a fixture

CANDIDATE = """\
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
"""


def problem(forward: str = "def forward(self, x):", body: str = "return x * 2",
            inputs: str = "return [torch.randn(16, 16)]", init: str = "return []", head: str = "") -> str:
    """A small valid KernelBench problem, with one part swapped for a broken one."""
    return (f"import torch\nfrom torch import nn\n{head}\n\nclass Model(nn.Module):\n"
            f"    {forward}\n        {body}\n\n\n"
            f"def get_inputs():\n    {inputs}\n\n\ndef get_init_inputs():\n    {init}\n")


def place(path, content):
    """None: leave the file missing; "DIR": a directory; bytes or text: the file."""
    if content == "DIR":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    return path


def check(kv, tmp_path, problem_src=None, candidate_src=CANDIDATE, *flags):
    prob = place(tmp_path / "problem.py", problem() if problem_src is None else problem_src)
    cand = place(tmp_path / "candidate.py", candidate_src)
    return kv("check", cand, "--ref", prob, "--device", "cpu", *flags), prob, cand


def where(path, source) -> str:
    """`path:line` of the `# HERE` marker in source, or the path alone."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    return f"{path}:{line_of(source)}" if isinstance(source, str) and "# HERE" in source else str(path)


# --------------------------------------------------------------------------- candidate files

BAD_CANDIDATES = [
    pytest.param("", ["no ModelNew", "it defines: nothing"], id="empty"),
    pytest.param("\n\n# only a comment\n", ["no ModelNew", "it defines: nothing"], id="only-a-comment"),
    pytest.param("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)  # HERE\n"
                 "        return x\n", ["syntax error", "expected ':'"], id="syntax-error"),
    pytest.param("class ModelNew:\n    def forward(self, x):\n    return x  # HERE\n",
                 ["syntax error", "expected an indented block"], id="indentation-error"),
    pytest.param('class ModelNew:\n    """never closed  # HERE\n', ["syntax error", "unterminated"],
                 id="truncated-docstring"),
    pytest.param(b"class ModelNew:\n    pass\x00\n", ["null bytes"], id="null-byte"),
    pytest.param("import torch\n\nreturn torch.relu  # HERE\n", ["syntax error", "'return' outside function"],
                 id="return-outside-function"),
    pytest.param(b"import torch\n# \xff\xfe  # HERE\n", ["not UTF-8 text", "byte 15"], id="not-utf8-line"),
    pytest.param("# coding: utf-7  # HERE\nimport torch\n", ["declares encoding utf-7", "only UTF-8"],
                 id="coding-utf7-hides-code"),
    pytest.param("# coding: no-such-codec\n", ["bad encoding declaration", "no-such-codec"],
                 id="coding-unknown"),
    pytest.param("import torch\n\n\ndef helper():\n    class ModelNew:\n        pass\n\n\nclass Model:\n    pass\n",
                 ["no ModelNew", "it defines: helper, Model"], id="modelnew-only-inside-a-function"),
    pytest.param("import torch\nModelNew = 3  # HERE\n", ["ModelNew must be a class", "an int"], id="modelnew-int"),
    pytest.param("ModelNew = None  # HERE\n", ["ModelNew must be a class", "to None"], id="modelnew-none"),
    pytest.param("ModelNew = [1, 2]  # HERE\n", ["ModelNew must be a class", "a list"], id="modelnew-list"),
    pytest.param("ModelNew = 'torch.relu'  # HERE\n", ["ModelNew must be a class", "a str"], id="modelnew-str"),
    pytest.param("import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n\n\nModelNew = {}  # HERE\n",
                 ["ModelNew must be a class", "a dict"], id="modelnew-rebound-to-a-dict"),
]


@pytest.mark.parametrize("source, needles", BAD_CANDIDATES)
def test_malformed_candidate_is_exit_2_naming_the_file(kv, tmp_path, source, needles):
    run, _, cand = check(kv, tmp_path, None, source)
    line = assert_usage_error(run, *needles)
    assert line.startswith(f"kernelvet: error: {where(cand, source)}:"), line


def test_syntax_error_names_line_and_column_as_python_does(kv, tmp_path):
    source = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x) return x\n"
    with pytest.raises(SyntaxError) as exc:
        ast.parse(source)
    run, _, cand = check(kv, tmp_path, None, source)
    assert_usage_error(run, f"{cand}:{exc.value.lineno}:{exc.value.offset}: candidate has a syntax error")


ACCEPTED_CANDIDATES = [
    pytest.param("from mykernels import ModelNew\n", "ModelNew", id="imported"),
    pytest.param("import torch\nModelNew: type = torch.nn.ReLU\n", "ModelNew", id="annotated"),
    pytest.param("import torch\nModelNew = torch.nn.ReLU\n", "ModelNew", id="alias"),
    pytest.param("try:\n    from fast import ModelNew\nexcept ImportError:\n    class ModelNew:\n        pass\n",
                 "ModelNew", id="in-try"),
    pytest.param("import sys\nif sys.platform:\n    class ModelNew:\n        pass\n", "ModelNew", id="in-if"),
    pytest.param("ModelNew, helper = make()\n", "ModelNew", id="tuple-target"),
    pytest.param("def kernel(x):\n    return x\n", "kernel", id="kernel-function"),
]


@pytest.mark.parametrize("source, entry", ACCEPTED_CANDIDATES)
def test_entry_points_python_would_bind_are_found(source, entry):
    """The AST look-up must not refuse a candidate that Python would import fine."""
    assert kernelbench.candidate_entry("candidate.py", source) == entry


def test_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "candidate.py"
    path.write_bytes(b"\xef\xbb\xbf" + CANDIDATE.encode())
    source = kernelbench.read_source(str(path), "candidate")
    assert source == CANDIDATE
    assert kernelbench.candidate_entry(str(path), source) == "ModelNew"


# --------------------------------------------------------------------------- problem files

_NOT_A_MODULE = "import torch\n\n\ndef Model():\n    return 3\n\n\ndef get_inputs():\n    return [torch.randn(4)]\n" \
                "\n\ndef get_init_inputs():\n    return []\n"

BAD_PROBLEMS = [
    pytest.param("DIR", ["a problem directory must be a GPU MODE task, with a reference.py in it"], id="directory"),
    pytest.param(b"import torch\nx = '\xe9'\n", [":2:", "not UTF-8 text"], id="not-utf8"),
    pytest.param("", ["neither a KernelBench problem (Model, get_inputs, get_init_inputs) nor a GPU MODE task",
                      "it defines: nothing"], id="empty"),
    pytest.param("import torch\n\nclass Model(torch.nn.Module:  # HERE\n    pass\n", ["syntax error", ":3:"],
                 id="syntax-error"),
    pytest.param("import torch\n\nclass Model(torch.nn.Module):\n    pass\n\nbreak  # HERE\n",
                 ["syntax error", "'break' outside loop"], id="break-outside-loop"),
    pytest.param("# coding: latin-1  # HERE\nimport torch\n", ["declares encoding iso-8859-1", "only UTF-8"],
                 id="coding-latin1"),
    pytest.param("import torch\n\n\ndef helper():\n    return 1 / 0  # HERE\n\n\nhelper()\n",
                 ["importing the problem failed", "ZeroDivisionError"], id="import-raises-in-a-helper"),
    pytest.param(problem().replace("class Model(nn.Module):", "Model = 3\nclass Other(nn.Module):"),
                 ["Model must be a class", "got an int"], id="model-int"),
    pytest.param(problem() + "get_inputs = [1]\n", ["get_inputs must be a function", "got a list"],
                 id="get-inputs-list"),
    pytest.param(problem() + "get_init_inputs = None\n", ["get_init_inputs must be a function", "got None"],
                 id="get-init-inputs-none"),
    pytest.param(problem().replace("class Model", "class Reference"), ["missing Model", "it defines: Reference"],
                 id="model-misnamed"),
    pytest.param(problem(inputs="return []"), ["get_inputs() must return a non-empty list", "an empty list"],
                 id="get-inputs-empty"),
    pytest.param(problem(inputs="return None"), ["get_inputs() must return a non-empty list", "got None"],
                 id="get-inputs-none"),
    pytest.param(problem(inputs="return {'x': torch.randn(4)}"),
                 ["get_inputs() must return a non-empty list", "got a dict"], id="get-inputs-dict"),
    pytest.param(problem(inputs="return [None]"), ["get_inputs()[0] is None", "tensors or numbers"],
                 id="get-inputs-holds-none"),
    pytest.param(problem(inputs="return [torch.randn(4), [1, 2]]"), ["get_inputs()[1] is a list"],
                 id="get-inputs-holds-a-list"),
    pytest.param(problem(inputs="return [torch.randn(4, dtype=torch.complex64)]"),
                 ["get_inputs()[0] is a complex64 tensor", "supported dtypes", "float32"], id="get-inputs-complex"),
    pytest.param(problem(inputs="raise KeyError('shape')  # HERE"), ["get_inputs() failed", "KeyError"],
                 id="get-inputs-raises"),
    pytest.param(problem(init="return 3"), ["get_init_inputs() must return a list", "got an int"],
                 id="get-init-inputs-int"),
    pytest.param(problem(init="return [object()]"), ["get_init_inputs()[0] is an object", "numbers, strings"],
                 id="get-init-inputs-object"),
    pytest.param(problem(init="return [{'k': torch.nn.ReLU()}]"), ["get_init_inputs()[0] is a dict"],
                 id="get-init-inputs-dict-of-modules"),
    pytest.param(problem(init="return [torch.zeros(2, dtype=torch.complex64)]"),
                 ["get_init_inputs()[0] is a complex64 tensor"], id="get-init-inputs-complex"),
    pytest.param(problem(init="return [16]"), ["Model(*get_init_inputs()) failed", "TypeError"],
                 id="init-inputs-do-not-fit-model"),
    pytest.param(_NOT_A_MODULE, ["Model(*get_init_inputs()) must build a torch.nn.Module", "got an int"],
                 id="model-builds-no-module"),
    pytest.param(problem(forward="def forward(self, x, y):  # HERE"),
                 ["Model.forward(x, y) does not accept the 1 input(s) that get_inputs() returns", "'y'"],
                 id="forward-wants-more-inputs"),
    pytest.param(problem(forward="def forward(self):  # HERE", body="return torch.ones(2)"),
                 ["Model.forward() does not accept the 1 input(s)", "too many"], id="forward-wants-fewer-inputs"),
    pytest.param(problem(forward="def forwards(self, x):"), ["Model defines no forward method"],
                 id="forward-misspelt"),
    pytest.param(problem(body="return x, {'y': x}"), ["Model.forward returned a tuple",
                                                      "expected a tensor, a number, or a tuple or list of those"],
                 id="reference-returns-tuple-of-a-dict"),
    pytest.param(problem(body="return []"), ["Model.forward returned a list", "expected a tensor"],
                 id="reference-returns-empty-list"),
    pytest.param(problem(body="return None"), ["Model.forward returned None", "expected a tensor"],
                 id="reference-returns-none"),
    pytest.param(problem(body="return 'x'"), ["Model.forward returned a str"],
                 id="reference-returns-text"),
    pytest.param(problem(body="return torch.complex(x, x)"), ["returned a complex128 tensor", "supported dtypes"],
                 id="reference-returns-complex"),
    pytest.param(problem(head="OUTPUT_ARG = 'out'"), ["OUTPUT_ARG must be the index", "'out'"],
                 id="output-arg-not-an-index"),
    pytest.param(problem(head="FLOPS = 'many'"), ["FLOPS must be a positive number", "'many'"],
                 id="flops-not-a-number"),       # found by tests/test_fuzz.py: it was a traceback
    pytest.param(problem(head="BYTES = -1"), ["BYTES must be a positive number", "-1"], id="bytes-negative"),
    pytest.param(problem(head="FLOPS = float('nan')"), ["FLOPS must be a positive number", "nan"],
                 id="flops-nan"),
]


@pytest.mark.parametrize("source, needles", BAD_PROBLEMS)
def test_malformed_problem_is_exit_2_naming_the_problem(kv, tmp_path, source, needles):
    run, prob, _ = check(kv, tmp_path, source)
    line = assert_usage_error(run, *needles)
    assert line.startswith(f"kernelvet: error: {where(prob, source)}:"), line


# --------------------------------------------------------------------------- flags

BAD_FLAGS = [
    pytest.param(["--json", "{tmp}/no/such/dir/r.json"], ["--json", "cannot write", "does not exist"],
                 id="json-into-missing-directory"),
    pytest.param(["--json", "{tmp}"], ["--json", "cannot write", "is a directory"], id="json-is-a-directory"),
    pytest.param(["--timeout", "-1"], ["--timeout", "positive"], id="timeout-negative"),
    pytest.param(["--timeout", "1e9"], ["--timeout", "86400"], id="timeout-huge"),
    pytest.param(["--device", "cuda:x"], ["--device 'cuda:x'", "cuda:N"], id="device-cuda-bad-index"),
    pytest.param(["--device", "meta"], ["--device 'meta'", "cpu and cuda"], id="device-meta"),
    pytest.param(["--allow", ""], ["--allow", "unknown check id ''", "valid ids"], id="allow-empty"),
    pytest.param(["--seed", "1.5"], ["--seed", "invalid int"], id="seed-float"),
    pytest.param(["--shape", "4,4"], ["--shape", "built-in problems"], id="shape-with-problem-file"),
]


@pytest.mark.parametrize("flags, needles", BAD_FLAGS)
def test_bad_flag_is_exit_2_before_any_vet(kv, tmp_path, flags, needles):
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    run, _, _ = check(kv, tmp_path, None, CANDIDATE, *flags)
    assert_usage_error(run, *needles)


# --------------------------------------------------------------------------- the reference fails: an error verdict

FAILING_REFERENCES = [
    pytest.param(problem(body="raise RuntimeError('reference bug')  # HERE"), ["RuntimeError: reference bug"],
                 id="forward-raises"),
    pytest.param(problem(body="return helper(x)") + "\n\ndef helper(x):\n    return x @ torch.ones(3, 3)  # HERE\n",
                 ["RuntimeError", "shapes cannot be multiplied"], id="forward-fails-in-a-helper"),
    pytest.param(problem(body="return x * torch.rand_like(x)"), ["nondeterministic", "draws random numbers"],
                 id="forward-draws-random-numbers"),
    pytest.param(problem(body="return torch.nn.functional.dropout(x, 0.5, training=True)"),
                 ["nondeterministic", "dropout"], id="dropout-in-training-mode"),
]


def _harness_line(run) -> str:
    assert "Traceback" not in run.err, run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelvet: harness error: "), run.err
    assert run.rc == 3, run
    return lines[0]


@pytest.mark.parametrize("source, needles", FAILING_REFERENCES)
def test_reference_failing_on_its_own_inputs_is_an_error_verdict_naming_the_problem(kv, tmp_path, source, needles):
    report = tmp_path / "report.json"
    run, prob, _ = check(kv, tmp_path, source, CANDIDATE, "--json", report)
    line = _harness_line(run)
    assert f"{where(prob, source)}:" in line, line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    data = json.loads(report.read_text())
    assert data["verdict"] == "error" and str(prob) in data["error"] and data["findings"] == []


def test_reference_failure_message_starts_with_the_problem_file(kv, tmp_path):
    source = FAILING_REFERENCES[0].values[0]
    run, prob, _ = check(kv, tmp_path, source)
    assert _harness_line(run).startswith(f"kernelvet: harness error: {where(prob, source)}: ")


# --------------------------------------------------------------------------- the candidate's own failure: a reject


def test_candidate_raising_at_import_is_a_reject_with_the_reason(kv, tmp_path):
    """Not exit 2: the file is well-formed; its failure at run time is the candidate's, in the worker."""
    source = "import torch\n\nraise ImportError('no fastkernels')\n" + CANDIDATE
    report = tmp_path / "report.json"
    run, _, _ = check(kv, tmp_path, None, source, "--json", report)
    assert run.rc == 1, run
    assert "REJECT" in run.out and "worker" in run.out
    data = json.loads(report.read_text())
    assert data["verdict"] == "reject"
    failed = [f for f in data["findings"] if f["status"] == "fail"]
    assert [f["check"] for f in failed] == ["worker"], failed
    assert "ImportError: no fastkernels" in failed[0]["summary"]


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine without a GPU")
@pytest.mark.parametrize("where", ["import", "call"])
def test_a_candidate_that_needs_a_gpu_on_a_machine_without_one_is_exit_2_saying_so(kv, tmp_path, where):
    """Not a reject: nothing is wrong with a CUDA candidate but the machine it was vetted on."""
    made = "_on_gpu = torch.zeros(1, device='cuda')\n"
    source = ("import torch\n" + made + CANDIDATE) if where == "import" else \
        CANDIDATE.replace("return x * 2", "return x * 2 + torch.zeros(1, device='cuda').cpu()")
    run, _, _ = check(kv, tmp_path, None, source)
    assert_usage_error(run, "needs a CUDA device", "--device cuda")


def test_needs_a_gpu_is_the_hosts_word_only():
    import torch
    from kernelvet.errors import UsageError
    from kernelvet.judge.placement import needs_a_gpu
    lacking = {"phase": "importing the candidate", "error": "OSError: CUDA_HOME environment variable is not set."}
    with pytest.raises(UsageError, match="needs a CUDA device"):
        needs_a_gpu(torch.device("cpu"), lacking, "c.py")
    needs_a_gpu(torch.device("cuda", 0), lacking, "c.py")   # on a GPU it is the candidate's failure
    needs_a_gpu(torch.device("cpu"), {"phase": "call", "error": "ImportError: no fastkernels"}, "c.py")
    needs_a_gpu(torch.device("cpu"), None, "c.py")
