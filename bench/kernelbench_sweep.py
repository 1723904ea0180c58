"""KernelBench sweep: three generated candidates per problem through `kernelvet batch`, and a table.

    python bench/kernelbench_sweep.py --results bench/results/DATE-h200-sweep --device cuda
    python bench/kernelbench_sweep.py --levels 1 --range 1-50 --results ...   # a part of the sweep

For every problem of the chosen levels (and number ranges) of a KernelBench folder, three
candidates are generated into a git-ignored work folder:
  ref          the problem's own Model as the candidate (`class ModelNew(Model): pass`): must be rejected
  ref-allowed  the same, vetted with `--allow library-call`: must pass
  zeros        zeros of the reference's output shape and dtype, with `--allow library-call`: must be rejected
The output shape comes from one run of the reference on the meta device (no arithmetic, no
memory), or, where an op has no meta kernel, one real run (on CUDA when present).
The jobs go through one `kernelvet batch` run, resumable: the same --results folder continues
where it stopped. A sweep splits over runs by level and range: parts run into one folder make
one table of every problem covered so far; parts run apart (other machines) are joined with
`--merge PART... --results ALL`. The results folder gets results.jsonl (the batch's records),
problems.json (the problems covered and the commands that ran), sweep.json (counts, per-problem
verdicts and vet times, every exit 2 or 3 with its reason, the commands) and sweep.md (the same
as markdown tables).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_KERNELBENCH = os.path.join(".kernelbench", "KernelBench")
DEFAULT_WORK = os.path.join(".kernelbench", "sweep")          # git-ignored, as the problems are
KINDS = ("ref", "ref-allowed", "zeros")
EXPECTED = {"ref": "reject", "ref-allowed": "pass", "zeros": "reject"}
ALLOW = {"ref": [], "ref-allowed": ["library-call"], "zeros": ["library-call"]}
_PROBLEM = re.compile(r"^(\d+)_(.*)\.py$")


# --------------------------------------------------------------------------- problems


def parse_ranges(text: str | None) -> list[tuple[int, int]] | None:
    """"1-20,25,30-" -> [(1, 20), (25, 25), (30, inf)]; None: every problem."""
    if not text:
        return None
    out = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            out.append((int(lo), int(hi) if hi else (10 ** 9 if dash else int(lo))))
        except ValueError:
            raise SystemExit(f"--range {text!r}: expected numbers and ranges such as 1-20,25") from None
    return out


def problems(kernelbench: str, levels: list[int], ranges) -> list[tuple[int, int, str]]:
    """(level, number, path) of every chosen problem file, in order: by level, then in the order
    of the first range each falls in ("96,19,20" runs 96 first), then by number."""
    found = []
    for level in levels:
        folder = os.path.join(kernelbench, f"level{level}")
        if not os.path.isdir(folder):
            raise SystemExit(f"{folder}: no such folder (is --kernelbench a KernelBench tree?)")
        for name in os.listdir(folder):
            m = _PROBLEM.match(name)
            first = _first_range(int(m.group(1)), ranges) if m else None
            if first is not None:
                found.append((level, first, int(m.group(1)), os.path.join(folder, name)))
    return [(level, number, path) for level, _, number, path in sorted(found)]


def _first_range(number: int, ranges) -> int | None:
    """The index of the first of `ranges` that holds `number` (0 for every problem; None: none)."""
    if ranges is None:
        return 0
    return next((i for i, (lo, hi) in enumerate(ranges) if lo <= number <= hi), None)


def _load(path: str):
    spec = importlib.util.spec_from_file_location(f"sweep_problem_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def output_spec(path: str) -> dict:
    """The reference's output structure: {"tensor": [shape], "dtype"} (or a list of them, or
    {"value": x}), from one run on the meta device, else one real run."""
    import torch
    try:
        mod = _load(path)
    except Exception as exc:  # noqa: BLE001 - a problem that does not import (a module it needs is absent)
        return {"output": None, "how": None, "error": f"import: {type(exc).__name__}: {str(exc)[:200]}"}
    errors = []
    for device in ("meta", "cuda" if torch.cuda.is_available() else "cpu"):
        try:
            with torch.device(device), torch.no_grad():
                torch.manual_seed(0)
                model = mod.Model(*mod.get_init_inputs())
                inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
                if isinstance(model, torch.nn.Module):
                    model = model.to(device)
                return {"output": _structure(model(*inputs)), "how": device}
        except Exception as exc:  # noqa: BLE001 - no meta kernel for some op: the real run next
            errors.append(f"{device}: {type(exc).__name__}: {str(exc)[:200]}")
    return {"output": None, "how": None, "error": "; ".join(errors)}


def _structure(out):
    import torch
    if isinstance(out, torch.Tensor):
        return {"tensor": list(out.shape), "dtype": str(out.dtype).removeprefix("torch.")}
    if isinstance(out, (tuple, list)):
        return [_structure(x) for x in out]
    return {"value": out if isinstance(out, (bool, int, float)) else None}


# --------------------------------------------------------------------------- candidates


def reference_candidate(problem_source: str) -> str:
    return (problem_source.rstrip() + "\n\n\n# The reference offered as its own kernel.\n"
            "class ModelNew(Model):\n    pass\n")


def zeros_candidate(structure) -> str:
    return f'''"""Zeros of the reference's output shape and dtype: computes nothing."""

