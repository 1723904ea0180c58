"""GPU MODE tasks (reference.py, task.yml, a submission's custom_kernel) vetted as problems: the
two small tasks of tests/gpumode_tasks/, each with its honest submission and a cheat that the
right check rejects; the tolerance read from the task's checker; how the format is recognised.
The GPU test at the end runs tasks of gpu-mode/reference-kernels, where a copy of that repository
lies in the git-ignored `.gpumode/` folder of the checkout."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from kernelvet import cli, vet
from kernelvet.errors import UsageError
from kernelvet.formats import gpumode, gpumode_data, task_yml
from kernelvet.ids import CheckId
from kernelvet.judge import Settings
from kernelvet.problem import load_problem
from kernelvet.report import Status, Verdict

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.join(HERE, "gpumode_tasks")
VECTORADD = os.path.join(TASKS, "vectoradd")
SOFTMAX = os.path.join(TASKS, "rowsoftmax")
REFERENCE_KERNELS = os.path.join(os.path.dirname(HERE), ".gpumode", "problems")
QUICK = Settings(budget_ms=20.0, warmup_ms=5.0, loop_ms=10.0)
# Honest candidates here take microseconds a call: on a busy host the clock checks (timers,
# caching's seen/unseen timing) can see noise; the honest runs assert on the data checks.
CLOCKS = (CheckId.TIMERS, CheckId.CACHING)

RETURNS_INPUT = '''
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return a * 1
'''

# Pattern 2: return an empty output at once, fill it on a thread (a bench that stops its clock at
# return and checks later sees the sum).
THREADED_ADD = '''
import threading
import time

import torch


def _fill(out, a, b):
    time.sleep(0.002)
    torch.stack((a, b)).sum(dim=0, out=out)


def custom_kernel(data):
    a, b = data
    out = torch.empty_like(a)
    threading.Thread(target=_fill, args=(out, a, b), daemon=True).start()
    return out
'''

POINTER_CACHE = '''
import torch

_cache = {}


def custom_kernel(data):
    x, config = data
    key = (x.data_ptr(), tuple(x.shape))
    hit = _cache.get(key)
    if hit is None:
        z = x * config["scale"]
        e = torch.exp(z - z.amax(dim=-1, keepdim=True))
        hit = _cache[key] = e / e.sum(dim=-1, keepdim=True)
    return hit * 1
'''

HALF_SOFTMAX = '''
import torch


def custom_kernel(data):
    x, config = data
    z = (x * config["scale"]).half()
    e = torch.exp(z - z.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).float()
'''


def failed(report) -> set:
    return {f.check for f in report.failed}


def summaries(report) -> list[str]:
    return [f"{f.check}: {f.summary}" for f in report.failed]


# --------------------------------------------------------------------------- the two tasks

def test_vectoradd_honest_submission_passes():
    report = vet(os.path.join(VECTORADD, "submission.py"), VECTORADD, device="cpu", allow=CLOCKS, settings=QUICK)
    assert report.verdict is Verdict.PASS, summaries(report)
    assert report.problem["format"] == "gpumode" and report.problem["case"] == {"rows": 96, "cols": 256, "seed": 211}
    assert report.problem["name"] == "vectoradd:benchmark.0"


def test_vectoradd_filled_on_a_thread_after_return_is_rejected(write):
    """Pattern 2's two tells, whichever the judge sees first (it stops at the first reject): the
    output still holds the judge's poison when the call returns, or a thread works on after it."""
    report = vet(write("threaded.py", THREADED_ADD), VECTORADD, device="cpu", settings=QUICK)
    assert report.verdict is Verdict.REJECT
    assert failed(report) & {CheckId.THREADS, CheckId.UNWRITTEN_OUTPUT}, summaries(report)


def test_vectoradd_returning_an_input_is_rejected_as_wrong(write):
    report = vet(write("returns_input.py", RETURNS_INPUT), VECTORADD, device="cpu", settings=QUICK)
    assert report.verdict is Verdict.REJECT
    assert CheckId.PRECISION in failed(report), summaries(report)


