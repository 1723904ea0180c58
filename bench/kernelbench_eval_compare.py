"""KernelBench's own evaluator beside `kernelvet batch`, on the same candidates, per problem.

    python bench/kernelbench_sweep.py --results R --levels 1 --range 1-20 --device cuda
    python bench/kernelbench_eval_compare.py --sweep R --out R/compare    # CUDA only

For every record of a sweep's results.jsonl (the candidates bench/kernelbench_sweep.py generated),
KernelBench's `eval_kernel_against_ref` (imported at run time from a KernelBench checkout's
src/, default .kernelbench/src; never copied) evaluates the same candidate against the same
problem, one candidate per fresh process as KernelBench's own `eval_from_generations` does
(its defaults: 5 correctness trials, 100 timed trials). Recorded per candidate: KernelBench's
decision (compiled, correct), its runtimes, the seconds the call took and the seconds its
process took (start-up included), beside kernelvet's verdict and vet seconds (one warm judge
for the whole batch). compare.json and compare.md go to --out.

Modules KernelBench's files import but its evaluator never calls (requests, dotenv, openai,
litellm, tqdm; pydantic's BaseModel for its result type) are given stand-ins when they are not
installed; compare.json lists which.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SRC = os.path.join(".kernelbench", "src")
_UNUSED = ("requests", "dotenv", "openai", "litellm", "tqdm", "pydantic")


# --------------------------------------------------------------------------- one candidate (child process)


def _stand_ins() -> list[str]:
    """Stand-ins for the modules KernelBench imports but its evaluator does not use, where absent."""
    import copy
    import importlib.util
    made = []
    for name in _UNUSED:
        if importlib.util.find_spec(name) is not None:
            continue
        mod = types.ModuleType(name)
        if name == "dotenv":
            mod.load_dotenv = lambda *a, **k: False
        elif name == "openai":
            mod.OpenAI = type("OpenAI", (), {})
        elif name == "litellm":
            mod.completion = lambda *a, **k: None
        elif name == "tqdm":
            mod.tqdm = lambda it=None, *a, **k: it
        elif name == "pydantic":
            class BaseModel:
                def __init__(self, **kw):
                    for klass in reversed(type(self).__mro__):
                        for key in getattr(klass, "__annotations__", {}):
                            if hasattr(klass, key):
                                setattr(self, key, copy.deepcopy(getattr(klass, key)))
                    for key, value in kw.items():
                        setattr(self, key, value)

                def model_dump(self):
                    return dict(vars(self))

                dict = model_dump
            mod.BaseModel = BaseModel
        sys.modules[name] = mod
        made.append(name)
    return made


def evaluate_one(src: str, problem: str, candidate: str, correct_trials: int, perf_trials: int) -> dict:
    """KernelBench's evaluation of one candidate, in this process (CUDA device 0)."""
    t_import = time.monotonic()
    stood_in = _stand_ins()
    sys.path.insert(0, os.path.abspath(src))
    from kernelbench.eval import eval_kernel_against_ref
    import torch
    imported_s = time.monotonic() - t_import
    with open(problem, encoding="utf-8") as fh:
        ref_src = fh.read()
    with open(candidate, encoding="utf-8") as fh:
        cand_src = fh.read()
    t0 = time.monotonic()
    error = None
    with tempfile.TemporaryDirectory(prefix="kb-build-") as build:
        try:
            res = eval_kernel_against_ref(ref_src, cand_src, num_correct_trials=correct_trials,
                                          num_perf_trials=perf_trials, measure_performance=True,
                                          build_dir=build, device=torch.device("cuda", 0), backend="cuda")
        except Exception as exc:  # noqa: BLE001 - the evaluator's own failure is a result here
            res, error = None, f"{type(exc).__name__}: {exc}"[:500]
    out = {"eval_s": time.monotonic() - t0, "import_s": imported_s, "stand_ins": stood_in, "error": error}
    if res is not None:
        meta = getattr(res, "metadata", {}) or {}
        out.update({"compiled": bool(res.compiled), "correct": bool(res.correctness),
                    "runtime_us": res.runtime, "ref_runtime_us": getattr(res, "ref_runtime", -1.0),
                    "metadata": {k: str(v)[:300] for k, v in meta.items()}})
    return out


# --------------------------------------------------------------------------- the comparison (parent process)


