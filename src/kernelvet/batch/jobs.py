"""A batch's jobs: which candidate is vetted against which problem, under what id and options.

Two ways in. A manifest (JSONL, one `{"id", "problem", "candidate"}` object a line, optionally
"allow" and "timeout"; relative paths resolve against the manifest's folder; "problem" may also
name a built-in problem). Or a problem tree and a candidate folder, paired by name: KernelBench's
own (`levelL/P_Name.py` problems; `level_L_problem_P_sample_S_kernel.py` samples, as KernelBench
writes its generations), or `<problem stem>/<anything>.py` under the candidate folder for a flat
folder of problem files. Every mistake is a UsageError naming the file and line.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re

from .. import problems as builtin_problems
from ..errors import UsageError
from ..ids import UNWAIVABLE, parse_check_id

SAMPLE_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
LEVEL_DIR = re.compile(r"^level(\d+)$")
PROBLEM_NAME = re.compile(r"^(\d+)_.*\.py$")
_MANIFEST_KEYS = {"id", "problem", "candidate", "allow", "timeout"}


@dataclasses.dataclass(frozen=True)
class Job:
    id: str
    problem: str                 # a problem file's absolute path, or a built-in problem's name
    candidate: str               # absolute path
    allow: tuple[str, ...] = ()  # waivers of this job alone, added to the run's own
    timeout: float | None = None  # this job's --timeout, if it has its own
    where: str = ""              # where the job was defined (manifest line), for messages

    def to_json(self) -> dict:
        return {"id": self.id, "problem": self.problem, "candidate": self.candidate,
                "allow": list(self.allow), "timeout": self.timeout}


@dataclasses.dataclass(frozen=True)
class ProblemGroup:
    """One problem's jobs, vetted one after another with one shared reference (the unit an engine
    hands to a device)."""

    problem: str
    jobs: tuple[Job, ...]


def group_by_problem(jobs) -> list[ProblemGroup]:
    """The jobs grouped by problem, each group in the order its first job came."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.problem, []).append(job)
    return [ProblemGroup(p, tuple(js)) for p, js in groups.items()]