import torch
from torch import nn

OUTPUT = {json.dumps(structure)}


def _zeros(spec, device):
    if isinstance(spec, list):
        return tuple(_zeros(s, device) for s in spec)
    if "tensor" in spec:
        return torch.zeros(spec["tensor"], dtype=getattr(torch, spec["dtype"]), device=device)
    return spec["value"]


class ModelNew(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, *args):
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        return _zeros(OUTPUT, device)
'''


def job_id(level: int, number: int, kind: str) -> str:
    return f"level{level}_{number:03d}_{kind}"


def generate(chosen, work: str, known: dict | None = None) -> tuple[str, dict]:
    """The candidates and the manifest under `work`; (manifest path, problem info by (level, number)).
    `known`: info an earlier run recorded (problems.json), whose output shapes are taken as they are
    where the problem's source is the same (a meta run of a 6-layer LSTM takes 18 s on a CPU)."""
    info = {}
    lines = []
    for level, number, path in chosen:
        folder = os.path.join(work, "candidates", f"level{level}")
        os.makedirs(folder, exist_ok=True)
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        sha = hashlib.sha256(source.encode()).hexdigest()
        seen = (known or {}).get((level, number)) or {}
        spec = ({"output": seen["output"], "how": seen.get("shape_from"), "error": seen.get("shape_error")}
                if seen.get("sha256") == sha else output_spec(path))
        info[(level, number)] = {"level": level, "number": number, "name": os.path.basename(path)[:-3],
                                 "file": f"level{level}/{os.path.basename(path)}", "output": spec["output"],
                                 "shape_from": spec["how"], "shape_error": spec.get("error"), "sha256": sha}
        files = {"ref": reference_candidate(source)}
        if spec["output"] is not None:
            files["zeros"] = zeros_candidate(spec["output"])
        for kind in KINDS:
            text = files.get("ref" if kind == "ref-allowed" else kind)
            if text is None:
                continue
            cand = os.path.join(folder, f"{number:03d}_{'ref' if kind == 'ref-allowed' else kind}.py")
            with open(cand, "w", encoding="utf-8") as fh:
                fh.write(text)
            lines.append({"id": job_id(level, number, kind), "problem": os.path.abspath(path),
                          "candidate": os.path.abspath(cand), "allow": ALLOW[kind]})
    import torch
    if torch.cuda.is_initialized():   # a real run's freed blocks go back to the device the batch measures on
        torch.cuda.empty_cache()
    manifest = os.path.join(work, "manifest.jsonl")
    with open(manifest, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    return manifest, info


# --------------------------------------------------------------------------- the run and the table


def run_batch(manifest: str, out: str, batch_args: list[str]) -> int:
    cmd = [sys.executable, "-m", "kernelvet", "batch", "--manifest", manifest, "--out", out, "--resume", *batch_args]
    print("+ " + shlex.join(cmd), flush=True)
    return subprocess.call(cmd)


def _relative(text, records) -> str | None:
    """A reason as the tables show it: the folders of the machine it ran on left out (the problem
    and candidate files named by their place in the KernelBench tree and the work folder)."""
    if text is None:
        return None
    for r in records:
        for path, short in ((r.problem, "/".join(r.problem.split(os.sep)[-2:])),
                            (r.candidate, "/".join(r.candidate.split(os.sep)[-2:]))):
            text = text.replace(path, short)
    return text


def tabulate(records, info: dict) -> dict:
    """Counts by kind and verdict, one row per problem, the exits 2 and 3 with their reasons."""
    by_id = {r.id: r for r in records}
    counts = {k: collections.Counter() for k in KINDS}
    rows, exits, unexpected, missing = [], [], [], []
    for (level, number), p in sorted(info.items()):
        row = {"level": level, "number": number, "problem": p["name"], "shape_from": p["shape_from"]}
        ok = True
        for kind in KINDS:
            r = by_id.get(job_id(level, number, kind))
            if r is None:
                missing.append(job_id(level, number, kind))
                row[kind] = None
                ok = False
                continue
            counts[kind][r.verdict] += 1
            row[kind] = {"verdict": r.verdict, "exit": r.exit_code, "failed": [c for c, _ in r.failed],
                         "vet_s": round(r.vet_s, 3), "phases_s": r.phases_s,
                         "speedup": (r.timing or {}).get("speedup"), "error": _relative(r.error, [r])}
            if r.exit_code in (2, 3):
                exits.append({"id": r.id, "exit": r.exit_code, "fault": r.fault, "reason": _relative(r.error, [r])})
            if r.verdict != EXPECTED[kind]:
                ok = False
        if p["output"] is None:
            ok = False
            exits.append({"id": job_id(level, number, "zeros"), "exit": None, "fault": "sweep",
                          "reason": f"no zeros candidate: the output shape is unknown ({p['shape_error']})"})
        row["as_expected"] = ok
        row["vet_s"] = round(sum((row[k] or {}).get("vet_s", 0.0) for k in KINDS), 3)
        if not ok:
            unexpected.append(f"level{level}_{number:03d}")
        rows.append(row)
    return {"counts": {k: dict(v) for k, v in counts.items()}, "problems": len(rows),
            "as_expected": sum(r["as_expected"] for r in rows), "rows": rows, "exits": exits,
            "unexpected": unexpected, "missing": missing}


def _cell(c) -> str:
    if c is None:
        return "-"
    text = c["verdict"] + (f" ({', '.join(c['failed'])})" if c["failed"] else "")
    return text + (f" exit {c['exit']}" if c["exit"] in (2, 3) else "")


def markdown(table: dict, command: str) -> str:
    out = [f"`{command}`", "",
           f"{table['as_expected']} of {table['problems']} problems as expected "
           "(ref rejected, ref with --allow library-call passed, zeros rejected).", "",
           "| candidate | expected | " + " | ".join(("pass", "reject", "invalid", "error")) + " |",
           "|---|---|---|---|---|---|"]
    for kind in KINDS:
        c = table["counts"][kind]
        out.append(f"| {kind} | {EXPECTED[kind]} | " + " | ".join(str(c.get(v, 0))
                                                                   for v in ("pass", "reject", "invalid", "error")) + " |")
    out += ["", "| level | problem | ref | ref-allowed | zeros | vet s (ref / allowed / zeros) | ok |",
            "|---|---|---|---|---|---|---|"]
    for r in table["rows"]:
        times = " / ".join(f"{(r[k] or {}).get('vet_s', 0):.1f}" if r[k] else "-" for k in KINDS)
        out.append(f"| {r['level']} | {r['number']} {r['problem']} | {_cell(r['ref'])} | {_cell(r['ref-allowed'])} "
                   f"| {_cell(r['zeros'])} | {times} | {'yes' if r['as_expected'] else '**no**'} |")
    if table["exits"]:
        out += ["", "| job | exit | whose | reason |", "|---|---|---|---|"]
        for e in table["exits"]:
            reason = (e["reason"] or "").replace("|", "\\|").replace("\n", " ")[:400]
            out.append(f"| {e['id']} | {e['exit']} | {e['fault']} | {reason} |")
    if table["missing"]:
        out += ["", f"not run yet ({len(table['missing'])}): " + ", ".join(table["missing"][:50])]
    return "\n".join(out) + "\n"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Arguments after -- go to `kernelvet batch` (e.g. -- --sandbox off --audit never).")
    ap.add_argument("--kernelbench", default=DEFAULT_KERNELBENCH,
                    help=f"the KernelBench problem tree (level1/, level2/, ...; default {DEFAULT_KERNELBENCH})")
    ap.add_argument("--levels", default="1,2,3", help="comma-separated levels (default 1,2,3)")
    ap.add_argument("--range", help="problem numbers within each level, e.g. 1-20,25 (default all), "
                                    "run in the order named (96,19: 96 first)")
    ap.add_argument("--results", required=True, help="folder for results.jsonl, sweep.json and sweep.md")
    ap.add_argument("--work", default=DEFAULT_WORK,
                    help=f"git-ignored folder for the generated candidates and manifest (default {DEFAULT_WORK})")
    ap.add_argument("--device", default="auto", help="kernelvet batch --device (default auto)")
    ap.add_argument("--timeout", default="300", help="kernelvet batch --timeout per candidate (default 300)")
    ap.add_argument("--table-only", action="store_true", help="rebuild the tables from results.jsonl, run nothing")
    ap.add_argument("--merge", nargs="+", metavar="FOLDER",
                    help="merge these results folders (parts run apart) into --results; run nothing")
    return ap


def _key(level_number) -> str:
    return f"{level_number[0]}/{level_number[1]}"


def load_parts(folder: str) -> tuple[dict, list[str]]:
    """What earlier runs into `folder` recorded: problem info by (level, number), and their commands."""
    path = os.path.join(folder, "problems.json")
    if not os.path.exists(path):
        return {}, []
    with open(path) as fh:
        saved = json.load(fh)
    info = {tuple(int(x) for x in k.split("/")): v for k, v in saved["problems"].items()}
    return info, list(saved.get("commands", []))


def save_info(folder: str, info: dict, commands: list[str]) -> None:
    """problems.json: the problems' info by (level, number), and the commands that ran into `folder`."""
    with open(os.path.join(folder, "problems.json"), "w") as fh:
        json.dump({"problems": {_key(k): v for k, v in sorted(info.items())}, "commands": commands}, fh,
                  indent=2, sort_keys=True)


def write_tables(folder: str, records, info: dict, commands: list[str], batch_exit: int) -> dict:
    """problems.json (what the tables are made of), sweep.json and sweep.md, for every problem any
    run into `folder` covered."""
    save_info(folder, info, commands)
    table = tabulate(records, info)
    table.update({"commands": commands, "batch_exit": batch_exit, "date": time.strftime("%Y-%m-%d")})
    with open(os.path.join(folder, "sweep.json"), "w") as fh:
        json.dump(table, fh, indent=2, sort_keys=True, default=str)
    with open(os.path.join(folder, "sweep.md"), "w") as fh:
        fh.write(markdown(table, "`; `".join(commands)))
    print(f"{table['as_expected']} of {table['problems']} problems as expected; {len(table['exits'])} exits 2/3; "
          f"tables in {folder}", flush=True)
    return table


def merge(parts: list[str], folder: str) -> dict:
    """Several results folders (parts of one sweep, run apart) as one: their records (a later
    part's record of an id wins) into folder/results.jsonl, and the tables of the union."""
    from kernelvet.batch.results import read_records
    info, commands, records = {}, [], {}
    for part in parts:
        part_info, part_commands = load_parts(part)
        if not part_info:
            raise SystemExit(f"{part}: no problems.json (not a results folder of this script)")
        info.update(part_info)
        commands += [c for c in part_commands if c not in commands]   # a resumed part carries its first's
        for r in read_records(os.path.join(part, "results.jsonl"))[0]:
            records[r.id] = r
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "results.jsonl"), "wb") as fh:
        fh.writelines(r.line() for r in records.values())
    return write_tables(folder, list(records.values()), info, commands, 0)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = _parser().parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from kernelvet.batch.results import read_records
    command = shlex.join(["python", "bench/kernelbench_sweep.py", *argv])
    if args.merge:
        table = merge(args.merge, args.results)
        return 0 if not table["unexpected"] else 1
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--levels {args.levels!r}: expected comma-separated numbers") from None
    chosen = problems(args.kernelbench, levels, parse_ranges(args.range))
    if not chosen:
        raise SystemExit("no problems chosen")
    os.makedirs(args.results, exist_ok=True)
    work = os.path.join(args.work, "-".join(map(str, levels)) + (f"_{args.range}" if args.range else ""))
    t0 = time.monotonic()
    earlier, commands = load_parts(args.results)   # parts run into this folder before: one table for all
    commands += [command] if command not in commands else []
    manifest, info = generate(chosen, work, earlier)
    save_info(args.results, {**earlier, **info}, commands)   # before the run: a part cut short keeps it
    print(f"{len(chosen)} problems, {sum(1 for _ in open(manifest))} candidates in {work} "
          f"({time.monotonic() - t0:.1f} s)", flush=True)
    out = os.path.join(args.results, "results.jsonl")
    rc = 0 if args.table_only else run_batch(manifest, out, ["--device", args.device, "--timeout", args.timeout, *extra])
    records, _ = read_records(out) if os.path.exists(out) else ([], 0)
    table = write_tables(args.results, records, {**earlier, **info}, commands, rc)
    return rc if rc else (0 if not table["unexpected"] else 1)


if __name__ == "__main__":
    sys.exit(main())