def run_child(src: str, problem: str, candidate: str, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", problem, candidate, "--kernelbench-src", src,
           "--correct-trials", str(args.correct_trials), "--perf-trials", str(args.perf_trials)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.monotonic() - t0, "error": f"timed out after {args.timeout} s"}
    wall = time.monotonic() - t0
    last = proc.stdout.strip().splitlines()[-1:] if proc.stdout.strip() else []
    try:
        got = json.loads(last[0]) if last else {}
    except json.JSONDecodeError:
        got = {}
    if not got:
        got = {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-500:]}"}
    return {**got, "wall_s": wall}


def pair(records, kb: dict) -> list[dict]:
    """One row per candidate: kernelvet's verdict and seconds beside KernelBench's."""
    rows = []
    for r in records:
        k = kb.get(r.id, {})
        rows.append({"id": r.id, "problem": os.path.basename(r.problem), "kernelvet_verdict": r.verdict,
                     "kernelvet_failed": [c for c, _ in r.failed], "kernelvet_vet_s": round(r.vet_s, 3),
                     "kernelbench_correct": k.get("correct"), "kernelbench_compiled": k.get("compiled"),
                     "kernelbench_eval_s": k.get("eval_s"), "kernelbench_wall_s": k.get("wall_s"),
                     "kernelbench_error": k.get("error"), "kernelbench_runtime_us": k.get("runtime_us"),
                     "kernelbench_ref_runtime_us": k.get("ref_runtime_us")})
    return rows


# the report's phases, in the order a vet runs them; "total" is their whole
PHASES = ("problem", "reference", "import", "first-call", "checks", "audit", "probe", "timing", "judge-clock",
          "candidate", "findings", "finish", "total")


def where_time_goes(records) -> dict:
    """kernelvet's seconds a candidate, phase by phase (the batch records' phases_s): the mean over
    every candidate (a phase a vet did not reach counts 0) and the share of the mean total. Phases
    nest: "candidate" holds first-call to judge-clock; "problem" is the first vet of a problem's
    float64 references, draws and FLOP count (later vets share them)."""
    phased = [r.phases_s for r in records if r.phases_s]
    if not phased:
        return {}
    mean = {k: sum(p.get(k, 0.0) for p in phased) / len(phased) for k in PHASES}
    whole = mean["total"] or 1.0
    return {"candidates": len(phased), "mean_s": mean, "share": {k: v / whole for k, v in mean.items()},
            "worker_device_start_mean_s": sum(p.get("worker-device-start", 0.0) for p in phased) / len(phased)}


def summary(rows: list[dict]) -> dict:
    def med(key):
        xs = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        return statistics.median(xs) if xs else None

    def total(key):
        return sum(r[key] for r in rows if isinstance(r.get(key), (int, float)))

    kv, kb = total("kernelvet_vet_s"), total("kernelbench_wall_s")
    return {"candidates": len(rows), "kernelvet_median_s": med("kernelvet_vet_s"),
            "kernelbench_eval_median_s": med("kernelbench_eval_s"), "kernelbench_wall_median_s": med("kernelbench_wall_s"),
            "kernelvet_total_s": kv, "kernelbench_wall_total_s": kb,
            "kernelvet_per_hour": 3600 * len(rows) / kv if kv else None,
            "kernelbench_per_hour": 3600 * len(rows) / kb if kb else None,
            "kernelbench_passed": sum(1 for r in rows if r["kernelbench_correct"]),
            "kernelvet_passed": sum(1 for r in rows if r["kernelvet_verdict"] == "pass")}


def markdown(rows: list[dict], s: dict, command: str, phases: dict | None = None) -> str:
    def f(x, fmt="{:.2f}"):
        return "-" if x is None else fmt.format(x)
    ratio = (s["kernelvet_per_hour"] / s["kernelbench_per_hour"]
             if s["kernelvet_per_hour"] and s["kernelbench_per_hour"] else None)
    out = [f"`{command}`", "",
           f"{s['candidates']} candidates. kernelvet batch (one warm judge): median {f(s['kernelvet_median_s'])} s a "
           f"candidate, {f(s['kernelvet_per_hour'], '{:.0f}')}/hour; KernelBench eval_kernel_against_ref, a fresh "
           f"process each: median {f(s['kernelbench_wall_median_s'])} s ({f(s['kernelbench_eval_median_s'])} s in the "
           f"call), {f(s['kernelbench_per_hour'], '{:.0f}')}/hour. Passed: kernelvet {s['kernelvet_passed']}, "
           f"KernelBench {s['kernelbench_passed']}. Ratio of candidates per hour (kernelvet / KernelBench): "
           f"{f(ratio)}.", "",
           "| candidate | kernelvet | vet s | KernelBench correct | eval s | process s |", "|---|---|---|---|---|---|"]
    for r in rows:
        kv = r["kernelvet_verdict"] + (f" ({', '.join(r['kernelvet_failed'])})" if r["kernelvet_failed"] else "")
        kb = "-" if r["kernelbench_correct"] is None else ("yes" if r["kernelbench_correct"] else "no")
        if r["kernelbench_error"]:
            kb += f" ({str(r['kernelbench_error'])[:80]})"
        out.append(f"| {r['id']} | {kv} | {f(r['kernelvet_vet_s'])} | {kb} | {f(r['kernelbench_eval_s'])} "
                   f"| {f(r['kernelbench_wall_s'])} |")
    if phases:
        out += ["", f"Where kernelvet's time a candidate goes (mean of {phases['candidates']} vets; phases nest, "
                "see `where_time_goes`; the next worker's device start-up, "
                f"{phases['worker_device_start_mean_s']:.2f} s on average, mostly overlaps the vet before it):", "",
                "| phase | mean s | share of total |", "|---|---|---|"]
        out += [f"| {k} | {phases['mean_s'][k]:.2f} | {100 * phases['share'][k]:.0f}% |" for k in PHASES]
    return "\n".join(out) + "\n"


