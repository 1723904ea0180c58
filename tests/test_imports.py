"""The import rules of docs/architecture.md, read from the sources with ast (nothing is imported).

GROUPS is the one table that places each module of src/kernelvet in a room. When the code moves
into packages, only that table changes; the rules are written in rooms, not in file names.
Every import counts: at the top of a module or inside a function, absolute or relative. Importing
`a.b.c` loads `a` and `a.b` too, so a package's __init__ is part of what its submodules bring.
"""

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

# Module (dotted, under kernelvet) -> room. A module of a package not listed takes its package's
# room ("checks.caching" -> "checks"); a top-level module not listed fails the first test.
GROUPS = {
    # the user's side: command line, server, rendering; nothing outside front imports these
    "__main__": "front", "cli": "front", "server": "front", "render": "front",
    # the judge's process: the plan, its worker handles, the next vet's spare, the input draws
    # (judge/: api, settings, placement, reference, plan, bodies, policy, assembly, versions)
    "judge": "judge", "spawn": "judge", "spares": "judge", "draws": "judge", "sched": "judge",
    # the launcher: the torch-preloaded forker and how it confines what it forks
    "launcher": "launcher", "containment": "launcher", "sandbox": "launcher", "reaper": "launcher",
    "triton_key": "launcher", "namespaces": "launcher", "seccomp": "launcher",
    # the worker's process: serving requests, the libraries a spare warms before any candidate
    # (worker/: serve, reps, bindings, observe, host_copies, __main__)
    "worker": "worker", "warm": "worker", "after_return": "worker",
    # the judge/worker messages
    "protocol": "wire", "codec": "wire", "wire": "wire",
    # big CUDA tensors in device buffers the judge lends per request
    "devshare": "wire", "lending": "wire",
    # one module per check id, and what checks decide on and return
    "checks": "checks",
    "evidence": "records", "report": "records", "metrics": "records", "ids": "records",
    # a big problem's outputs compared as they arrive, kept as the numbers the checks read
    "compact": "records", "trace": "records", "bits_digest": "records",
    # evidence gathering that decides nothing (the source resolver)
    "checks.source_scan": "analysis",
    # shared by every process: errors, devices, problems and their formats, dispatch modes
    "": "core", "errors": "core", "devices": "core", "problem": "core", "as64": "core", "problems": "core",
    "formats": "core", "dispatch_modes": "core",
    # outputs of any structure, argmax ties, the reference's weights: judge and worker agree on them
    "outputs": "core", "index_ties": "core", "weights": "core",
    # what a problem's messages may carry and a vet of it holds, from its own shapes
    "sizes": "core",
    # big tensors between the host and an accelerator through a pinned stage, for every process
    "crossing": "core",
    # the practice corpus: cheats, honest kernels, the naive bench, the practice runner
    "practice": "practice",
    # many candidates in one run: jobs, the results file, engines; references shared per problem
    "batch": "batch", "refcache": "judge",
    # verdicts as rewards, scored on the batch's device pool
    "reward": "batch",
}

# Imports that cross a rule today, each named so that it cannot spread unseen; the last test
# fails once one is gone, so that this list only shrinks.
KNOWN_CROSSINGS = {
    ("batch.engine", "cli"),   # the engine starts its launcher as the CLI does (cli._launcher)
}