def test_rowsoftmax_honest_submission_passes_on_a_case_named_on_the_command_line():
    report = vet(os.path.join(SOFTMAX, "submission.py"), SOFTMAX + ":test.0", device="cpu", allow=CLOCKS,
                 settings=QUICK)
    assert report.verdict is Verdict.PASS, summaries(report)
    assert report.problem["case"] == {"rows": 16, "cols": 300, "scale": 0.5, "seed": 7}


def test_rowsoftmax_pointer_keyed_cache_is_rejected_by_caching(write):
    report = vet(write("pointer_cache.py", POINTER_CACHE), SOFTMAX, device="cpu", settings=QUICK)
    assert report.verdict is Verdict.REJECT
    assert CheckId.CACHING in failed(report), summaries(report)
    precision = report.finding(CheckId.PRECISION)
    assert precision.status is Status.PASS           # on fresh storages it is right
    # the task's own checker, run by the judge beside precision, passes it too: it decides nothing
    assert precision.evidence["task_check"] == {"ran": True, "passed": True, "message": ""}


def test_a_submission_may_import_the_tasks_own_modules(write):
    """`from task import ...` and `from utils import ...` resolve to the task's files (utils.py is
    ../common.py by task.yml), as in GPU MODE's runner, wherever the submission lies."""
    text = ("import utils\nfrom task import input_t\nimport torch\n\n\ndef custom_kernel(data: input_t):\n"
            "    assert hasattr(utils, 'make_match_reference')\n    a, b = data\n"
            "    return torch.stack((a, b)).sum(dim=0)\n")
    report = vet(write("elsewhere.py", text), VECTORADD, device="cpu", allow=CLOCKS, settings=QUICK)
    assert report.verdict is Verdict.PASS, summaries(report)


# --------------------------------------------------------------------------- tolerance from the task

def test_tolerance_is_read_from_the_tasks_checker():
    softmax = load_problem(SOFTMAX)   # make_match_reference(ref_kernel, rtol=2e-4, atol=1e-6)
    assert softmax.tolerance == pytest.approx(2e-4 + 1e-6)
    assert "rtol=0.0002" in softmax.tolerance_from and "atol=1e-06" in softmax.tolerance_from
    add = load_problem(VECTORADD)     # make_match_reference(ref_kernel): the helper's defaults
    assert add.tolerance == pytest.approx(1e-5 + 1e-8)


def _softmax_with_tolerance(tmp_path, rtol: str) -> str:
    task = tmp_path / "task"
    shutil.copytree(SOFTMAX, task)
    shutil.copy(os.path.join(TASKS, "common.py"), tmp_path / "common.py")
    ref = task / "reference.py"
    ref.write_text(ref.read_text().replace("rtol=2e-4", f"rtol={rtol}"))
    return str(task)


def test_the_tasks_tolerance_decides_precision(tmp_path, write):
    """The same float16-arithmetic candidate (relative error ~1e-3, 20x the float32 default): rejected
    under the task's rtol=2e-4, accepted where the task declares rtol=1e-2."""
    half = write("half.py", HALF_SOFTMAX)
    tight = vet(half, SOFTMAX, device="cpu", allow=CLOCKS, settings=QUICK)
    precision = tight.finding(CheckId.PRECISION)
    assert precision.status is Status.FAIL and "problem's declared bound" in precision.summary, precision.summary
    assert precision.evidence["declared_tolerance"] == pytest.approx(2e-4 + 1e-6)
    assert precision.evidence["task_check"]["ran"] is True   # evidence, whatever it says
    loose = vet(half, _softmax_with_tolerance(tmp_path, "1e-2"), device="cpu", allow=CLOCKS, settings=QUICK)
    precision = loose.finding(CheckId.PRECISION)
    assert precision.status is Status.PASS, precision.summary
    assert precision.evidence["tolerance"] == pytest.approx(1e-2 + 1e-6)
    assert loose.problem["tolerance_from"].startswith("check_implementation: make_match_reference(rtol=0.01")


