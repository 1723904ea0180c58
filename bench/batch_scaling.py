"""Does `kernelvet batch` scale over the devices of one host, and does its pool carry on when one fails?

    python bench/batch_scaling.py OUT --gpus 0,1                        # a host with two GPUs
    python bench/batch_scaling.py OUT --devices cpu,cpu --levels 1 --per-level 4   # the runs on CPU devices

One manifest of candidates: a KernelBench level-1/2 mix generated as the sweep generates it (the
reference as candidate, the same with library calls allowed, zeros of the output's shape: see
kernelbench_sweep.py) and the practice corpus's entries for the device, honest and cheating. Then:

  scaling   the whole manifest through `kernelvet batch` on the first device and on all of them,
            alternating (1, N, 1, N, ...: a drift of the host's pace affects both alike), each run
            into a results file of its own. Candidates per hour of each run, the ratio of the
            medians, whether the runs agree verdict for verdict, and where the time went: each
            device's busy share of the run, the start (until the first verdict), the tail (after the
            first device ran out of work).
  failover  the manifest on all devices, the last one made to fail once the first verdicts are in
            (CUDA: a process takes that GPU's free memory, so its workers cannot start and its
            judge's probe says the device no longer computes). Every candidate must have exactly one
            record; the failed device's jobs are vetted once more elsewhere, the reason in each
            record's `retried`.

OUT gets manifest.jsonl, runs/*.jsonl (the batch's records), scaling.json (each run's records,
what the table needs of them, and the derived table) and scaling.md. The generated candidates
hold the problems' source and go to the git-ignored .kernelbench/scaling/; a recorded OUT keeps
scaling.json and scaling.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(ROOT, "src"))

import kernelbench_sweep  # noqa: E402

from kernelvet import practice  # noqa: E402
from kernelvet.batch.results import read_records  # noqa: E402

RESULTS_VERSION = 1
HOG_HEADROOM = 256 << 20   # bytes the memory hog leaves free: a context cannot start in them


# --------------------------------------------------------------------------- the candidates


def kernelbench_mix(kernelbench: str, levels: list[int], per_level: int, work: str) -> list[dict]:
    """The sweep's three candidates for the first `per_level` problems of each level."""
    chosen = [p for level in levels for p in kernelbench_sweep.problems(kernelbench, [level], None)[:per_level]]
    manifest, _ = kernelbench_sweep.generate(chosen, work)
    with open(manifest, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def corpus_jobs(device_type: str) -> list[dict]:
    """Every practice entry that exists on the device, honest and cheating, attacks on the harness
    included (a pool must carry on past them); the ones known to hang keep their short timeout."""
    jobs = []
    for e in practice.entries(device_type):
        jobs.append({"id": f"corpus_{e.name}", "problem": e.problem_ref, "candidate": e.path,
                     "timeout": e.timeout})
    return jobs


def write_manifest(jobs: list[dict], path: str) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(j, sort_keys=True) + "\n" for j in jobs)
    return path


# --------------------------------------------------------------------------- the runs


def device_args(spec: dict, count: int | None = None) -> list[str]:
    """`--gpus 0,1` or `--devices cpu,cpu`, the first `count` of them."""
    names = spec["names"][:count] if count else spec["names"]
    return [spec["flag"], ",".join(names)]


def run(manifest: str, out: str, devices: list[str], extra: list[str], during=None) -> dict:
    """One `kernelvet batch` run into a fresh results file; `during(proc, out)` runs beside it."""
    if os.path.exists(out):
        os.remove(out)
    cmd = [sys.executable, "-m", "kernelvet", "batch", "--manifest", manifest, "--out", out, "--no-progress",
           *devices, *extra]
    print("+ " + shlex.join(cmd), flush=True)
    t0 = time.time()
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")})
    side = during(proc, out) if during else None
    code = proc.wait()
    t1 = time.time()
    records, _ = read_records(out) if os.path.exists(out) else ([], 0)
    return {"command": _portable(cmd, out), "exit": code, "started_at": t0, "ended_at": t1, "devices": devices,
            "records": [{k: r.to_json()[k] for k in KEPT} for r in records], "side": side}


# What a run's table needs of each record (its files are named by the manifest: the runs folder
# holds the records in full)
KEPT = ("id", "verdict", "failed", "vet_s", "finished_at", "slot", "retried", "error", "fault")