# (room, rooms it must never reach, directly or through what it imports)
NEVER_REACHES = [
    # The worker's process (the launcher forks it, so what the launcher loaded the worker has)
    # holds no judge code and no check: it observes, it never decides.
    ("worker", {"judge", "checks", "analysis", "front"}),
    ("launcher", {"judge", "checks", "analysis", "front"}),
    # The judge drives a worker only through the wire, and knows nothing of its front ends.
    ("judge", {"worker", "front"}),
]
# Checks are leaves: they import only what they decide on and return, and analysis.
CHECKS_IMPORT_ONLY = {"checks", "records", "analysis"}
# Analysis gathers evidence; it never decides or drives.
ANALYSIS_IMPORT_ONLY = {"analysis", "records", "core"}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted((SRC / "kernelvet").rglob("*.py")):
        parts = path.relative_to(SRC / "kernelvet").with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _lazy_exports() -> dict[str, str]:
    """kernelvet's names that load a module when asked for (`_EXPORTS` in its __init__): asking
    kernelvet for `vet` imports the judge."""
    for node in ast.parse(MODULES[""].read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "_EXPORTS":
            return ast.literal_eval(node.value)
    return {}


LAZY = _lazy_exports()


def room(mod: str) -> str:
    name = mod
    while name not in GROUPS and "." in name:
        name = name.rsplit(".", 1)[0]
    if name not in GROUPS:
        raise KeyError(f"kernelvet.{mod} is in no room: add it to GROUPS in tests/test_imports.py")
    return GROUPS[name]


def _loaded(target: str) -> set[str]:
    """`target` and the packages above it, as importing it loads them; kernelvet itself ("") only
    where it is the target: every import loads it, and it loads nothing until a name is asked for."""
    if not target:
        return {""}
    parts = target.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(MODULES)


def _targets(node, package: str) -> list[str]:
    """The kernelvet modules (dotted under kernelvet, "" for it) one import statement loads."""
    if isinstance(node, ast.Import):
        full = [a.name for a in node.names]
    elif node.level:
        base = package.split(".") if package else []
        base = base[:len(base) - node.level + 1]
        full = ["kernelvet" + "".join("." + p for p in base + ([node.module] if node.module else []))]
    else:
        full = [node.module or ""]
    if isinstance(node, ast.ImportFrom):
        # `from pkg import sub` loads pkg.sub when sub is a module; else it asks pkg for a name
        full = [f"{full[0]}.{a.name}" if f"{full[0]}.{a.name}".removeprefix("kernelvet").removeprefix(".")
                in MODULES else f"kernelvet.{LAZY[a.name]}" if full[0] == "kernelvet" and a.name in LAZY
                else full[0] for a in node.names]
    return [n.removeprefix("kernelvet").removeprefix(".") for n in full
            if n == "kernelvet" or n.startswith("kernelvet.")]


def imports(mod: str) -> set[str]:
    """The kernelvet modules `mod` imports anywhere in its source."""
    path = MODULES[mod]
    return imports_in(path.read_text(), mod, is_package=path.name == "__init__.py")


def imports_in(source: str, mod: str, is_package: bool = False) -> set[str]:
    package = mod if is_package else mod.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _targets(node, package):
                found |= _loaded(target)
    return found - {mod}


def reached(mod: str) -> set[str]:
    seen, todo = set(), [mod]
    while todo:
        for dep in imports(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen - {mod}


def test_every_module_has_a_room():
    assert [m for m in MODULES if not _has_room(m)] == []


def _has_room(mod: str) -> bool:
    try:
        room(mod)
        return True
    except KeyError:
        return False


def test_the_reader_sees_relative_absolute_and_function_level_imports():
    # kernelvet's own modules are the fixture: each form occurs in them
    # `from .. import checks`, `from ..checks import caching`, `from ..checks.timers import judge_clock`
    assert {"checks", "checks.caching", "checks.timers", "checks.source_scan"} <= imports("judge.plan") | \
        imports("judge.api")
    assert {"judge.api", "judge.plan", "refcache"} <= imports("judge")   # a package's __init__: from .api import
    assert "cli" in imports("__main__")
    assert "report" in imports("checks.caching")                       # from ..report import
    assert "" in imports("judge.versions")                             # from .. import __version__ (in a function)
    assert "worker" in reached("launcher") and "protocol" in reached("worker")
    # and every form, on sources of a module that would break the rules
    src = ("import kernelvet.spawn\nfrom .. import vet\nfrom ..checks import caching\n"
           "def f():\n    from kernelvet.judge import Settings\n    import os, kernelvet.practice.runner\n")
    assert imports_in(src, "checks.x") == {"spawn", "judge", "checks", "checks.caching", "practice",
                                           "practice.runner"}
    assert imports_in("from . import __version__, report\n", "x") == {"", "report"}
    assert imports_in("from kernelvet import vet, Report\n", "x") == {"judge", "report"}


@pytest.mark.parametrize("start,forbidden", NEVER_REACHES, ids=[r for r, _ in NEVER_REACHES])
def test_a_room_never_reaches_the_rooms_it_must_not(start, forbidden):
    bad = {m: sorted(d for d in reached(m) if room(d) in forbidden) for m in MODULES if room(m) == start}
    assert {m: d for m, d in bad.items() if d} == {}


def test_nothing_outside_front_imports_front():
    bad = {m: sorted(d for d in imports(m) if room(d) == "front" and (m, d) not in KNOWN_CROSSINGS)
           for m in MODULES if room(m) != "front"}
    assert {m: d for m, d in bad.items() if d} == {}


def test_every_known_crossing_still_exists():
    assert [(m, d) for m, d in sorted(KNOWN_CROSSINGS) if m not in MODULES or d not in imports(m)] == []


@pytest.mark.parametrize("leaf,allowed", [("checks", CHECKS_IMPORT_ONLY), ("analysis", ANALYSIS_IMPORT_ONLY)])
def test_leaves_import_only_what_they_are_allowed(leaf, allowed):
    bad = {m: sorted(d for d in imports(m) if room(d) not in allowed) for m in MODULES if room(m) == leaf}
    assert {m: d for m, d in bad.items() if d} == {}


MAX_LINES, MAX_PARAMS = 80, 6   # a longer function is split into named steps; more parameters say why


def _functions():
    for mod, path in MODULES.items():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield mod, node, lines


def _params(node) -> int:
    a = node.args
    n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return n - bool(a.args and a.args[0].arg in ("self", "cls"))


def test_no_function_is_long_or_takes_many_parameters_without_a_reason():
    long = [f"{m}.{f.name}: {f.end_lineno - f.lineno + 1} lines" for m, f, _ in _functions()
            if f.end_lineno - f.lineno + 1 > MAX_LINES]
    # the reason: a comment on the line above the function (or its first decorator), or on its `def` line
    unexplained = [f"{m}.{f.name}: {_params(f)} parameters" for m, f, lines in _functions()
                   if _params(f) > MAX_PARAMS and not (
                       lines[min([f.lineno, *(d.lineno for d in f.decorator_list)]) - 2].lstrip().startswith("#")
                       or "#" in lines[f.lineno - 1])]
    assert long == [] and unexplained == []