def from_manifest(path: str) -> list[Job]:
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise UsageError(f"--manifest {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--manifest {path}: is a directory, expected a JSONL file") from None
    except OSError as exc:
        raise UsageError(f"--manifest {path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"--manifest {path}: not UTF-8 text (byte {exc.start})") from None
    base = os.path.dirname(os.path.abspath(path))
    jobs = [_manifest_job(line, f"{path}:{n}", base) for n, line in enumerate(lines, 1)
            if line.strip() and not line.lstrip().startswith("#")]
    if not jobs:
        raise UsageError(f"--manifest {path}: no jobs (one JSON object a line)")
    return _unique(jobs)


def _manifest_job(line: str, where: str, base: str) -> Job:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not a JSON object: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object with id, problem and candidate")
    missing = [k for k in ("id", "problem", "candidate") if k not in obj]
    if missing:
        raise UsageError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(set(obj) - _MANIFEST_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; a line may hold {', '.join(sorted(_MANIFEST_KEYS))}")
    jid = obj["id"]
    if isinstance(jid, bool) or not isinstance(jid, (str, int)) or not str(jid).strip():
        raise UsageError(f"{where}: id must be a non-empty string or an integer, got {jid!r}")
    for key in ("problem", "candidate"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise UsageError(f"{where}: {key} must be a path, got {obj[key]!r}")
    allow = obj.get("allow", [])
    if isinstance(allow, str):
        allow = [allow]
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise UsageError(f"{where}: allow must be a list of check ids, got {allow!r}")
    for a in allow:
        check_waiver(a, where)
    timeout = obj.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or not 0 < timeout <= 86400):
        raise UsageError(f"{where}: timeout must be a number of seconds in (0, 86400], got {timeout!r}")
    problem = obj["problem"]
    if not (problem in builtin_problems.BUILTIN and not os.path.exists(os.path.join(base, problem))):
        problem = _problem(os.path.join(base, problem), where)
    candidate = _existing(os.path.join(base, obj["candidate"]), where, "candidate")
    return Job(str(jid), problem, candidate, tuple(allow), None if timeout is None else float(timeout), where)


def check_waiver(text: str, where: str) -> None:
    """A check id that `--allow` can waive, or a UsageError naming `where`."""
    try:
        cid = parse_check_id(text)
    except ValueError as exc:
        raise UsageError(f"{where}: allow: {exc}") from None
    if cid in UNWAIVABLE:
        raise UsageError(f"{where}: allow {cid}: this check cannot be waived")


def _problem(path: str, where: str) -> str:
    """A problem file, or a GPU MODE task directory; either may name a task's case (`:test.N`)."""
    from ..formats.gpumode import split_ref
    target, case = split_ref(path)
    suffix = f":{case[0]}.{case[1]}" if case else ""
    if os.path.isdir(target):
        return os.path.abspath(target) + suffix
    return _existing(target, where, "problem") + suffix


def _existing(path: str, where: str, what: str) -> str:
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        why = "is a directory" if os.path.isdir(path) else "no such file"
        raise UsageError(f"{where}: {what} {path}: {why}")
    return path


def _unique(jobs: list[Job]) -> list[Job]:
    seen: dict[str, Job] = {}
    for job in jobs:
        if job.id in seen:
            raise UsageError(f"{job.where}: id {job.id!r} is already used at {seen[job.id].where}")
        seen[job.id] = job
    return jobs


def problem_index(root: str) -> dict:
    """A problem tree's files by key: (level, number) for KernelBench's layout (`levelL/P_*.py`,
    or `root` itself a `levelL` folder), else the file's stem, or a GPU MODE task folder's name."""
    if not os.path.isdir(root):
        raise UsageError(f"--problems {root}: {'not a directory' if os.path.exists(root) else 'no such directory'}")
    root = os.path.abspath(root)
    levels = {int(m.group(1)): os.path.join(root, d) for d in sorted(os.listdir(root))
              if (m := LEVEL_DIR.match(d)) and os.path.isdir(os.path.join(root, d))}
    own = LEVEL_DIR.match(os.path.basename(root))
    if not levels and own:
        levels = {int(own.group(1)): root}
    index: dict = {}
    if levels:
        for level, folder in levels.items():
            for name in sorted(os.listdir(folder)):
                m = PROBLEM_NAME.match(name)
                if m:
                    index.setdefault((level, int(m.group(1))), os.path.join(folder, name))
    else:
        for name in sorted(os.listdir(root)):
            if name.endswith(".py") and not name.startswith("_"):
                index[name[:-3]] = os.path.join(root, name)
            elif os.path.isfile(os.path.join(root, name, "reference.py")):   # a GPU MODE task, by its folder's name
                index[name] = os.path.join(root, name)
    if not index:
        raise UsageError(f"--problems {root}: no problem files (KernelBench's levelN/P_Name.py, or *.py)")
    return index


def from_dirs(problems_dir: str, candidates_dir: str) -> list[Job]:
    """Every candidate file under `candidates_dir`, paired with its problem by name."""
    index = problem_index(problems_dir)
    if not os.path.isdir(candidates_dir):
        raise UsageError(f"--candidates {candidates_dir}: "
                         f"{'not a directory' if os.path.exists(candidates_dir) else 'no such directory'}")
    kernelbench = any(isinstance(k, tuple) for k in index)
    jobs = []
    for dirpath, dirnames, filenames in os.walk(os.path.abspath(candidates_dir)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
        for name in sorted(filenames):
            if not name.endswith(".py") or name.startswith("_"):
                continue
            path = os.path.join(dirpath, name)
            jobs.append(_paired(path, name, os.path.relpath(dirpath, os.path.abspath(candidates_dir)),
                                index, kernelbench))
    if not jobs:
        raise UsageError(f"--candidates {candidates_dir}: no candidate files (*.py)")
    return _unique(jobs)


def _paired(path: str, name: str, rel_dir: str, index: dict, kernelbench: bool) -> Job:
    m = SAMPLE_NAME.match(name)
    if kernelbench:
        if not m:
            raise UsageError(f"{path}: not named as KernelBench names its samples "
                             "(level_L_problem_P_sample_S_kernel.py)")
        key = (int(m.group(1)), int(m.group(2)))
        if key not in index:
            raise UsageError(f"{path}: no level {key[0]} problem {key[1]} under --problems")
        return Job(name[:-len("_kernel.py")], index[key], path, where=path)
    stem = rel_dir.split(os.sep)[0] if rel_dir != "." else None
    if stem not in index:
        raise UsageError(f"{path}: expected under a folder named after its problem file "
                         f"(one of {', '.join(sorted(index)[:5])}{', ...' if len(index) > 5 else ''})")
    return Job(f"{rel_dir}/{name[:-3]}", index[stem], path, where=path)