def write(out: str, command: str, records, kb: dict) -> str:
    """compare.json and compare.md for the candidates evaluated so far; the markdown."""
    rows = pair(records, kb)
    s, phases = summary(rows), where_time_goes(records)
    stand_ins = sorted({n for k in kb.values() for n in k.get("stand_ins", [])})
    with open(os.path.join(out, "compare.json"), "w") as fh:
        json.dump({"command": command, "summary": s, "rows": rows, "phases": phases, "stand_ins": stand_ins,
                   "date": time.strftime("%Y-%m-%d")}, fh, indent=2, sort_keys=True, default=str)
    text = markdown(rows, s, command, phases)
    with open(os.path.join(out, "compare.md"), "w") as fh:
        fh.write(text)
    return text


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweep", help="a bench/kernelbench_sweep.py results folder (its results.jsonl)")
    ap.add_argument("--out", help="folder for compare.json and compare.md (default: --sweep's)")
    ap.add_argument("--kernelbench-src", default=DEFAULT_SRC,
                    help=f"KernelBench's src/ folder, holding the kernelbench package (default {DEFAULT_SRC})")
    ap.add_argument("--correct-trials", type=int, default=5, help="KernelBench num_correct_trials (default 5)")
    ap.add_argument("--perf-trials", type=int, default=100, help="KernelBench num_perf_trials (default 100)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per KernelBench candidate (default 180)")
    ap.add_argument("--budget", type=float, default=0.0,
                    help="seconds after which no new KernelBench evaluation starts (default: none)")
    ap.add_argument("--only", help="comma-separated record ids (default: every record)")
    ap.add_argument("--one", nargs=2, metavar=("PROBLEM", "CANDIDATE"), help=argparse.SUPPRESS)
    return ap


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    if args.one:
        print(json.dumps(evaluate_one(args.kernelbench_src, *args.one, args.correct_trials, args.perf_trials),
                         default=str), flush=True)
        return 0
    if not args.sweep:
        raise SystemExit("--sweep RESULTS_FOLDER is required")
    if not os.path.isdir(os.path.join(args.kernelbench_src, "kernelbench")):
        raise SystemExit(f"--kernelbench-src {args.kernelbench_src}: no kernelbench package there")
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from kernelvet.batch.results import read_records
    records, _ = read_records(os.path.join(args.sweep, "results.jsonl"))
    if args.only:
        wanted = set(args.only.split(","))
        records = [r for r in records if r.id in wanted]
    command = shlex.join(["python", "bench/kernelbench_eval_compare.py", *argv])
    out = args.out or args.sweep
    os.makedirs(out, exist_ok=True)
    t0, kb = time.monotonic(), {}
    for i, r in enumerate(records, 1):
        if args.budget and time.monotonic() - t0 > args.budget:
            print(f"--budget of {args.budget:g} s spent: {len(records) - i + 1} candidates left out", flush=True)
            break
        kb[r.id] = run_child(args.kernelbench_src, r.problem, r.candidate, args)
        print(f"[{i}/{len(records)}] {r.id}: kernelvet {r.verdict} {r.vet_s:.2f} s; KernelBench "
              f"correct={kb[r.id].get('correct')} {kb[r.id].get('wall_s', 0):.2f} s", flush=True)
        # written after every candidate: a run stopped from outside keeps what it measured
        text = write(out, command, [x for x in records if x.id in kb], kb)
    print(text if kb else "no candidate evaluated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
