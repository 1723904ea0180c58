"""Small copies of the KernelBench problems, for a pre-flight of the sweep on a CPU.

    python bench/kernelbench_small.py [--kernelbench .kernelbench/KernelBench] [--out .kernelbench/small]
        [--levels 1 2 3] [--set-kib 512] [--gflop 0.2]
    python bench/kernelbench_sweep.py --kernelbench .kernelbench/small --device cpu --results DIR

A problem's sizes are its module-level integer constants (`batch_size = 4096`, `dim = 393216`,
`layer_sizes = [400, 800]`, `N = 2048 * 2`). Each copy keeps the problem's code and halves the largest of those
(that began above SMALLEST, down to FLOOR) until one input set, the reference's outputs and its weights take at most
--set-kib and its forward at most --gflop, by one run on the meta device (shapes only) with
torch's FLOP counter. A halving after which the meta run fails (a head count that no longer
divides, a classifier sized for 224 x 224 images) is undone and that constant kept. What could
not be brought under the budget is copied as small as it went, and listed.

The copies answer whether every problem loads and vets (the three candidates of the sweep, the
verdicts, the exits 2 and 3) at a CPU's pace; they are no substitute for the problems' own sizes,
which only a device holds. `sizes.json` in --out says what each copy changed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # its siblings, by name

import kernelbench_sweep  # noqa: E402

SMALLEST = 8           # a constant that begins at or below this is a count, an axis or a kernel size: kept
FLOOR = 2              # and one above it is halved down to this at most
MAX_HALVINGS = 400


def size_constants(tree: ast.Module) -> dict[str, ast.Assign]:
    """Module-level assignments of integers (`N = 2048 * 2`, `a = b = 256`, `shape = (4096,)`), by
    their first name (the last assignment wins); `d, h, w = 16, 32, 32` is split into three first."""
    tree.body = [part for node in tree.body for part in _unpacked(node)]
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets)
                and _ints(node.value) is not None):
            found[node.targets[0].id] = node
    return found


def _unpacked(node) -> list:
    """`a, b = 1, 2` as `a = 1` and `b = 2`; any other statement as it is."""
    if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Tuple) and len(node.targets[0].elts) == len(node.value.elts)
            and all(isinstance(t, ast.Name) for t in node.targets[0].elts)):
        return [ast.fix_missing_locations(ast.copy_location(ast.Assign(targets=[t], value=v), node))
                for t, v in zip(node.targets[0].elts, node.value.elts)]
    return [node]


def _ints(value) -> list[int] | None:
    """The integers an assignment's value spells: one, or a list or tuple of them; None otherwise."""
    if isinstance(value, (ast.List, ast.Tuple)):
        items = [_int(e) for e in value.elts]
        return items if items and None not in items else None
    one = _int(value)
    return None if one is None else [one]


