"""The GPU measurements behind bench/timing.py and bench/cost.py, in one invocation; writes a JSON
file and a table.

1. Timing: kernelvet's reported median against `triton.testing.do_bench` for honest Triton
   float32 GEMMs (IEEE dot) at 256, 1024, 4096, 8192, a Triton softmax, and the torch reference,
   three alternating runs each (do_bench, kernelvet, do_bench, ...); the median of each side's
   three medians is compared. do_bench runs in a process of its own, as a user runs it, with
   nothing of the judge's in it (dobench_process.py). Each do_bench run also records the host's
   pace between its timed calls: a run whose host was slower per rep than the device (its flush + the kernel) made the
   device wait for each launch, and has launch latency inside its windows (host-bound, in the table).
   Where fewer than three of do_bench's runs were not host-bound, rounds go on (at most
   MAX_ROUNDS) until three were; a column compares kernelvet's median over every round with the
   median of do_bench's runs that were not host-bound. On the H200's host even MAX_ROUNDS often
   left do_bench fewer than three such runs at 256^3, so each round also times the candidate with
   do_bench led by a 200 us spin kernel before each of its flushes (dobench_process.spin_lead):
   the device stays ahead of the host, so no launch latency enters a window, and the flush is
   do_bench's own. The comparison (the columns in bold, for the candidate and for the torch
   reference, which is timed both ways too) is the first three rounds' ratio to do_bench as it
   is, or, where any of those three do_bench runs was host-bound, to the spin-led do_bench: a
   host-bound run times launch latency with the kernel, so it is no reading of the kernel to be
   within 3% of (bench/README.md states the target). do_bench's
   per-rep times and the 90th percentile of its host's pace are kept in the JSON.
2. Latency through the Python API with a warm launcher and a warm Triton cache: an honest 256^3
   Triton GEMM (audit auto, which traces it, and audit never), and early rejects.
3. The CLI: wall time of `kernelvet check` against `python -c "import torch"` alone, cold (in
   PAIRS alternating pairs; what the CLI adds is the median of the pairs' differences) and
   through `kernelvet serve`.

4. do_bench against itself (--parts=processes): its medians in several fresh processes, the noise
   floor of any comparison with it.

Usage: python bench/gpu_bench.py OUT_DIR [--quick] [--parts=latency,small,cli,kernel,processes,big] [--pin=CPU]
       python bench/gpu_bench.py --table OUT_DIR/gpu-bench.json   (the table again, from its results)
  (small: 256, 1024 and the softmax; big: 4096 and 8192; kernel: the 256^3 GEMM's CUPTI kernel
  duration beside do_bench and kernelvet; --quick leaves out big; --pin=CPU holds the thread that
  runs do_bench to that core while it runs, an experiment for steadier host pacing: on the H200's
  host it was not)
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import triton

import kernelvet
import dobench_process   # bench/ is this script's directory
from dobench_process import DoBenchProcess, dobench_stamped as _dobench_stamped, flush_us as _flush_us
from kernelvet import load_problem, spawn
from kernelvet.practice import by_name

SIZES = (256, 1024, 4096, 8192)
SOFTMAX = (4096, 4096)
ROUNDS = 3      # alternating do_bench / kernelvet rounds compared
MAX_ROUNDS = 5  # ... and at most this many, for do_bench to get ROUNDS runs that were not host-bound
                # (on the H200's host up to 8 of 9 were host-bound at 256^3: hence the spin-led do_bench)
PAIRS = 5       # CLI: alternating (import torch, kernelvet check) pairs
DEFAULT_PARTS = ("latency", "small", "cli", "big")   # kernel and processes: on request
SPARE_S = 1.2   # after a vet, its successor's worker has started CUDA and its libraries by then (0.55-0.65 s)


def _dobench_paced(fn) -> tuple[float, float]:
    """do_bench's median, and the host's median interval between its timed calls (_dobench_stamped)."""
    times, gaps = _dobench_stamped(fn)
    return statistics.median(times), statistics.median(gaps)


def _paced_by_device(db_ms: list, gaps_us: list, flush_us, kv_ms: list) -> list:
    """The do_bench runs that were not host-bound: the host launched faster than the device ran
    each rep (flush + the kernel, kernelvet's median standing for the kernel). In the others the
    device waited for each launch, so launch latency fell inside the windows. `flush_us`: one per
    run, or one for all (older results)."""
    kernel_us = 1e3 * statistics.median(kv_ms)
    flushes = _per_run(flush_us, len(db_ms))
    return [ms for ms, gap, fl in zip(db_ms, gaps_us, flushes) if gap <= fl + kernel_us]


def timing_cases(big: bool, quick: bool) -> list[tuple]:
    """Launch-bound sizes and the softmax first; 4096 and 8192 (long vets) last."""
    if not big:
        return [("triton_gemm_ieee", "matmul", (n, n, n)) for n in SIZES[:2]] + [("triton_softmax", "softmax", SOFTMAX)]
    return [] if quick else [("triton_gemm_ieee", "matmul", (n, n, n)) for n in SIZES[2:]]


def timing_rows(launcher, dobench: DoBenchProcess, cases, rows: list, save) -> list[dict]:
    """do_bench runs in `dobench`'s process (see dobench_process.py), kernelvet's vets here."""
    for name, prob_name, shape in cases:
        prob = load_problem(prob_name, shape)
        db_c, db_r, kv_c, kv_r, walls, gaps, phases = [], [], [], [], [], [], []
        kv_host_bound = []   # each vet's rehearsal: timed at the host's pace (timing.method says so)
        raw = {"candidate": [], "reference": [], "host_gap_p90_us": [], "paced": []}   # do_bench's own reps, kept
        flush_us = []   # do_bench's flush, measured in its process after each of its runs
        paced = {"ms": [], "host_gap_us": [], "flush_us": []}   # do_bench led by a spin (spin_lead): flush_us has both
        ref_gaps, ref_paced = [], {"ms": [], "host_gap_us": []}   # the torch reference's, the same two ways

        def more() -> bool:   # three rounds; then more, until do_bench has three runs not host-bound
            if len(kv_c) < ROUNDS:
                return True
            return len(kv_c) < MAX_ROUNDS and len(_paced_by_device(db_c, gaps, flush_us, kv_c)) < ROUNDS

        while more():
            db = dobench.run(prob_name, shape)
            times, host_gaps, ref_times = db["candidate"], db["host_gaps_us"], db["reference"]
            flush_us.append(db["flush_us"])
            db_c.append(statistics.median(times))
            gaps.append(statistics.median(host_gaps))
            db_r.append(statistics.median(ref_times))
            raw["candidate"].append([round(t, 6) for t in times])
            raw["reference"].append([round(t, 6) for t in ref_times])
            raw["host_gap_p90_us"].append(sorted(host_gaps)[int(0.9 * (len(host_gaps) - 1))])
            paced["ms"].append(statistics.median(db["paced"]))
            paced["host_gap_us"].append(statistics.median(db["paced_host_gaps_us"]))
            paced["flush_us"].append(db["paced_flush_us"])
            raw["paced"].append([round(t, 6) for t in db["paced"]])
            ref_gaps.append(statistics.median(db["reference_host_gaps_us"]))
            ref_paced["ms"].append(statistics.median(db["reference_paced"]))
            ref_paced["host_gap_us"].append(statistics.median(db["reference_paced_host_gaps_us"]))
            t0 = time.perf_counter()
            rep = kernelvet.vet(by_name(name).path, prob, device="cuda", launcher=launcher, audit="never")
            walls.append(time.perf_counter() - t0)
            phases.append(rep.phases_s)
            time.sleep(SPARE_S)   # the next vet's worker starts CUDA now: not while do_bench runs
            if rep.verdict.value != "pass" or rep.timing is None:   # recorded, not a crash of the whole bench
                rows.append({"kernel": name, "shape": list(shape), "rejected": [f.summary for f in rep.failed]})
                save()
                print(f"{name} {shape}: REJECTED {[f.summary for f in rep.failed]}", flush=True)
                break
            kv_c.append(rep.timing.median_ms)
            kv_host_bound.append("host-bound" in rep.timing.method)
            kv_r.append(rep.timing.reference_median_ms)
        if len(kv_c) < ROUNDS:
            continue
        row = {"kernel": name, "shape": list(shape),   # the comparison: the first three rounds
               "do_bench_ms": statistics.median(db_c[:ROUNDS]), "kernelvet_ms": statistics.median(kv_c[:ROUNDS]),
               "do_bench_ref_ms": statistics.median(db_r[:ROUNDS]), "kernelvet_ref_ms": statistics.median(kv_r[:ROUNDS]),
               "runs": {"do_bench": db_c, "kernelvet": kv_c, "do_bench_ref": db_r, "kernelvet_ref": kv_r},
               "kernelvet_host_bound": kv_host_bound, "vet_wall_s": walls, "vet_phases_s": phases, "do_bench_host_gap_us": gaps, "do_bench_flush_us": flush_us,
               "do_bench_raw_ms": raw,
               "do_bench_host_bound": len(db_c) - len(_paced_by_device(db_c, gaps, flush_us, kv_c)),
               "rounds": len(kv_c),
               # the spin-led do_bench (dobench_process.spin_lead), for `compared`
               "do_bench_paced_ms": statistics.median(paced["ms"][:ROUNDS]), "do_bench_paced": paced,
               "do_bench_paced_host_bound": len(paced["ms"]) - len(_paced_by_device(
                   paced["ms"], paced["host_gap_us"], paced["flush_us"], kv_c)),
               "do_bench_ref_host_gap_us": ref_gaps, "do_bench_ref_paced": ref_paced,
               "do_bench_ref_paced_ms": statistics.median(ref_paced["ms"][:ROUNDS])}
        row["ratio"] = row["kernelvet_ms"] / row["do_bench_ms"]
        row["paced_ratio"] = row["kernelvet_ms"] / row["do_bench_paced_ms"]
        row["ref_ratio"] = row["kernelvet_ref_ms"] / row["do_bench_ref_ms"]
        row["ref_paced_ratio"] = row["kernelvet_ref_ms"] / row["do_bench_ref_paced_ms"]
        rows.append(row)
        save()
        print(f"{name} {shape}: do_bench {row['do_bench_ms']:.4f} ms, kernelvet {row['kernelvet_ms']:.4f} ms "
              f"({row['ratio']:.3f}); torch ref {row['do_bench_ref_ms']:.4f} vs {row['kernelvet_ref_ms']:.4f} "
              f"({row['ref_ratio']:.3f}); do_bench host pace {[round(g) for g in gaps]} us against a "
              f"{statistics.median(flush_us):.0f} us flush; to the runs not host-bound: {_host_bound_cells(row)}; "
              f"spin-led do_bench {row['do_bench_paced_ms']:.4f} ms ({row['paced_ratio']:.3f}, host pace "
              f"{[round(g) for g in paced['host_gap_us']]} us against {statistics.median(paced['flush_us']):.0f} us); "
              f"compared: {_compared_cell(row)}, torch ref {_compared_cell(row, ref=True)}", flush=True)
    return rows


def latency_rows(launcher) -> list[dict]:
    """Each case twice back to back (the next vet waits for the worker the last one started) and
    twice alone (SPARE_S after the last vet: its worker is ready)."""
    rows = []
    cases = [("triton_gemm_ieee", "never"), ("triton_gemm_ieee", "auto"),
             ("torch_mm", "auto"), ("bf16_operands", "auto"), ("hidden_stream", "auto")]
    kernelvet.vet(by_name("triton_gemm_ieee").path, "matmul", device="cuda", launcher=launcher, audit="never")
    for spacing in ("back to back", "alone"):
        for name, audit in cases * 2:
            if spacing == "alone":
                time.sleep(SPARE_S)
            t0 = time.perf_counter()
            rep = kernelvet.vet(by_name(name).path, "matmul", device="cuda", launcher=launcher, audit=audit)
            wall = time.perf_counter() - t0
            rows.append({"candidate": name, "audit": audit, "spacing": spacing, "wall_s": wall,
                         "verdict": rep.verdict.value, "failed": [str(f.check) for f in rep.failed],
                         "phases_s": rep.phases_s, "requests_s": rep.requests_s,
                         "median_ms": rep.timing.median_ms if rep.timing else None})
            print(f"vet {name} audit={audit} {spacing}: {wall:.2f} s {rep.verdict.value} {rows[-1]['failed']} "
                  f"median {rows[-1]['median_ms']} ms "
                  + " ".join(f"{k}={v:.2f}" for k, v in rep.phases_s.items()) + " | "
                  + " ".join(f"{k}={n}x{t:.3f}" for k, (n, t) in rep.requests_s.items()), flush=True)
    return rows


def _start_server(env: dict, sock: str) -> tuple[subprocess.Popen, float]:
    """`kernelvet serve` on the GPU, and how long it took to listen."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kernelvet", "serve", "--device", "cuda", "--idle", "600"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while not os.path.exists(sock) and proc.poll() is None and time.perf_counter() - t0 < 120:
        time.sleep(0.05)
    return proc, time.perf_counter() - t0


def cli_rows(dest: str) -> list[dict]:
    import tempfile
    sock = os.path.join(tempfile.mkdtemp(prefix="kv-bench-"), "serve", "serve.sock")
    env = {**os.environ, "KERNELVET_SOCKET": sock}   # cold rows: no server listens there yet
    py = sys.executable
    check = [py, "-m", "kernelvet", "check", by_name("triton_gemm_ieee").path, "--ref", "matmul", "--device", "cuda",
             "--verbose"]
    rows = []

    def run(cmd) -> tuple[float, subprocess.CompletedProcess]:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        return time.perf_counter() - t0, proc

    def add(label: str, walls: list, proc) -> None:
        start_up = [ln for ln in proc.stdout.splitlines() if ln.startswith("start-up")]
        rows.append({"what": label, "wall_s": walls, "median_s": statistics.median(walls), "rc": proc.returncode,
                     "start_up": start_up[-1] if start_up else "", "tail": proc.stdout[-1500:]})
        print(start_up[-1] if start_up else "", flush=True)
        print(f"{label}: {statistics.median(walls):.2f} s (rc {proc.returncode})", flush=True)

    # The baseline and the check in pairs, alternating: the host's pace drifts between runs (import
    # torch alone has read anywhere from 3.0 to 5.7 s on one machine), and each pair's difference sees one pace.
    base, cold = ("python + import torch", [py, "-c", "import torch"]), \
        ("kernelvet check (audit auto)", check + ["--json", os.path.join(dest, "cli-report.json")])
    walls, procs = {base[0]: [], cold[0]: []}, {}
    for _ in range(PAIRS):
        for label, cmd in (base, cold):
            wall, last = run(cmd)
            walls[label].append(wall)
            procs[label] = last
    add(base[0], walls[base[0]], procs[base[0]])
    add(cold[0], walls[cold[0]], procs[cold[0]])
    diffs = [c - b for b, c in zip(walls[base[0]], walls[cold[0]])]
    rows.append({"what": "what the CLI adds: each pair's check minus its import torch", "wall_s": diffs,
                 "median_s": statistics.median(diffs), "rc": None, "start_up": "", "tail": ""})
    print(f"{rows[-1]['what']}: median {rows[-1]['median_s']:.2f} s of {[round(d, 2) for d in diffs]}", flush=True)
    # (The audit's cost is the latency rows'; --audit never and --sandbox off are left out here:
    # the one invocation must fit in 10 minutes.)
    wall, proc = run([py, "-c", "import torch; torch.zeros(1, device='cuda')"])
    add("python + import torch + CUDA init", [wall], proc)
    try:
        rows.append(_served_row(check, env, sock, dest))
    except Exception as exc:  # noqa: BLE001 - recorded; the cold rows above are kept
        rows.append({"what": "kernelvet check via kernelvet serve", "wall_s": [], "median_s": float("nan"),
                     "rc": None, "start_up": f"failed: {exc!r}", "tail": ""})
    print(f"{rows[-1]['what']}: {rows[-1]['median_s']:.2f} s (rc {rows[-1]['rc']}) {rows[-1]['start_up']}", flush=True)
    return rows


def _served_row(check: list, env: dict, sock: str, dest: str) -> dict:
    server, listen_s = _start_server(env, sock)
    time.sleep(SPARE_S)
    walls = []
    for _ in range(5):
        t0 = time.perf_counter()
        proc = subprocess.run(check + ["--json", os.path.join(dest, "cli-served-report.json")], env=env,
                              capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        time.sleep(SPARE_S)
    server.terminate()
    served = [ln for ln in proc.stdout.splitlines() if ln.startswith("served by")]
    return {"what": f"kernelvet check via kernelvet serve (listening after {listen_s:.1f} s)", "wall_s": walls,
            "median_s": statistics.median(walls), "rc": proc.returncode,
            "start_up": served[-1] if served else "", "tail": proc.stdout[-1500:] + proc.stderr[-500:]}


_DOBENCH_IN_A_PROCESS = """
import json, sys, torch, triton
sys.path.insert(0, sys.argv[2])
from dobench_process import case_fns
n = int(sys.argv[1])
torch.backends.cuda.matmul.allow_tf32 = False
fns = dict(zip(("triton", "torch"), case_fns("matmul", (n, n, n))))
print(json.dumps({k: [triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median") for _ in range(3)]
                  for k, f in fns.items()}))
"""


def process_rows(sizes=(256, 1024), processes: int = 3) -> list[dict]:
    """do_bench against itself: three do_bench runs in each of several fresh processes, the GEMM
    and torch.mm. How far its median moves from one process to the next is the noise floor of
    any comparison with it (the launch-bound 256^3 above all); 1024^3 as the control."""
    rows = []
    for n in sizes:
        runs = []
        for _ in range(processes):
            done = subprocess.run([sys.executable, "-c", _DOBENCH_IN_A_PROCESS, str(n),
                                   os.path.dirname(os.path.abspath(__file__))], capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                runs.append({"error": done.stderr[-500:]})
                continue
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        row = {"shape": [n, n, n], "processes": runs}
        for k in ("triton", "torch"):
            meds = [statistics.median(r[k]) for r in runs if k in r]
            if meds:
                row[f"{k}_spread"] = max(meds) / min(meds)
        rows.append(row)
        print(f"do_bench in {processes} fresh processes, {n}^3: " + "; ".join(
            f"{k} " + ", ".join(f"{statistics.median(r[k]) * 1e3:.2f}" for r in runs if k in r)
            + f" us (max/min {row.get(k + '_spread', float('nan')):.3f})" for k in ("triton", "torch")), flush=True)
    return rows


def kernel_time_rows(launcher) -> list[dict]:
    """What the device itself says: the profiler's (CUPTI's) duration of the 256^3 GEMM kernel over
    200 flushed calls, beside do_bench and kernelvet (alternating, three times each, before the
    profiler first runs here). Either event-based clock is judged against this."""
    m = n = k = 256
    gemm, _ = dobench_process.case_fns("matmul", (m, n, k))   # the operands the timing rows use
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    prob = load_problem("matmul", (m, n, k))
    cupti, db, kv = [], [], []
    gaps, flush_us = [], _flush_us()
    for _ in range(3):
        ms, gap = _dobench_paced(gemm)
        db.append(ms)
        gaps.append(gap)
        rep = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=launcher, audit="never")
        kv.append(rep.timing.median_ms if rep.timing else float("nan"))
        time.sleep(SPARE_S)
    # The profiler last: once CUPTI is attached to this process, every launch here costs more, and
    # do_bench, which times in this process, reads 30-49 us.
    for _ in range(3):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(200):
                flush.zero_()
                gemm()
            torch.cuda.synchronize()
        durs = [(e.end_ns() - e.start_ns()) / 1e6 for e in prof.profiler.kineto_results.events()
                if "cuda" in str(e.device_type()).lower() and "matmul_kernel" in e.name()]
        cupti.append(statistics.median(durs) if durs else float("nan"))
    row = {"kernel": "triton_gemm_ieee", "shape": [m, n, k], "cupti_kernel_ms": cupti, "do_bench_ms": db,
           "kernelvet_ms": kv, "do_bench_host_gap_us": gaps, "do_bench_flush_us": flush_us}
    print(f"256^3 GEMM: CUPTI kernel {[round(x * 1e3, 2) for x in cupti]} us, do_bench "
          f"{[round(x * 1e3, 2) for x in db]} us, kernelvet {[round(x * 1e3, 2) for x in kv]} us", flush=True)
    return [row]


def _host_bound_cells(r: dict) -> str:
    """'N of M | ratio of kernelvet's median to the median of do_bench's runs that were not', over
    every round (rounds past the third ran only to get do_bench three runs not host-bound)."""
    if "do_bench_host_gap_us" not in r:
        return "- | -"
    db, kv = r["runs"]["do_bench"], r["runs"]["kernelvet"]
    clean = _paced_by_device(db, r["do_bench_host_gap_us"], r["do_bench_flush_us"], kv)
    ratio = f"{statistics.median(kv) / statistics.median(clean):.3f}" if clean else "-"
    return f"{len(db) - len(clean)} of {len(db)} | {ratio}"


def _paced_cells(r: dict) -> str:
    """'spin-led do_bench, ms | kernelvet's ratio to it' (first three rounds), with how many of its
    runs were host-bound all the same (none, if the spin did its job)."""
    if "do_bench_paced_ms" not in r:   # older results: no spin-led do_bench
        return "- | -"
    n = len(r["do_bench_paced"]["ms"])
    return (f"{r['do_bench_paced_ms']:.4f} | {r['paced_ratio']:.3f}"
            + (f" ({r['do_bench_paced_host_bound']} of {n} runs host-bound)" if r["do_bench_paced_host_bound"] else ""))


# The keys of each side in a row: its do_bench and kernelvet runs, its ratios (to do_bench as it
# is and to the spin-led do_bench), do_bench's host pace, the spin-led do_bench's median.
_SIDES = {False: ("do_bench", "kernelvet", "ratio", "paced_ratio", "do_bench_host_gap_us", "do_bench_paced_ms"),
          True: ("do_bench_ref", "kernelvet_ref", "ref_ratio", "ref_paced_ratio", "do_bench_ref_host_gap_us",
                 "do_bench_ref_paced_ms")}


def compared(r: dict, ref: bool = False) -> tuple[float, str]:
    """The comparison: kernelvet's first three rounds against do_bench's, as do_bench is if
    none of its first three runs was host-bound, else against the spin-led do_bench. `ref`: the
    same for the torch reference (where its pace is recorded)."""
    db_key, kv_key, ratio_key, paced_key, gaps_key, paced_ms_key = _SIDES[ref]
    if gaps_key not in r:   # no pace recorded for it
        return r[ratio_key], "do_bench"
    db = r["runs"][db_key][:ROUNDS]
    clean = _paced_by_device(db, r[gaps_key][:ROUNDS], _per_run(r["do_bench_flush_us"], len(db))[:ROUNDS],
                             r["runs"][kv_key])
    if len(clean) == len(db):
        return r[ratio_key], "do_bench"
    if paced_ms_key not in r:   # older results: no spin-led do_bench
        return r[ratio_key], "do_bench, host-bound"
    return r[paced_key], "spin-led do_bench"


def _per_run(flush_us, n: int) -> list:
    return flush_us if isinstance(flush_us, list) else [flush_us] * n


def _compared_cell(r: dict, ref: bool = False) -> str:
    ratio, against = compared(r, ref)
    return f"**{ratio:.3f}**" + (f" ({against})" if against != "do_bench" else "")


def table(res: dict) -> str:
    out = [f"# kernelvet on {res['device']} ({res['date']})", "",
           f"torch {res['torch']}, Triton {res['triton']}, Python {res['python']}", "",
           "## Timing: kernelvet vs triton.testing.do_bench (median of three alternating runs)", "",
           "| kernel | shape | do_bench ms | kernelvet ms | ratio | spin-led do_bench ms | ratio to it "
           "| torch ref do_bench ms | kernelvet ref ms | **torch ref compared** | do_bench runs host-bound "
           "| ratio to do_bench's runs not host-bound | **compared** |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["timing"]:
        if "rejected" in r:
            out.append(f"| {r['kernel']} | {'x'.join(map(str, r['shape']))} | rejected: {'; '.join(r['rejected'])} |")
            continue
        out.append(f"| {r['kernel']} | {'x'.join(map(str, r['shape']))} | {r['do_bench_ms']:.4f} | "
                   f"{r['kernelvet_ms']:.4f} | {r['ratio']:.3f} | {_paced_cells(r)} | {r['do_bench_ref_ms']:.4f} | "
                   f"{r['kernelvet_ref_ms']:.4f} | {_compared_cell(r, ref=True)} | {_host_bound_cells(r)} | "
                   f"{_compared_cell(r)} |")
    out += ["", "## Latency through the Python API (warm launcher, warm Triton cache)", "",
            "| candidate | audit | spacing | wall s | verdict | failed | phases |", "|---|---|---|---|---|---|---|"]
    for r in res["latency"]:
        ph = ", ".join(f"{k}={v:.2f}" for k, v in r["phases_s"].items())
        out.append(f"| {r['candidate']} | {r['audit']} | {r['spacing']} | {r['wall_s']:.2f} | {r['verdict']} | "
                   f"{', '.join(r['failed']) or '-'} | {ph} |")
    out += ["", "## The CLI, end to end (median of the runs)", "", "| what | median s | runs | start-up (last run) |",
            "|---|---|---|---|"]
    for r in res["cli"]:
        out.append(f"| {r['what']} | {r['median_s']:.2f} | {', '.join(f'{w:.2f}' for w in r['wall_s'])} | "
                   f"{r['start_up'].split(': ', 1)[-1]} |")
    if res.get("processes"):
        out += ["", "## do_bench against itself: its median (us) in each of several fresh processes", "",
                "| shape | Triton GEMM, per process | max/min | torch.mm, per process | max/min |",
                "|---|---|---|---|---|"]
        for r in res["processes"]:
            cells = []
            for k in ("triton", "torch"):
                cells += [", ".join(f"{statistics.median(p[k]) * 1e3:.2f}" for p in r["processes"] if k in p),
                          f"{r[k + '_spread']:.3f}" if k + "_spread" in r else "-"]
            out.append(f"| {'x'.join(map(str, r['shape']))} | " + " | ".join(cells) + " |")
    if res.get("kernel_time"):
        out += ["", "## The 256^3 GEMM's own duration (CUPTI, median of 200 flushed calls) beside the two clocks",
                "", "| run | CUPTI kernel us | do_bench us | do_bench host pace us | kernelvet us |",
                "|---|---|---|---|---|"]
        r = res["kernel_time"][0]
        paces = [f"{g:.0f} (flush {r['do_bench_flush_us']:.0f})" for g in r["do_bench_host_gap_us"]] \
            if "do_bench_host_gap_us" in r else ["-"] * len(r["do_bench_ms"])   # not recorded in older results
        for i, (c, d, g, k) in enumerate(zip(r["cupti_kernel_ms"], r["do_bench_ms"], paces, r["kernelvet_ms"])):
            out.append(f"| {i + 1} | {c * 1e3:.2f} | {d * 1e3:.2f} | {g} | {k * 1e3:.2f} |")
    if res.get("part_s"):
        out += ["", "Wall seconds per part: " + ", ".join(f"{k} {v:.0f}" for k, v in res["part_s"].items())
                + f" (launcher start {res.get('launcher_start_s', 0):.1f})"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[0] == "--table":   # the table again, from a results file (what it adds is derived)
        with open(argv[1]) as fh:
            print(table(json.load(fh)), end="")
        return
    dest = argv[0]
    quick = "--quick" in argv
    pin = next((int(a.split("=", 1)[1]) for a in argv if a.startswith("--pin=")), None)
    dobench_process.PIN_CPU = pin   # the in-process do_bench of --parts=kernel
    parts = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--parts=")), list(DEFAULT_PARTS))
    os.makedirs(dest, exist_ok=True)
    import platform
    res = {"device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
           "do_bench_pinned_cpu": pin, "do_bench_in": "a process of its own (dobench_process.py)"}
    t0 = time.perf_counter()
    launcher = spawn.shared_launcher()
    res["launcher_start_s"] = time.perf_counter() - t0
    res["timing"], res["cli"], res["latency"], res["partial"] = [], [], [], True

    def save():   # after every row: a run cut off by its time limit still leaves what it measured
        with open(os.path.join(dest, "gpu-bench.json"), "w") as fh:
            json.dump(res, fh, indent=1, default=str)

    res["part_s"] = {}   # each part's wall seconds (the whole invocation fits in 10 minutes)

    @contextlib.contextmanager
    def part(name):
        t_part = time.perf_counter()
        yield
        res["part_s"][name] = time.perf_counter() - t_part
        save()

    if "latency" in parts:
        with part("latency"):
            res["latency"] = latency_rows(launcher)
    dobench = DoBenchProcess(pin) if "small" in parts or "big" in parts else None
    if "small" in parts:
        with part("small"):
            timing_rows(launcher, dobench, timing_cases(False, quick), res["timing"], save)
    if "cli" in parts:
        with part("cli"):
            res["cli"] = cli_rows(dest)
    if "kernel" in parts:
        with part("kernel"):
            res["kernel_time"] = kernel_time_rows(launcher)
    if "processes" in parts:
        with part("processes"):
            res["processes"] = process_rows()
    if "big" in parts:
        with part("big"):
            timing_rows(launcher, dobench, timing_cases(True, quick), res["timing"], save)
    if dobench is not None:
        dobench.close()
    del res["partial"]
    save()
    text = table(res)
    with open(os.path.join(dest, "gpu-bench.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
