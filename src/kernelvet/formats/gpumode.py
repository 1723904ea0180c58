"""GPU MODE format (gpu-mode/reference-kernels): a task is a directory with `reference.py`
(`generate_input(**case)` -> data, `ref_kernel(data)` -> output, `check_implementation(data,
output)`) and `task.yml` (its test and benchmark cases as keyword arguments, the files it runs
with); the candidate's `submission.py` defines `custom_kernel(data)`.

kernelvet vets it as it vets a KernelBench problem: the reference is a Model whose forward is
`ref_kernel` on the data rebuilt from the input set, the input sets are `generate_input` on one
of the task's cases with a fresh secret seed each, and the candidate is called as
`custom_kernel(data)` in its worker. `check_implementation` decides nothing: the tolerance it
uses is read from its source (gpumode_tolerance.py), and kernelvet's own checks judge.

Everything here runs in the judge, on trusted task files; the candidate's file is only parsed.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import os
import random
import re
import sys
import threading
import types

import torch

from ..errors import UsageError
from ..protocol import DTYPE_SIZES
from . import gpumode_data, gpumode_tolerance, kernelbench, task_yml

REFERENCE = "reference.py"
TASK = "task.yml"
ENTRY = "custom_kernel"
REQUIRED = ("ref_kernel", "generate_input")
_CASE = re.compile(r"^(.*):(test|benchmark)\.(\d+)$")
_IMPORT_LOCK = threading.RLock()   # the task's modules hold common names (utils, task): one task at a time


def split_ref(ref: str) -> tuple[str, tuple[str, int] | None]:
    """`TASK[:test.N|:benchmark.N]` -> (path, the case named, if any)."""
    m = _CASE.match(ref)
    if m and os.path.exists(m.group(1)):
        return m.group(1), (m.group(2), int(m.group(3)))
    return ref, None


def is_task(path: str) -> bool:
    """A directory is a GPU MODE task; so is a file that defines ref_kernel or generate_input and
    none of KernelBench's names (decided from its AST: nothing runs)."""
    if os.path.isdir(path):
        return True
    if not path.endswith(".py") or not os.path.isfile(path):
        return False
    names = set(kernelbench.top_level_names(kernelbench.parse(kernelbench.read_source(path, "problem"), path,
                                                              "problem")))
    return bool(names & set(REQUIRED)) and not names & set(kernelbench.REQUIRED)


def locate(path: str) -> tuple[str, str | None]:
    """(reference.py, task.yml beside it or None) for a task directory or its reference file."""
    if os.path.isdir(path):
        reference = os.path.join(path, REFERENCE)
        if not os.path.isfile(reference):
            raise UsageError(f"{path}: a problem directory must be a GPU MODE task, with a {REFERENCE} in it")
    else:
        reference = path
    yml = os.path.join(os.path.dirname(os.path.abspath(reference)), TASK)
    return os.path.abspath(reference), (yml if os.path.isfile(yml) else None)


def task_files(reference: str, task: task_yml.TaskFile | None) -> dict[str, str]:
    """Module name -> file of the task's own modules, as GPU MODE's runner lays them out (task.yml's
    `files`, less the candidate and the runner), else the .py files beside the reference."""
    base = os.path.dirname(reference)
    if task is None:
        found = {f[:-3]: os.path.join(base, f) for f in sorted(os.listdir(base))
                 if f.endswith(".py") and f not in ("submission.py", "eval.py")}
        return {**found, "reference": reference}
    files = {}
    for name, source in task.files:
        if source == "@SUBMISSION@" or name == task.main or not name.endswith(".py"):
            continue
        path = os.path.normpath(os.path.join(base, source))
        if not os.path.isfile(path):
            raise UsageError(f"{task.path}: files: {name} comes from {source}, which is not a file ({path})")
        files[name[:-3]] = path
    files["reference"] = reference
    return files


@contextlib.contextmanager
def _importable(files: dict[str, str]):
    """The task's modules importable under their own names while its reference is imported, and
    gone from sys.modules after (two tasks may each have a `utils`); the reference keeps what it bound."""
    with _IMPORT_LOCK:
        saved = {n: sys.modules.pop(n) for n in files if n in sys.modules}
        finder = gpumode_data.TaskFinder(files)
        sys.meta_path.insert(0, finder)
        try:
            yield
        finally:
            sys.meta_path.remove(finder)
            for n in files:
                sys.modules.pop(n, None)
            sys.modules.update(saved)


def import_reference(path: str, files: dict[str, str]) -> tuple[types.ModuleType, ast.Module]:
    """Execute a trusted GPU MODE reference file and check its shape."""
    source = kernelbench.read_source(path, "problem")
    tree = kernelbench.parse(source, path, "problem")
    module = types.ModuleType("kernelvet_reference")
    module.__file__ = path
    with _importable(files):
        try:
            exec(compile(tree, path, "exec"), module.__dict__)
        except (Exception, SystemExit) as exc:
            where = kernelbench.at(path, kernelbench.user_line(exc, path))
            raise UsageError(f"{where}: importing the problem failed: {type(exc).__name__}: {exc}") from None
    missing = [n for n in REQUIRED if not callable(getattr(module, n, None))]
    if missing:
        defined = ", ".join(n for n in vars(module) if not n.startswith("_") and n not in ("torch", "nn", "F"))
        raise UsageError(f"{path}: a GPU MODE reference must define the functions {', '.join(REQUIRED)}; missing "
                         f"{', '.join(missing)}; it defines: {defined or 'nothing'}")
    return module, tree