def test_a_kernelbench_file_declares_its_tolerance(write):
    body = ("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n"
            "def get_inputs():\n    return [torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n")
    assert load_problem(write("kb.py", body + "TOLERANCE = 1e-3\n")).tolerance == 1e-3
    assert load_problem(write("kb0.py", body)).tolerance is None
    with pytest.raises(UsageError, match="TOLERANCE must be a relative error bound"):
        load_problem(write("kbbad.py", body + "TOLERANCE = '1e-3'\n"))


def test_tolerance_of_a_checker_that_computes_it_is_not_guessed(tmp_path):
    task = tmp_path / "task"
    shutil.copytree(SOFTMAX, task)
    shutil.copy(os.path.join(TASKS, "common.py"), tmp_path / "common.py")
    ref = task / "reference.py"
    ref.write_text(ref.read_text().replace(
        "check_implementation = make_match_reference(ref_kernel, rtol=2e-4, atol=1e-6)",
        "def check_implementation(data, output):\n    n = data[0].numel()\n"
        "    return make_match_reference(ref_kernel, rtol=1e-6 * n, atol=1e-6)(data, output)"))
    prob = load_problem(str(task))
    assert prob.tolerance is None and "cannot be read" in prob.tolerance_from


def _declared(source: str):
    import ast
    import types
    from kernelvet.formats import gpumode_tolerance
    module = types.ModuleType("m")
    exec(compile(source, "m.py", "exec"), module.__dict__)
    return gpumode_tolerance.read(ast.parse(source), vars(module))


@pytest.mark.parametrize("checker, want", [
    ("import torch\ndef check_implementation(data, output):\n"
     "    return torch.allclose(output, data, rtol=1e-3, atol=2 * 1e-4)\n", 1e-3 + 2e-4),
    ("import torch\ndef check_implementation(data, output):\n    return torch.allclose(output, data)\n",
     1e-5 + 1e-8),                                                   # torch's own defaults
    ("def close(a, b, rtol=3e-3, atol=1e-5):\n    return True\n"
     "def check_implementation(data, output):\n    return close(output, data)\n", None),   # not a known name
    ("def verbose_allclose(a, b, rtol=3e-3, atol=1e-5):\n    return []\n"
     "def _both(data, output):\n    return verbose_allclose(output[0], data, atol=0.0) + "
     "verbose_allclose(output[1], data, rtol=1e-2)\n"
     "def check_implementation(data, output):\n    return _both(data, output)\n", 1e-2 + 1e-5),   # the loosest
    ("import torch\ndef check_implementation(data, output):\n    return torch.equal(output, data)\n", 0.0),
    ("x = 1\n", None),
])
def test_tolerance_reader_on_the_checkers_tasks_write(checker, want):
    got = _declared(checker)
    assert got.tolerance == (None if want is None else pytest.approx(want)), got


@pytest.mark.skipif(not os.path.isdir(REFERENCE_KERNELS), reason="no copy of gpu-mode/reference-kernels in .gpumode/")
@pytest.mark.parametrize("task, want", [
    ("pmpp/vectoradd_py", 1e-5 + 1e-8), ("pmpp/grayscale_py", 2e-4), ("pmpp/conv2d_py", 2e-3),
    ("pmpp/histogram_py", 0.0), ("pmpp/prefixsum_py", None), ("bioml/trimul", 4e-2),
])
def test_reference_kernels_tolerances_are_read(task, want):
    """Read without drawing (these tasks draw on CUDA): the task's files, its cases, its checker."""
    from kernelvet.formats import gpumode_tolerance
    reference, yml = gpumode.locate(os.path.join(REFERENCE_KERNELS, task))
    task_file = task_yml.read(yml)
    assert task_file.tests and task_file.benchmarks
    module, tree = gpumode.import_reference(reference, gpumode.task_files(reference, task_file))
    got = gpumode_tolerance.read(tree, vars(module))
    assert got.tolerance == (None if want is None else pytest.approx(want)), got


