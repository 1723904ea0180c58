"""A GPU MODE `task.yml`, read for what kernelvet needs of it: the `files` a task is run with
(name -> source, relative to the task directory), and its `tests` and `benchmarks` (each a flow
mapping of keyword arguments for `generate_input`).

The subset of YAML those files are written in, without a YAML library: top-level `key:` lines,
list items `- {...}` (one flow mapping a line) under them, comments, and block scalars
(`description: |`), which are skipped. Anything else under `files`, `tests` or `benchmarks` is
a mistake reported with its line, never guessed at.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

from ..errors import UsageError

SECTIONS = ("files", "tests", "benchmarks")
_TOP = re.compile(r"^([A-Za-z_][\w-]*)\s*:(.*)$")
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_][\w-]*)\s*:")
_WORDS = {"True": "true", "False": "false", "true": "true", "false": "false", "yes": "true", "no": "false",
          "null": "null", "None": "null", "~": "null"}


@dataclasses.dataclass(frozen=True)
class TaskFile:
    path: str
    files: tuple[tuple[str, str], ...]   # (name, source) as listed: "@SUBMISSION@" is the candidate
    tests: tuple[dict, ...]
    benchmarks: tuple[dict, ...]
    main: str | None                     # config.main: the task's own runner (eval.py), not a module of it


def read(path: str) -> TaskFile:
    from .kernelbench import read_source
    text = read_source(path, "task")
    found: dict[str, list] = {name: [] for name in SECTIONS}
    section, main, in_config = None, None, False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        top = _TOP.match(line)
        if top and not raw[:1].isspace():
            section = top.group(1) if top.group(1) in SECTIONS else None
            in_config = top.group(1) == "config"
            continue
        if in_config and line.strip().startswith("main:"):
            main = _scalar(line.strip()[len("main:"):].strip())
        if section is None:
            continue   # a block scalar, a nested mapping: nothing kernelvet reads
        item = line.strip()
        if not item.startswith("-"):
            raise UsageError(f"{path}:{lineno}: {section}: expected a list item `- {{...}}`, got {item[:60]!r}")
        found[section].append(_flow_map(item[1:].strip(), path, lineno, section))
    files = tuple((str(f.get("name")), str(f.get("source"))) for f in found["files"])
    for (name, source), f in zip(files, found["files"]):
        if not isinstance(f.get("name"), str) or not isinstance(f.get("source"), str):
            raise UsageError(f"{path}: files: each entry needs a \"name\" and a \"source\", got {f}")
    return TaskFile(os.path.abspath(path), files, tuple(found["tests"]), tuple(found["benchmarks"]), main)


def _strip_comment(line: str) -> str:
    """The line up to a `#` that is outside quotes (YAML comments follow a space or start the line)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _flow_map(text: str, path: str, lineno: int, section: str) -> dict:
    """`{"size": 127, seed: 4242, "nomask": True}` as a dict: bare keys quoted, YAML's words
    for booleans and null made JSON's, then parsed as JSON."""
    if not (text.startswith("{") and text.endswith("}")):
        raise UsageError(f"{path}:{lineno}: {section}: expected a flow mapping {{...}} on one line, got {text[:60]!r}")
    as_json = _BARE_KEY.sub(lambda m: f'{m.group(1)}"{m.group(2)}":', text)
    as_json = re.sub(r"(?<![\w\"'.])(True|False|true|false|yes|no|null|None|~)(?![\w\"'])",
                     lambda m: _WORDS[m.group(1)], as_json).replace("'", '"')
    try:
        value = json.loads(as_json)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{lineno}: {section}: cannot read {text[:60]!r}: {exc.msg}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}:{lineno}: {section}: expected a mapping, got {text[:60]!r}")
    return value


def _scalar(text: str) -> str:
    return text.strip().strip("\"'")
