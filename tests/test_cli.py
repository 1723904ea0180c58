"""The command line: exit codes, the JSON report, and one plain line for every user mistake.

Exit codes: 0 pass, 1 reject, 2 bad usage or bad problem/candidate file, 3 harness error.
Most tests call `kernelvet.cli.main` in-process; one goes through the installed entry point.
Full vets are slow (seconds each on a small CPU), so they live in module-scoped fixtures
that several tests read: five vets in all. Every bad-input test stops before any worker starts.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys

import pytest
import torch

from kernelvet import cli, practice
from kernelvet.ids import ALL_CHECKS
from kernelvet.report import REPORT_VERSION

HONEST_SOFTMAX = practice.by_name("softmax").path
HONEST_MATMUL = practice.by_name("broadcast_matmul").path
TORCH_MM = practice.by_name("torch_mm").path
RELU_PROBLEM = os.path.join(practice.PROBLEMS, "relu.py")
SEED = 424242

Run = collections.namedtuple("Run", "rc out err")


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def kv(capsys):
    """`kv("check", ...)` runs the CLI in-process and returns its exit code, stdout and stderr."""
    def _kv(*argv) -> Run:
        rc = cli.main([str(a) for a in argv])
        captured = capsys.readouterr()
        return Run(rc, captured.out, captured.err)
    return _kv


def _kv_captured(*argv) -> Run:
    """The same, for module-scoped fixtures (where capsys is not available)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return Run(rc, out.getvalue(), err.getvalue())


def assert_usage_error(run: Run, *needles: str) -> str:
    """Exit 2, exactly one stderr line `kernelvet: error: ...` holding every needle, no traceback."""
    assert "Traceback" not in run.err, run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("kernelvet: error:"), run.err
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert run.rc == 2, run
    return lines[0]


def line_of(source: str, marker: str = "# HERE") -> int:
    """1-based line number of the marked line in `source`."""
    return next(i for i, text in enumerate(source.splitlines(), 1) if marker in text)


def read_report(path) -> tuple[str, dict]:
    with open(path) as fh:
        text = fh.read()
    return text, json.loads(text)


def finding(data: dict, check: str) -> dict:
    return next(f for f in data["findings"] if f["check"] == check)


# --------------------------------------------------------------------------- full vets (module-scoped)


@pytest.fixture(scope="module")
def passed(tmp_path_factory):
    """Honest softmax with a fixed seed: the reference pass run."""
    path = tmp_path_factory.mktemp("pass") / "report.json"
    run = _kv_captured("check", HONEST_SOFTMAX, "--ref", "softmax", "--device", "cpu",
                       "--seed", SEED, "--json", path)
    return run, path


@pytest.fixture(scope="module")
def rejected(tmp_path_factory):
    """torch.mm standing in for a matmul kernel: rejected by library-call."""
    path = tmp_path_factory.mktemp("reject") / "report.json"
    run = _kv_captured("check", TORCH_MM, "--ref", "matmul", "--device", "cpu", "--json", path)
    return run, path


@pytest.fixture(scope="module")
def waived(tmp_path_factory):
    """The same torch.mm candidate with library-call waived."""
    path = tmp_path_factory.mktemp("waived") / "report.json"
    run = _kv_captured("check", TORCH_MM, "--ref", "matmul", "--device", "cpu",
                       "--allow", "library-call", "--json", path)
    return run, path


@pytest.fixture(scope="module")
def via_entry_point(tmp_path_factory):
    """An honest matmul through the installed `kernelvet` script, in a real subprocess, no --seed."""
    script = os.path.join(os.path.dirname(sys.executable), "kernelvet")
    assert os.path.isfile(script), f"the console script is not installed at {script}"
    path = tmp_path_factory.mktemp("subprocess") / "report.json"
    proc = subprocess.run([script, "check", HONEST_MATMUL, "--ref", "matmul", "--device", "cpu",
                           "--json", str(path)], capture_output=True, text=True, timeout=300)
    return Run(proc.returncode, proc.stdout, proc.stderr), path


# --------------------------------------------------------------------------- pass, JSON report


def test_honest_candidate_passes_with_exit_0(passed):
    run, _ = passed
    assert run.rc == 0, run
    assert "PASS" in run.out
    assert "Traceback" not in run.err