# --------------------------------------------------------------------------- inputs

def test_each_input_set_gets_its_own_secret_seed():
    prob = load_problem(VECTORADD)
    a, b = prob.draw_inputs(1), prob.draw_inputs(2)
    assert not torch.equal(a[0], b[0])
    assert torch.equal(prob.draw_inputs(1)[0], a[0])    # the set's seed decides, not the task's 211


def _task(tmp_path, generate: str, name: str = "t") -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "reference.py").write_text("import torch\n\n\ndef ref_kernel(data):\n    return data[0] * 2\n\n\n"
                                    f"{generate}\n")
    return str(d)


def test_a_task_whose_inputs_ignore_the_seed_is_refused(tmp_path):
    ignores = _task(tmp_path, "def generate_input(n=8, seed=0):\n    g = torch.Generator().manual_seed(5)\n"
                              "    return (torch.randn(n, generator=g),)\n")
    with pytest.raises(UsageError, match="same values under two different seeds .it ignores the seed it is given"):
        load_problem(ignores)


def test_a_task_without_a_seed_draws_from_the_seeded_global_generator(tmp_path):
    global_rng = _task(tmp_path, "def generate_input(n=8):\n    return (torch.randn(n),)\n")
    prob = load_problem(global_rng)    # no task.yml: generate_input's defaults
    assert prob.name.endswith(":defaults")
    assert not torch.equal(prob.draw_inputs(1)[0], prob.draw_inputs(2)[0])
    fixed = _task(tmp_path, "def generate_input(n=8):\n    return (torch.arange(n, dtype=torch.float32),)\n", "f")
    with pytest.raises(UsageError, match="takes no seed and draws nothing"):
        load_problem(fixed)


def test_a_dtype_the_worker_cannot_carry_is_named(tmp_path):
    fp8 = _task(tmp_path, "def generate_input(n=8, seed=0):\n    g = torch.Generator().manual_seed(seed)\n"
                          "    return (torch.randn(n, generator=g).to(torch.float8_e4m3fn),)\n")
    with pytest.raises(UsageError, match="returned a float8_e4m3fn tensor .tensor 0 of its data.; supported dtypes"):
        load_problem(fp8)


def test_data_structures_round_trip_around_the_same_tensors():
    x, w = torch.randn(3), torch.randn(2, 2)
    data = (x, {"w": w, "dim": 4, "mode": "fast", "none": None}, [1.5, True])
    skeleton, leaves = gpumode_data.flatten(data, "t")
    assert json.loads(json.dumps(skeleton)) == skeleton    # it travels as JSON
    assert leaves[0] is x and leaves[1] is w and leaves[2:] == [4, 1.5, True]
    back = gpumode_data.rebuild(skeleton, leaves)
    assert back[0] is x and back[1]["w"] is w and back[1]["mode"] == "fast" and back[2] == [1.5, True]
    with pytest.raises(UsageError, match=r"returned a set at data\[1\]\['s'\]"):
        gpumode_data.flatten((x, {"s": {1, 2}}), "t")
    with pytest.raises(UsageError, match="returned no tensor"):
        gpumode_data.flatten((1, 2), "t")


# --------------------------------------------------------------------------- task.yml

def test_task_yml_cases_files_and_comments():
    task = task_yml.read(os.path.join(VECTORADD, "task.yml"))
    assert task.tests == ({"rows": 33, "cols": 65, "seed": 17}, {"rows": 64, "cols": 128, "seed": 4})
    assert task.benchmarks == ({"rows": 96, "cols": 256, "seed": 211},)   # the commented-out case is not one
    assert ("utils.py", "../common.py") in task.files and task.main == "eval.py"
    softmax = task_yml.read(os.path.join(SOFTMAX, "task.yml"))        # bare keys
    assert softmax.benchmarks == ({"rows": 64, "cols": 512, "scale": 0.7, "seed": 99},)


