"""A GPU MODE task's data, as the input sets kernelvet draws and ships: `generate_input` returns
one object (a tensor, a tuple of tensors, a tuple holding dicts of weights and a dict of config
values); its tensors and numbers are the input set, in order, and a skeleton (JSON, no values)
says how to put them back together. The judge, the reference in the worker and the candidate's
call adapter all rebuild the data from the same skeleton and the very tensors of the set, so the
checks that paint, overwrite or compare inputs see what `custom_kernel(data)` sees.

Also the two things a worker needs to run a GPU MODE candidate: the task's own modules made
importable (`from task import input_t` in every submission), and the call `custom_kernel(data)`.
Imports torch only: the worker loads it."""

from __future__ import annotations

import dataclasses
import functools
import importlib.abc
import importlib.util
import sys

import torch

from ..errors import UsageError

MAX_DEPTH = 6
_NUMBERS = (bool, int, float)


def flatten(data, where: str) -> tuple[object, list]:
    """(skeleton, leaves) of `data`: leaves are its tensors and numbers, in order; strings and None
    stay in the skeleton (they are structure, e.g. a mode name, not values)."""
    leaves: list = []

    def walk(x, depth: int, at: str):
        if isinstance(x, torch.Tensor) or type(x) in _NUMBERS:
            leaves.append(x)
            return {"t": len(leaves) - 1}
        if x is None or isinstance(x, str):
            return {"v": x}
        if depth >= MAX_DEPTH:
            raise UsageError(f"{where}: generate_input() returned data nested deeper than {MAX_DEPTH} at data{at}")
        if isinstance(x, (tuple, list)):   # a named tuple is rebuilt as a plain one
            return {"list" if isinstance(x, list) else "tuple":
                    [walk(v, depth + 1, f"{at}[{i}]") for i, v in enumerate(x)]}
        if isinstance(x, dict) and all(isinstance(k, str) for k in x):
            return {"dict": [[k, walk(v, depth + 1, f"{at}[{k!r}]")] for k, v in x.items()]}
        raise UsageError(f"{where}: generate_input() returned {_kind(x)} at data{at}; data must be tensors, "
                         "numbers, strings, None, or tuples, lists and dicts (string keys) of those")

    skeleton = walk(data, 0, "")
    if not any(isinstance(x, torch.Tensor) for x in leaves):
        raise UsageError(f"{where}: generate_input() returned no tensor; there is nothing to compute on")
    return skeleton, leaves


def rebuild(skeleton, leaves):
    """The data `flatten` took apart, around these leaves (the same objects, not copies)."""
    (kind, body), = skeleton.items()
    if kind == "t":
        return leaves[body]
    if kind == "v":
        return body
    if kind == "dict":
        return {k: rebuild(v, leaves) for k, v in body}
    items = [rebuild(v, leaves) for v in body]
    return tuple(items) if kind == "tuple" else items


def _kind(x) -> str:
    name = type(x).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


class TaskFinder(importlib.abc.MetaPathFinder):
    """Imports of the task's own modules (`task`, `utils`, `reference`) resolved to its files, as
    GPU MODE's runner lays them side by side; any other name is left to the usual finders."""

    def __init__(self, files: dict[str, str]):
        self.files = dict(files)

    def find_spec(self, name, path=None, target=None):
        source = self.files.get(name)
        return importlib.util.spec_from_file_location(name, source) if source else None


@dataclasses.dataclass(frozen=True)
class CandidateCall:
    """How a worker runs a GPU MODE candidate: the task's modules importable, then
    `custom_kernel(data)` with the data rebuilt from the input set it is called with."""
    files: dict
    skeleton: object

    def importable(self) -> None:
        """For the rest of this process (a worker's, one candidate): its modules are the task's."""
        for name in self.files:
            sys.modules.pop(name, None)
        sys.meta_path.insert(0, TaskFinder(self.files))

    def wrap(self, fn):
        skeleton = self.skeleton

        @functools.wraps(fn)
        def call(*leaves):
            return fn(rebuild(skeleton, leaves))
        return call


def candidate_call(spec: dict) -> CandidateCall | None:
    """The call adapter a problem's spec asks for (None: the candidate is called with the set's values)."""
    if spec.get("kind") != "gpumode":
        return None
    return CandidateCall(dict(spec["files"]), spec["skeleton"])