def test_json_report_is_written_sorted_and_versioned(passed):
    _, path = passed
    text, data = read_report(path)
    assert json.dumps(data, sort_keys=True, indent=2) == text.strip()
    assert data["version"] == REPORT_VERSION
    for key in ("version", "verdict", "findings", "timing", "problem", "candidate_sha256", "device",
                "seed", "versions"):
        assert key in data, key
    assert data["verdict"] == "pass"


def test_json_findings_cover_every_check_with_the_four_fields(passed):
    _, data = read_report(passed[1])
    assert [f["check"] for f in data["findings"]] == [str(c) for c in ALL_CHECKS]
    for f in data["findings"]:
        assert set(f) >= {"check", "status", "summary", "evidence"}, f
        assert f["status"] in {"pass", "skip"}, f
        assert isinstance(f["summary"], str) and f["summary"]
        assert isinstance(f["evidence"], dict)


def test_json_timing_has_statistics_and_the_reference(passed):
    _, data = read_report(passed[1])
    t = data["timing"]
    for key in ("median_ms", "iqr_ms", "reps", "method", "tflops", "gbps", "pct_of_peak",
                "reference_median_ms", "speedup"):
        assert key in t, key
    assert t["median_ms"] > 0 and t["reference_median_ms"] > 0 and t["iqr_ms"] >= 0
    assert t["reps"] >= 1 and t["reps"] == len(t["raw_ms"])
    # ranked by the slower of its median and the judge's least time per call (a busy host's)
    assert t["ranked_ms"] == pytest.approx(max(t["median_ms"], t.get("judge_least_ms") or 0.0))
    assert t["speedup"] == pytest.approx(t["reference_median_ms"] / t["ranked_ms"])
    assert t["tflops"] > 0 and t["gbps"] > 0


def test_json_report_identifies_candidate_problem_device_and_versions(passed):
    _, data = read_report(passed[1])
    with open(HONEST_SOFTMAX, "rb") as fh:
        assert data["candidate_sha256"] == hashlib.sha256(fh.read()).hexdigest()
    assert data["problem"]["source"] == "builtin" and "softmax" in data["problem"]["name"]
    assert data["device"]["type"] == "cpu"
    assert data["versions"]["torch"] == torch.__version__ and "kernelvet" in data["versions"]


def test_seed_flag_is_echoed_in_the_report(passed):
    _, data = read_report(passed[1])
    assert data["seed"] == SEED
    assert str(SEED) in passed[0].out


# --------------------------------------------------------------------------- reject, waive


def test_cheat_is_rejected_with_exit_1_naming_the_check(rejected):
    run, path = rejected
    assert run.rc == 1, run
    assert "REJECT" in run.out and "library-call" in run.out
    _, data = read_report(path)
    assert data["verdict"] == "reject"
    assert finding(data, "library-call")["status"] == "fail"
    assert data["library_policy"]["level"] == "no-reference-ops"   # the CPU's default, recorded


def test_allow_waives_a_check_and_records_it(waived):
    run, path = waived
    assert run.rc == 0, run
    _, data = read_report(path)
    assert data["verdict"] == "pass"
    assert finding(data, "library-call")["status"] == "waived"
    assert data["waived"] == ["library-call"]
    assert data["library_policy"]["level"] == "off"


# --------------------------------------------------------------------------- the installed entry point


def test_entry_point_runs_end_to_end_in_a_subprocess(via_entry_point):
    run, path = via_entry_point
    assert run.rc == 0, run
    assert "PASS" in run.out
    assert "Traceback" not in run.err
    _, data = read_report(path)
    assert data["verdict"] == "pass"
    with open(HONEST_MATMUL, "rb") as fh:
        assert data["candidate_sha256"] == hashlib.sha256(fh.read()).hexdigest()


def test_run_without_seed_reports_an_integer_seed(via_entry_point):
    _, data = read_report(via_entry_point[1])
    assert isinstance(data["seed"], int) and not isinstance(data["seed"], bool)
    assert data["seed"] >= 0


# --------------------------------------------------------------------------- KernelBench files, unchanged

KERNELBENCH_PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2 + 1


batch_size = 64
dim = 64


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
'''

KERNELBENCH_CANDIDATE = '''\
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        torch.mul(x, 2.0, out=out)
        out.add_(1.0)
        return out