def test_task_yml_booleans_and_mistakes(tmp_path):
    good = tmp_path / "task.yml"
    good.write_text('tests:\n  - {"n": 4, "nomask": True, "dist": "no # not a comment"}  # a comment\n')
    assert task_yml.read(str(good)).tests == ({"n": 4, "nomask": True, "dist": "no # not a comment"},)
    bad = tmp_path / "bad.yml"
    bad.write_text("tests:\n  - {\"n\": 4}\n  - n: 5\n")
    with pytest.raises(UsageError, match=r"bad.yml:3: tests: expected a flow mapping"):
        task_yml.read(str(bad))


def test_a_case_that_does_not_exist_is_named(capsys):
    assert cli.main(["check", os.path.join(VECTORADD, "submission.py"), "--ref", VECTORADD + ":test.7",
                     "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "there is no test.7: it lists 2 tests" in err[0], err


# --------------------------------------------------------------------------- format detection

def test_format_is_told_by_what_the_file_defines(tmp_path):
    assert gpumode.is_task(VECTORADD) and gpumode.is_task(os.path.join(VECTORADD, "reference.py"))
    kb = tmp_path / "kb.py"
    kb.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    assert not gpumode.is_task(str(kb))
    # its reference.py alone, task.yml beside it: the same problem as the directory
    assert load_problem(os.path.join(VECTORADD, "reference.py")).spec["case"] == load_problem(VECTORADD).spec["case"]


@pytest.mark.parametrize("ref, needle", [
    ("neither.py", "neither a KernelBench problem (Model, get_inputs, get_init_inputs) nor a GPU MODE task"),
    ("empty_dir", "a problem directory must be a GPU MODE task, with a reference.py in it"),
    ("half.py", "a GPU MODE reference must define the functions ref_kernel, generate_input; missing generate_input"),
])
def test_a_file_of_neither_format_is_one_line_exit_2(tmp_path, capsys, ref, needle):
    (tmp_path / "neither.py").write_text("import torch\n\ndef forward(x):\n    return x\n")
    (tmp_path / "half.py").write_text("def ref_kernel(data):\n    return data\n")
    (tmp_path / "empty_dir").mkdir()
    rc = cli.main(["check", os.path.join(VECTORADD, "submission.py"), "--ref", str(tmp_path / ref), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err


def test_a_kernelbench_candidate_for_a_gpumode_task_is_told_so(write, capsys):
    cand = write("kb.py", "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, a, b):\n"
                          "        return a + b\n")
    assert cli.main(["check", cand, "--ref", VECTORADD, "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "defines no custom_kernel(data)" in err and "ModelNew is KernelBench's entry" in err, err


def test_a_batch_manifest_takes_gpumode_tasks(tmp_path, write, capsys):
    from kernelvet.batch.results import read_records
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in [
        {"id": "honest", "problem": VECTORADD, "candidate": os.path.join(VECTORADD, "submission.py"),
         "allow": [str(c) for c in CLOCKS]},
        {"id": "cheat", "problem": VECTORADD, "candidate": write("ri.py", RETURNS_INPUT)},
        {"id": "kb", "problem": VECTORADD, "candidate": write("kb.py", "class ModelNew:\n    pass\n")},
    ]))
    out = tmp_path / "r.jsonl"
    assert cli.main(["batch", "--manifest", str(manifest), "--out", str(out), "--device", "cpu",
                     "--no-progress"]) == 0
    capsys.readouterr()
    got = {r.id: r for r in read_records(str(out))[0]}
    assert got["honest"].verdict == "pass", got["honest"]
    assert got["cheat"].verdict == "reject"
    assert got["kb"].verdict == "invalid" and got["kb"].fault == "candidate" and "custom_kernel" in got["kb"].error


# --------------------------------------------------------------------------- real reference-kernels tasks

HONEST_ADD_TRITON = '''
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _add(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    c = torch.empty_like(a)
    n = a.numel()
    _add[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)
    return c
'''

# Pattern 9: remember the answer by the inputs' pointers; a hit is copied out by a kernel of its
# own (device work on every call, all of it the candidate's).
CACHED_ADD_TRITON = HONEST_ADD_TRITON.replace('''def custom_kernel(data: input_t) -> output_t:
    a, b = data
''', '''@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


_seen = {}


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    key = (a.data_ptr(), b.data_ptr(), a.numel())
    if key in _seen:
        out = torch.empty_like(a)
        _copy[(triton.cdiv(a.numel(), 1024),)](_seen[key], out, a.numel(), BLOCK=1024)
        return out
''').replace("    return c\n", "    _seen[key] = c.clone()\n    return c\n")

HONEST_GRAY_TRITON = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _gray(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = tl.load(x_ptr + 3 * offs, mask=mask)
    g = tl.load(x_ptr + 3 * offs + 1, mask=mask)
    b = tl.load(x_ptr + 3 * offs + 2, mask=mask)
    tl.store(y_ptr + offs, 0.2989 * r + 0.5870 * g + 0.1140 * b, mask=mask)


def custom_kernel(data):
    h, w, _ = data.shape
    y = torch.empty(h, w, device=data.device, dtype=data.dtype)
    _gray[(triton.cdiv(h * w, 1024),)](data, y, h * w, BLOCK=1024)
    return y
'''

# Pattern 8: the weighted sum in bfloat16, cast back: its rounding (~3e-3 relative) is 15x the
# bound the task's checker declares (rtol 1e-4 + atol 1e-4).
THIN_GRAY_TRITON = HONEST_GRAY_TRITON.replace(
    "tl.store(y_ptr + offs, 0.2989 * r + 0.5870 * g + 0.1140 * b, mask=mask)",
    "r, g, b = r.to(tl.bfloat16), g.to(tl.bfloat16), b.to(tl.bfloat16)\n"
    "    tl.store(y_ptr + offs, (0.2989 * r + 0.5870 * g + 0.1140 * b).to(tl.float32), mask=mask)")


@pytest.mark.gpu
@pytest.mark.skipif(not os.path.isdir(REFERENCE_KERNELS), reason="no copy of gpu-mode/reference-kernels in .gpumode/")
@pytest.mark.parametrize("task, honest, cheat, catches", [
    ("pmpp/vectoradd_py", HONEST_ADD_TRITON, CACHED_ADD_TRITON, CheckId.CACHING),
    ("pmpp/grayscale_py", HONEST_GRAY_TRITON, THIN_GRAY_TRITON, CheckId.PRECISION),
], ids=["vectoradd_py", "grayscale_py"])
def test_reference_kernels_tasks_on_the_gpu(write, task, honest, cheat, catches):
    ref = os.path.join(REFERENCE_KERNELS, task)
    good = vet(write("honest.py", honest), ref, device="cuda")
    assert good.verdict is Verdict.PASS, summaries(good)
    bad = vet(write("cheat.py", cheat), ref, device="cuda")
    assert bad.verdict is Verdict.REJECT
    assert catches in failed(bad), summaries(bad)
    # the task's own submission (a torch composition) is no kernel under the default policy
    own = vet(os.path.join(ref, "submission.py"), ref, device="cuda")
    assert CheckId.LIBRARY_CALL in failed(own), summaries(own)


def test_a_folder_of_tasks_is_a_problem_set_for_batch(tmp_path):
    from kernelvet.batch import jobs
    runs = tmp_path / "runs" / "rowsoftmax"
    runs.mkdir(parents=True)
    (runs / "s0.py").write_text("def custom_kernel(data):\n    return data[0]\n")
    index = jobs.problem_index(TASKS)
    assert index["vectoradd"] == VECTORADD and index["rowsoftmax"] == SOFTMAX
    assert [(j.id, j.problem) for j in jobs.from_dirs(TASKS, str(tmp_path / "runs"))] == [("rowsoftmax/s0", SOFTMAX)]