def _portable(cmd: list[str], out: str) -> str:
    """The command as a user types it: no folders of the machine it ran on (the results folder
    is OUT)."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(out)))   # OUT/runs/x.jsonl

    def word(c: str) -> str:
        if c == sys.executable:
            return "python"
        if os.path.isabs(c) and c.startswith(folder + os.sep):
            return "OUT" + c[len(folder):]
        return os.path.relpath(c, ROOT) if os.path.isabs(c) else c
    return shlex.join([word(c) for c in cmd])


def summarise(r: dict) -> dict:
    """What one run took: candidates per hour, and where its wall time went."""
    records = r["records"]
    wall = r["ended_at"] - r["started_at"]
    by_slot = collections.defaultdict(list)
    for rec in records:
        by_slot[rec.get("slot") or "-"].append(rec)
    busy = {s: sum(x["vet_s"] for x in recs) for s, recs in by_slot.items()}
    last = {s: max(x["finished_at"] for x in recs) for s, recs in by_slot.items()}
    first_done = min((x["finished_at"] for x in records), default=r["ended_at"])
    first_vet = min(records, key=lambda x: x["finished_at"])["vet_s"] if records else 0.0
    return {"devices": len(by_slot), "candidates": len(records), "wall_s": wall,
            "per_hour": 3600.0 * len(records) / wall if wall > 0 else 0.0,
            "busy_share": {s: b / wall for s, b in busy.items()} if wall > 0 else {},
            "start_s": max(first_done - first_vet - r["started_at"], 0.0),
            "tail_s": max(last.values()) - min(last.values()) if len(last) > 1 else 0.0,
            "verdicts": dict(collections.Counter(x["verdict"] for x in records))}


def agreement(runs: list[dict]) -> dict:
    """Verdicts per id across runs: the ids whose verdict differs between any two runs."""
    seen = collections.defaultdict(set)
    for r in runs:
        for rec in r["records"]:
            seen[rec["id"]].add(rec["verdict"])
    return {"ids": len(seen), "differ": sorted(i for i, v in seen.items() if len(v) > 1)}


def scaling(manifest: str, folder: str, spec: dict, rounds: int, extra: list[str]) -> dict:
    runs = {"one": [], "all": []}
    for k in range(rounds):
        for which, count in (("one", 1), ("all", None)):
            out = os.path.join(folder, "runs", f"scaling-{which}-{k}.jsonl")
            runs[which].append(run(manifest, out, device_args(spec, count), extra))
    one = [summarise(r) for r in runs["one"]]
    every = [summarise(r) for r in runs["all"]]
    ratio = (statistics.median(s["per_hour"] for s in every) / statistics.median(s["per_hour"] for s in one)
             if one and every and min(s["per_hour"] for s in one) > 0 else None)
    return {"runs": runs, "one": one, "all": every, "ratio": ratio, "agreement": agreement(runs["one"] + runs["all"])}


# --------------------------------------------------------------------------- failover


def hog(device_index: str):
    """A process that takes the free memory of one GPU and holds it until killed."""
    code = ("import sys, time, torch\n"
            "free, _ = torch.cuda.mem_get_info(0)\n"
            f"x = torch.empty(max(free - {HOG_HEADROOM}, 0), dtype=torch.uint8, device='cuda:0')\n"
            "print('held', x.numel(), flush=True)\n"
            "time.sleep(1e6)\n")
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "CUDA_VISIBLE_DEVICES": device_index},
                            stdout=subprocess.PIPE, text=True)


def fail_last_after_first_verdicts(spec: dict, first: int = 2):
    """`during` for a failover run: once `first` verdicts are in, the last device fails."""
    def during(proc, out):
        while proc.poll() is None:
            if _lines(out) >= first:
                break
            time.sleep(0.2)
        if proc.poll() is not None or spec["flag"] != "--gpus":
            return {"failed": None, "note": "no device was made to fail (CPU devices, or the run ended first)"}
        h = hog(spec["names"][-1])
        held = h.stdout.readline().strip()
        _stop_after(proc, h)
        return {"failed": f"gpu {spec['names'][-1]}", "hog": held, "at": time.time()}
    return during


def _lines(path: str) -> int:
    try:
        with open(path, "rb") as fh:
            return fh.read().count(b"\n")
    except FileNotFoundError:
        return 0


def _stop_after(proc, h) -> None:
    """The hog lives until the run ends, on a thread of its own."""
    def wait():
        proc.wait()
        h.kill()
        h.wait()
    threading.Thread(target=wait, daemon=True).start()


def failover(manifest: str, folder: str, spec: dict, jobs: list[dict], extra: list[str]) -> dict:
    r = run(manifest, os.path.join(folder, "runs", "failover.jsonl"), device_args(spec), extra,
            during=fail_last_after_first_verdicts(spec))
    return {"run": r, "summary": summarise(r), "check": failover_check(r["records"], jobs)}


def failover_check(records: list[dict], jobs: list[dict]) -> dict:
    """Exactly one record per job; which were vetted again, and why."""
    count = collections.Counter(x["id"] for x in records)
    return {"missing": sorted({j["id"] for j in jobs} - set(count)),
            "twice": sorted(i for i, n in count.items() if n > 1),
            "retried": [{"id": x["id"], "slot": x.get("slot"), "why": x["retried"], "verdict": x["verdict"]}
                        for x in records if x.get("retried")],
            "errors": [{"id": x["id"], "error": x.get("error")} for x in records if x["verdict"] == "error"]}


# --------------------------------------------------------------------------- the table


def markdown(result: dict) -> str:
    s = result["scaling"]
    lines = [f"# kernelvet batch over {len(result['devices']['names'])} devices", "",
             f"{result['candidates']} candidates ({result['mix']}).", "",
             "| run | devices | candidates | wall s | candidates/hour | busy share per device | start s | tail s |",
             "|---|---|---|---|---|---|---|---|"]
    for which in ("one", "all"):
        for k, row in enumerate(s[which]):
            share = ", ".join(f"{slot} {v:.0%}" for slot, v in sorted(row["busy_share"].items()))
            lines.append(f"| {which}-{k} | {row['devices']} | {row['candidates']} | {row['wall_s']:.1f} | "
                         f"{row['per_hour']:.0f} | {share} | {row['start_s']:.1f} | {row['tail_s']:.1f} |")
    ratio = f"{s['ratio']:.2f}x" if s["ratio"] else "-"
    lines += ["", f"Throughput ratio (medians, all devices / one): **{ratio}**. "
              f"Verdicts that differ between runs: {len(s['agreement']['differ'])} of {s['agreement']['ids']}"
              + (f" ({', '.join(s['agreement']['differ'])})" if s["agreement"]["differ"] else "") + "."]
    f = result.get("failover")
    if f:
        c = f["check"]
        lines += ["", "## Failover", "", f"Made to fail: {f['run']['side'] and f['run']['side'].get('failed')}. "
                  f"Missing records: {len(c['missing'])}; written twice: {len(c['twice'])}; "
                  f"vetted again elsewhere: {len(c['retried'])}; errors: {len(c['errors'])}.", ""]
        lines += [f"- {x['id']} on {x['slot']}: {x['verdict']} ({x['why']})" for x in c["retried"][:20]]
    lines += ["", "Commands:", ""] + [f"    {r['command']}" for which in ("one", "all") for r in s["runs"][which][:1]]
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="folder for the manifest, the runs' records and the tables")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--gpus", help="GPU indices, e.g. 0,1 (the first alone, then all)")
    where.add_argument("--devices", help="device names, e.g. cpu,cpu")
    ap.add_argument("--kernelbench", default=kernelbench_sweep.DEFAULT_KERNELBENCH)
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--per-level", type=int, default=10, help="problems per level (three candidates each)")
    ap.add_argument("--no-corpus", action="store_true", help="leave out the practice corpus's entries")
    ap.add_argument("--rounds", type=int, default=2, help="scaling runs on one device and on all, alternating")
    ap.add_argument("--no-failover", action="store_true")
    ap.add_argument("--timeout", default="300", help="kernelvet batch --timeout per candidate")
    return ap


def main(argv=None) -> int:
    a = _parser().parse_args(argv)
    spec = ({"flag": "--gpus", "names": a.gpus.split(",")} if a.gpus else
            {"flag": "--devices", "names": a.devices.split(",")})
    device_type = "cuda" if a.gpus or spec["names"][0].startswith("cuda") else "cpu"
    os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
    levels = [int(x) for x in a.levels.split(",") if x]
    # the generated candidates hold the problems' source: a git-ignored folder, as the problems
    work = os.path.join(os.path.dirname(kernelbench_sweep.DEFAULT_WORK), "scaling")
    jobs = kernelbench_mix(a.kernelbench, levels, a.per_level, work) if a.per_level else []
    jobs += [] if a.no_corpus else corpus_jobs(device_type)
    manifest = write_manifest(jobs, os.path.join(a.out, "manifest.jsonl"))
    extra = ["--timeout", a.timeout]
    result = {"version": RESULTS_VERSION, "devices": spec, "candidates": len(jobs),
              "mix": f"KernelBench levels {a.levels}, {a.per_level} problems each, 3 candidates per problem"
                     + ("" if a.no_corpus else f"; the practice corpus on {device_type}"),
              "scaling": scaling(manifest, a.out, spec, a.rounds, extra)}
    if not a.no_failover and len(spec["names"]) > 1:
        result["failover"] = failover(manifest, a.out, spec, jobs, extra)
    with open(os.path.join(a.out, "scaling.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, default=str)
    text = markdown(result)
    with open(os.path.join(a.out, "scaling.md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