'''


def test_kernelbench_problem_file_and_candidate_pass_unchanged(kv, tmp_path):
    problem = tmp_path / "1_scale_shift.py"
    problem.write_text(KERNELBENCH_PROBLEM)
    candidate = tmp_path / "candidate.py"
    candidate.write_text(KERNELBENCH_CANDIDATE)
    report = tmp_path / "report.json"
    # the candidate dispatches the reference's own mul and add: the file format is what this is about
    run = kv("check", candidate, "--ref", problem, "--device", "cpu", "--json", report, "--library-policy", "off")
    assert run.rc == 0, run
    _, data = read_report(report)
    assert data["verdict"] == "pass"
    assert data["problem"]["source"] == os.path.abspath(problem)


def test_a_problem_importing_from_the_users_pythonpath_vets_in_its_worker(tmp_path):
    """A package the problem and the candidate import from a folder the user's PYTHONPATH names
    (not installed) is found in the worker too, under the default confinement."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "kv_scale_shift.py").write_text("def scale_shift(x):\n    return x * 2 + 1\n")
    problem = tmp_path / "1_scale_shift.py"
    problem.write_text("import kv_scale_shift\n" + KERNELBENCH_PROBLEM.replace(
        "return x * 2 + 1", "return kv_scale_shift.scale_shift(x)"))
    candidate = tmp_path / "candidate.py"
    candidate.write_text("import kv_scale_shift\n" + KERNELBENCH_CANDIDATE)
    src = os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(site)])}
    proc = subprocess.run([sys.executable, "-m", "kernelvet", "check", str(candidate), "--ref", str(problem),
                           "--device", "cpu", "--library-policy", "off"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- show


@pytest.mark.parametrize("fixture, code, word", [("passed", 0, "PASS"), ("rejected", 1, "REJECT")])
def test_show_renders_a_saved_report_and_returns_its_verdict(kv, request, fixture, code, word):
    _, path = request.getfixturevalue(fixture)
    _, data = read_report(path)
    run = kv("show", path)
    assert run.rc == code, run
    assert word in run.out and str(data["seed"]) in run.out
    assert run.err == ""


BAD_REPORTS = [
    pytest.param(None, ["cannot read"], id="missing"),
    pytest.param("DIR", ["cannot read"], id="directory"),
    pytest.param(b"PASS all good\n", [":1:", "not a JSON report"], id="not-json"),
    pytest.param(b"\xff\xfe{\x00}", ["not a JSON report", "UTF-8"], id="not-utf8"),
    pytest.param(b"[1, 2]", ["not a kernelvet report"], id="json-list"),
    pytest.param(b"{}", ["not a kernelvet report"], id="json-without-verdict"),
]


@pytest.mark.parametrize("content, needles", BAD_REPORTS)
def test_show_on_a_bad_report_file_is_a_usage_error(kv, tmp_path, content, needles):
    path = tmp_path / "report.json"
    if content == "DIR":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    assert_usage_error(kv("show", path), str(path), *needles)


# --------------------------------------------------------------------------- bad candidate files

BAD_CANDIDATES = [
    pytest.param(None, ["candidate file not found"], id="missing"),
    pytest.param("DIR", ["candidate is not a file"], id="directory"),
    pytest.param(b"import torch\n\nclass ModelNew(:\n    pass\n", [":3:", "syntax error"], id="syntax-error"),
    pytest.param(b"import torch\n\nclass Model:\n    pass\n\ndef helper():\n    pass\n",
                 ["no ModelNew", "it defines: Model, helper"], id="no-modelnew"),
    pytest.param(b"# caf\xe9 au lait\nclass ModelNew:\n    pass\n", ["not UTF-8"], id="not-utf8"),
]


@pytest.mark.parametrize("content, needles", BAD_CANDIDATES)
def test_bad_candidate_file_is_a_usage_error(kv, tmp_path, content, needles):
    path = tmp_path / "candidate.py"
    if content == "DIR":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    line = assert_usage_error(kv("check", path, "--ref", "softmax", "--device", "cpu"), *needles)
    assert line.startswith(f"kernelvet: error: {path}")


# --------------------------------------------------------------------------- bad problem files

MODEL = """\
import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2
"""
INIT = """

def get_init_inputs():
    return []
"""
INPUTS = """

def get_inputs():
    return [torch.randn(16, 16)]
"""

BAD_PROBLEMS = [
    pytest.param(None, ["problem file not found"], id="missing"),
    pytest.param("import torch\n\ndef get_inputs(:  # HERE\n    pass\n", ["syntax error"], id="syntax-error"),
    pytest.param("import torch\n\nraise RuntimeError('needs a GPU')  # HERE\n",
                 ["importing the problem failed", "RuntimeError: needs a GPU"], id="import-raises"),
    pytest.param("import sys\nsys.exit(3)  # HERE\n", ["importing the problem failed", "SystemExit"],
                 id="import-exits"),
    pytest.param(MODEL + INIT, ["missing get_inputs", "it defines: Model, get_init_inputs"],
                 id="no-get-inputs"),
    pytest.param(MODEL + INIT + "\ndef get_inputs():\n    return torch.randn(16, 16)\n",
                 ["get_inputs() must return a non-empty list", "Tensor"], id="get-inputs-not-a-list"),
    pytest.param(MODEL + INIT + "\ndef get_inputs():\n    return [torch.randn(16, 16), 'x']\n",
                 ["get_inputs()[1] is a str", "tensors or numbers"], id="get-inputs-holds-a-string"),
    pytest.param(MODEL + INPUTS + "\ndef get_init_inputs():\n    raise ValueError('no config')  # HERE\n",
                 ["get_init_inputs() failed", "ValueError: no config"], id="get-init-inputs-raises"),
    pytest.param("import torch\nfrom torch import nn\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
                 "        raise TypeError('needs 3 args')  # HERE\n" + INIT + INPUTS,
                 ["Model(*get_init_inputs()) failed", "TypeError: needs 3 args"], id="model-init-raises"),
    pytest.param(MODEL + INIT + "\nX = torch.randn(16, 16)\n\ndef get_inputs():\n    return [X.clone()]\n",
                 ["get_inputs() returned the same values under two different seeds"], id="inputs-ignore-seed"),
]


@pytest.mark.parametrize("source, needles", BAD_PROBLEMS)
def test_bad_problem_file_is_a_usage_error(kv, tmp_path, source, needles):
    path = tmp_path / "problem.py"
    if source is not None:
        path.write_text(source)
    line = assert_usage_error(kv("check", HONEST_SOFTMAX, "--ref", path, "--device", "cpu"), *needles)
    where = f"{path}:{line_of(source)}:" if source and "# HERE" in source else str(path)
    assert line.startswith(f"kernelvet: error: {where}"), line


def test_problem_whose_forward_raises_is_one_line_not_a_traceback(kv, tmp_path):
    """The reference failing on its own inputs: reported in one line (exit 2 or 3), never a traceback."""
    path = tmp_path / "problem.py"
    path.write_text(MODEL.replace("return x * 2", "raise RuntimeError('forward is broken')") + INIT + INPUTS)
    run = kv("check", HONEST_SOFTMAX, "--ref", path, "--device", "cpu")
    assert run.rc in (2, 3), run
    assert "Traceback" not in run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelvet: ") and "forward is broken" in lines[0], run.err


# --------------------------------------------------------------------------- bad flags

NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
VALID_IDS = [str(c) for c in ALL_CHECKS]

BAD_USAGE = [
    pytest.param([], ["required", "command"], id="no-subcommand"),
    pytest.param(["frobnicate"], ["frobnicate", "check"], id="unknown-subcommand"),
    pytest.param(["check", HONEST_SOFTMAX], ["--ref"], id="no-ref"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--frobnicate"], ["--frobnicate"],
                 id="unknown-flag"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "nonsense"], ["nonsense", "matmul, softmax"],
                 id="unknown-builtin"),
    pytest.param(["check", HONEST_MATMUL, "--ref", "matmul", "--shape", "1,2"], ["--shape", "M,N,K"],
                 id="matmul-shape-two-dims"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--shape", "a,b"], ["--shape", "integers", "a,b"],
                 id="shape-not-integers"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--shape", "0,8"], ["--shape", "positive"],
                 id="shape-zero"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--dtype", "float8"],
                 ["float8", "float32", "bfloat16"], id="dtype-unknown"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", RELU_PROBLEM, "--shape", "4,4"],
                 ["--shape", "built-in problems"], id="shape-with-problem-file"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", RELU_PROBLEM, "--dtype", "float16"],
                 ["--dtype", "built-in problems"], id="dtype-with-problem-file"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--device", "cuda"],
                 ["--device cuda", "no CUDA device", "--device cpu"], id="device-cuda-without-gpu", marks=NO_CUDA),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--device", "tpu"], ["tpu", "cpu", "cuda"],
                 id="device-tpu"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--timeout", "0"], ["--timeout", "positive"],
                 id="timeout-zero"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--timeout", "nan"], ["--timeout"],
                 id="timeout-nan"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--timeout", "inf"], ["--timeout"],
                 id="timeout-inf"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--seed", "abc"], ["--seed", "abc"],
                 id="seed-not-integer"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--allow", "bogus"],
                 ["--allow", "bogus", *VALID_IDS], id="allow-unknown-id"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--allow", "worker"],
                 ["worker", "cannot be waived"], id="allow-worker"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--reused-output", "sometimes"],
                 ["--reused-output", "allow", "reject"], id="reused-output-unknown"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--library-policy", "mine"],
                 ["--library-policy", "own-kernels", "no-reference-ops"], id="library-policy-unknown"),
    pytest.param(["check", HONEST_SOFTMAX, "--ref", "softmax", "--allow-op", "conv 2d"],
                 ["--allow-op", "conv 2d"], id="allow-op-not-a-name"),
    pytest.param(["show"], ["report"], id="show-without-file"),
]


@pytest.mark.parametrize("argv, needles", BAD_USAGE)
def test_bad_usage_is_a_one_line_error_with_exit_2(kv, argv, needles):
    assert_usage_error(kv(*argv), *needles)


def test_cuda_device_message_is_clear_on_a_cpu_machine_via_the_module(tmp_path):
    """`python -m kernelvet.cli` in a subprocess: a user mistake exits 2 with one line, no traceback."""
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    proc = subprocess.run([sys.executable, "-m", "kernelvet.cli", "check", HONEST_SOFTMAX, "--ref", "softmax",
                           "--device", "cuda"], capture_output=True, text=True, timeout=120)
    assert_usage_error(Run(proc.returncode, proc.stdout, proc.stderr), "no CUDA device")


def test_a_problem_that_fails_on_its_own_inputs_is_an_error_verdict_in_the_json(tmp_path, capsys):
    from kernelvet import practice
    prob = tmp_path / "broken.py"
    prob.write_text("import torch\nfrom torch import nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                    "        raise RuntimeError('reference bug')\n\ndef get_inputs():\n    return [torch.randn(8, 8)]\n\n"
                    "def get_init_inputs():\n    return []\n")
    out = tmp_path / "r.json"
    code = cli.main(["check", practice.by_name("relu").path, "--ref", str(prob), "--device", "cpu",
                     "--json", str(out)])
    assert code == 3
    data = json.loads(out.read_text())
    assert data["verdict"] == "error" and "reference bug" in data["error"]


def test_the_command_leaves_no_launcher_directory_behind(tmp_path):
    """`python -m kernelvet` ends without the interpreter's teardown (cli.entry), but after the
    exit handlers: the launcher is stopped and its directory removed, and stdout is all there."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "KERNELVET_SOCKET": str(tmp_path / "none" / "s.sock")}
    proc = subprocess.run([sys.executable, "-m", "kernelvet", "check", HONEST_SOFTMAX, "--ref", "softmax",
                           "--device", "cpu", "--sandbox", "off", "--json", str(tmp_path / "r.json")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "PASS" in proc.stdout and proc.stdout.rstrip().splitlines()[-1].startswith("seed ")
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "pass"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("kernelvet-")]


def test_reused_output_reject_makes_a_static_output_an_aliasing_finding(tmp_path):
    """`--reused-output reject`: the policy reaches the check, whose evidence records it."""
    from kernelvet.practice import by_name
    path = tmp_path / "report.json"
    run = _kv_captured("check", by_name("reused_output").path, "--ref", "matmul", "--device", "cpu",
                       "--reused-output", "reject", "--json", path)
    assert run.rc == 1, run.out + run.err
    data = json.loads(path.read_text())
    aliasing = next(f for f in data["findings"] if f["check"] == "aliasing")
    assert aliasing["status"] == "fail" and aliasing["evidence"]["reused_output"] == "reject"


def test_the_judge_asks_for_huge_pages_and_its_workers_do_not(monkeypatch):
    from kernelvet import spawn
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    cli.judge_host_memory()
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
    assert "THP_MEM_ALLOC_ENABLE" not in spawn.worker_env()
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")   # the user's choice stands
    cli.judge_host_memory()
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "0"