def pick_case(task: task_yml.TaskFile | None, wanted: tuple[str, int] | None, where: str) -> tuple[str, dict]:
    """The case the input sets are drawn from: the one named, else the first benchmark (the sizes
    the task is ranked at), else the first test; no task.yml: generate_input's own defaults."""
    if task is None:
        if wanted is not None:
            raise UsageError(f"{where}: {wanted[0]}.{wanted[1]} names a case, but there is no {TASK} beside it")
        return "defaults", {}
    if wanted is not None:
        cases = task.tests if wanted[0] == "test" else task.benchmarks
        if wanted[1] >= len(cases):
            raise UsageError(f"{task.path}: there is no {wanted[0]}.{wanted[1]}: it lists {len(cases)} "
                             f"{wanted[0]}{'s' if len(cases) != 1 else ''}")
        return f"{wanted[0]}.{wanted[1]}", dict(cases[wanted[1]])
    if task.benchmarks:
        return "benchmark.0", dict(task.benchmarks[0])
    if task.tests:
        return "test.0", dict(task.tests[0])
    raise UsageError(f"{task.path}: lists no tests and no benchmarks")


def task_seed() -> int:
    """The seed handed to generate_input: drawn from the set's secret seed (torch's global
    generator was just seeded with it), 31 bits as the tasks' own seeds are."""
    return random.Random(torch.initial_seed()).getrandbits(31)


def namespace(module: types.ModuleType, case: dict, skeleton, where: str) -> types.SimpleNamespace:
    """The task as a KernelBench-shaped problem: Model, get_inputs, get_init_inputs."""
    ref_kernel, generate = module.ref_kernel, module.generate_input
    seeded = "seed" in _parameters(generate, where)

    def draw():
        """(skeleton, leaves) of one draw under torch's global generator as it is now seeded."""
        kwargs = {**case, "seed": task_seed()} if seeded else dict(case)
        data = kernelbench.call_user(lambda: generate(**kwargs), where, "generate_input()")
        return gpumode_data.flatten(data, where)

    def get_inputs():
        got, leaves = draw()
        if skeleton is not None and got != skeleton:
            raise UsageError(f"{where}: generate_input() returned data of another structure under another seed; "
                             "kernelvet draws every input set of a case the same way")
        return leaves

    class Model(torch.nn.Module):
        """ref_kernel on the data rebuilt around the input set (the judge's float64 copy included)."""

        def forward(self, *leaves):
            return ref_kernel(gpumode_data.rebuild(skeleton, leaves))

    return types.SimpleNamespace(Model=Model, get_inputs=get_inputs, get_init_inputs=lambda: [], draw=draw,
                                 ref_kernel=ref_kernel, generate_input=generate,
                                 check_implementation=getattr(module, "check_implementation", None), seeded=seeded)


def _parameters(fn, where: str) -> dict:
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        raise UsageError(f"{where}: generate_input has no signature kernelvet can read") from None


def build(spec: dict) -> types.SimpleNamespace:
    """The problem's namespace from its spec (in the judge, and again in the reference worker)."""
    module, _ = import_reference(spec["path"], spec["files"])
    return namespace(module, spec["case"], spec["skeleton"], spec["path"])


def candidate_entry(path: str, source: str) -> str:
    """The candidate must define custom_kernel (decided from its AST alone)."""
    tree = kernelbench.parse(source, path, "candidate")
    bound = dict(kernelbench.top_level_bindings(tree.body))
    if ENTRY in bound:
        kernelbench._check_callable(path, ENTRY, bound[ENTRY])
        return ENTRY
    defined = ", ".join(n for n, node in bound.items()
                        if not n.startswith("_") and not isinstance(node, (ast.Import, ast.ImportFrom))) or "nothing"
    hint = " (ModelNew is KernelBench's entry; this problem is a GPU MODE task)" if "ModelNew" in bound else ""
    raise UsageError(f"{path}: candidate defines no {ENTRY}(data), the entry of a GPU MODE task{hint}; "
                     f"it defines: {defined}")


def probe(ns: types.SimpleNamespace, where: str):
    """The skeleton of the case's data, from two draws under two seeds; a task whose draws do not
    follow the seed (generate_input ignores it, or draws from a generator of its own) is refused:
    the candidate could foresee its inputs."""
    draws = []
    for seed in (random.Random(os.urandom(8)).getrandbits(62) for _ in range(2)):
        torch.manual_seed(seed)
        draws.append(ns.draw())
    (s1, a), (s2, b) = draws
    for i, x in enumerate(a):
        if isinstance(x, torch.Tensor) and str(x.dtype).removeprefix("torch.") not in DTYPE_SIZES:
            raise UsageError(f"{where}: generate_input() returned a {str(x.dtype).removeprefix('torch.')} tensor "
                             f"(tensor {i} of its data); supported dtypes: {', '.join(DTYPE_SIZES)}")
    if s1 != s2:
        raise UsageError(f"{where}: generate_input() returned data of another structure under another seed; "
                         "kernelvet draws every input set of a case the same way")
    if all(_same(x, y) for x, y in zip(a, b)):
        how = "ignores the seed it is given" if ns.seeded else "takes no seed and draws nothing from torch's generator"
        raise UsageError(f"{where}: generate_input() returned the same values under two different seeds (it {how}); "
                         "kernelvet needs inputs the candidate cannot foresee, drawn from the seed")
    return s1


def _same(x, y) -> bool:
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        return x.shape == y.shape and x.dtype == y.dtype and torch.equal(x, y)
    return x == y