def _int(node) -> int | None:
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Pow, ast.FloorDiv)):
        a, b = _int(node.left), _int(node.right)
        if a is None or b is None:
            return None
        return {ast.Mult: a * b, ast.Add: a + b, ast.Pow: a ** b if b < 64 else None,
                ast.FloorDiv: a // b if b else None}[type(node.op)]
    return None


def _set_ints(node: ast.Assign, values: list[int]) -> None:
    if isinstance(node.value, (ast.List, ast.Tuple)):
        node.value = type(node.value)(elts=[ast.Constant(v) for v in values], ctx=ast.Load())
    else:
        node.value = ast.Constant(values[0])


def _halved(now: list[int], first: list[int]) -> list[int]:
    """Each entry that began above SMALLEST, halved down to FLOOR at least."""
    return [max(v // 2, FLOOR) if f > SMALLEST else v for v, f in zip(now, first)]


def measure(source: str, path: str) -> dict:
    """Bytes of one input set, of the outputs and of the weights, and the forward's FLOPs, by a run
    on the meta device; raises what the problem raises."""
    namespace = {"__name__": "kernelbench_small_problem", "__file__": path}
    with torch.device("meta"), torch.no_grad():
        exec(compile(source, path, "exec"), namespace)   # noqa: S102 - the problem's own code, shapes only
        torch.manual_seed(0)
        model = namespace["Model"](*namespace["get_init_inputs"]())
        inputs = namespace["get_inputs"]()
        counter = FlopCounterMode(display=False)
        with counter:
            out = model(*inputs)
    weights = sum(t.numel() * t.element_size() for t in
                  [*model.parameters(), *model.buffers()]) if isinstance(model, torch.nn.Module) else 0
    return {"set_bytes": _bytes(inputs), "out_bytes": _bytes(out), "weight_bytes": weights,
            "flops": counter.get_total_flops()}


def _bytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_bytes(v) for v in x)
    return 0


def shrink(path: str, set_bytes: int, flops: float) -> dict:
    """The smallest copy of the problem at `path` the halvings reach within the budget: its source,
    its sizes, what changed and whether it fits."""
    with open(path, encoding="utf-8") as fh:
        original = fh.read()
    tree = ast.parse(original)
    consts = size_constants(tree)
    values = {name: _ints(node.value) for name, node in consts.items()}
    first = dict(values)
    kept: set[str] = set()
    now = measure(original, path)
    for _ in range(MAX_HALVINGS):
        if _fits(now, set_bytes, flops):
            break
        name = max((n for n in values if n not in kept and _halved(values[n], first[n]) != values[n]),
                   key=lambda n: max(values[n]), default=None)
        if name is None:
            break
        # alone, then with every constant of the same value (a shape spelled twice: `batch_size`
        # and `input_shape = (batch_size's value,)` must stay equal for a broadcast)
        twins = [n for n in values if n not in kept and values[n] == values[name]]
        for group in ([name], twins) if len(twins) > 1 else ([name],):
            before = {n: values[n] for n in group}
            for n in group:
                values[n] = _halved(before[n], first[n])
                _set_ints(consts[n], values[n])
            try:
                now = measure(ast.unparse(tree), path)
                break
            except Exception:  # noqa: BLE001 - the problem's own shape rules: undone
                for n in group:
                    values[n] = before[n]
                    _set_ints(consts[n], before[n])
        else:
            kept.add(name)   # no halving of it keeps the problem whole
    changed = {n: {"from": first[n], "to": values[n]} for n in values if values[n] != first[n]}
    header = ("# A small copy of a KernelBench problem, for a CPU pre-flight (bench/kernelbench_small.py): "
              + (", ".join(f"{n} {c['from']} -> {c['to']}" for n, c in changed.items()) or "sizes unchanged") + "\n")
    return {"source": header + ast.unparse(tree) + "\n", "changed": changed, "kept": sorted(kept),
            "fits": _fits(now, set_bytes, flops), **now}


def _fits(m: dict, set_bytes: int, flops: float) -> bool:
    return m["set_bytes"] + m["out_bytes"] + m["weight_bytes"] <= set_bytes and m["flops"] <= flops


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench", default=kernelbench_sweep.DEFAULT_KERNELBENCH)
    ap.add_argument("--out", default=os.path.join(".kernelbench", "small"))
    ap.add_argument("--levels", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--set-kib", type=float, default=1024.0, help="inputs + outputs + weights, at most (KiB)")
    ap.add_argument("--gflop", type=float, default=0.3, help="the forward's FLOPs, at most (GFLOP)")
    args = ap.parse_args(argv)
    summary, over, failed = {}, [], []
    for level, number, path in kernelbench_sweep.problems(args.kernelbench, args.levels, None):
        name = os.path.basename(path)
        folder = os.path.join(args.out, f"level{level}")
        os.makedirs(folder, exist_ok=True)
        try:
            copy = shrink(path, int(args.set_kib * 1024), args.gflop * 1e9)
        except Exception as exc:  # noqa: BLE001 - the problem fails on the meta device: copied as it is
            failed.append(f"level{level}/{name}: {type(exc).__name__}: {str(exc)[:160]}")
            with open(path, encoding="utf-8") as fh:
                copy = {"source": fh.read(), "error": failed[-1]}
        with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
            fh.write(copy.pop("source"))
        summary[f"level{level}/{name}"] = copy
        if copy.get("fits") is False:
            over.append(f"level{level}/{name}")
    with open(os.path.join(args.out, "sizes.json"), "w") as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
    print(f"{len(summary)} problems copied into {args.out}; {len(over)} over the budget, "
          f"{len(failed)} not measurable on the meta device")
    for line in over:
        print(f"  over: {line} ({summary[line]['set_bytes'] + summary[line]['out_bytes'] + summary[line]['weight_bytes']} "
              f"bytes, {summary[line]['flops'] / 1e9:.2f} GFLOP)")
    for line in failed:
        print(f"  not measured: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
