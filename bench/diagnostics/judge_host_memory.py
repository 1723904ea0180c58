"""What the judge holds on the host through a batch of vets of one problem, request by request,
in units of the problem's output: the bytes of the host tensors alive in the judge's process after
each worker request (a storage counted once, whatever views it has), beside the host footprint the
plan counts for the same holding (`sizes.footprint(...).host`). Runs anywhere, the CPU included:
a big problem scaled down keeps its ratios, and `--lean` holds every vet lean and judged on the
host, as a big problem is on a CUDA card.

    PYTHONPATH=src python3 bench/diagnostics/judge_host_memory.py OUT.json PROBLEM [CANDIDATE] \
        [--vets 2] [--device cpu] [--lean] [--allow library-call ...]

CANDIDATE defaults to the problem's own Model (`class ModelNew(Model): pass`, as
bench/kernelbench_sweep.py writes its `ref` candidates).

Beside the live tensors, each sample keeps the judge process's resident memory as the OS counts
it (anonymous and shared: a received memfd is shared), its peak so far, and the host's Shmem (memfds
in flight, mapped by nobody yet, among them), in bytes: what the tensors do not explain is the
process's, the allocator's or the messages'. On a CUDA judge each sample and the rise log also
keep the judge's device memory and the device's whole use (the worker's with it): where a judge
runs out of device memory, the rise log names the step. Not counted: the worker's host memory.
OUT.json keeps every sample.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import resource
import sys
import tempfile
import threading
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # bench/, for the sweep's candidates

import kernelbench_sweep  # noqa: E402

from kernelvet import cli, sizes, spawn  # noqa: E402
from kernelvet.worker.observe import live_storages  # noqa: E402


def live_host_bytes() -> int:
    return sum(live_host_storages().values())


def live_host_storages() -> dict[str, int]:
    """Bytes of the live host tensors' storages (each counted once), by the dtype of the first
    tensor seen on it."""
    by_dtype = collections.Counter()
    for nbytes, dtype in live_storages(torch.device("cpu")):
        by_dtype[str(dtype).removeprefix("torch.")] += nbytes
    return dict(by_dtype)


def _kib_fields(path: str, names: tuple[str, ...]) -> dict[str, int]:
    """Bytes of the `names` fields of a /proc file that counts in kB (absent: 0)."""
    found = dict.fromkeys(names, 0)
    try:
        with open(path) as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in found:
                    found[key] = int(rest.split()[0]) * 1024
    except OSError:   # not Linux
        pass
    return found


def resident() -> dict[str, int]:
    """The process's resident bytes now (anonymous, shared), its peak so far, and the host's Shmem;
    on a CUDA judge also its device memory (`device_memory`)."""
    own = _kib_fields("/proc/self/status", ("VmRSS", "RssAnon", "RssShmem"))
    own["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    own["host Shmem"] = _kib_fields("/proc/meminfo", ("Shmem",))["Shmem"]
    return dict(own, **device_memory())


def device_memory() -> dict[str, int]:
    """The judge's device memory (torch's allocated and reserved bytes, the peak reserved so far)
    and the device's whole use, the worker's included, once the judge has started CUDA; else none."""
    if not torch.cuda.is_initialized():
        return {}
    free, total = torch.cuda.mem_get_info()
    return {"device allocated": torch.cuda.memory_allocated(), "device reserved": torch.cuda.memory_reserved(),
            "device peak reserved": torch.cuda.max_memory_reserved(), "device used": total - free}


def _watch_rises(main_ident: int, samples: list, every_s: float = 0.02) -> list:
    """A daemon thread's list of each new high of the process's resident bytes and (a CUDA judge)
    of its reserved device bytes, sampled every `every_s`: [bytes, the request last answered, where
    the judge's main thread was (its innermost kernelvet frames), "host" or "device"]. Says which
    step between requests (a comparison, a reference's making or crossing) holds what the samples
    at each request do not."""
    rises = []

    def where() -> list[str]:
        frame = sys._current_frames().get(main_ident)
        found = [f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in traceback.extract_stack(frame)
                 if "kernelvet" in f.filename][-4:] if frame is not None else []
        del frame   # kept, it would keep the judge's frames and their tensors alive after they return
        return found

    def watch():
        top = {"host": 0, "device": 0}
        while True:
            now = {"host": _kib_fields("/proc/self/status", ("VmRSS",))["VmRSS"],
                   "device": torch.cuda.memory_reserved() if torch.cuda.is_initialized() else 0}
            for kind, n in now.items():
                if n > top[kind] + (64 << 20):
                    top[kind] = n
                    rises.append([n, samples[-1][0] if samples else None, where(), kind])
            time.sleep(every_s)

    threading.Thread(target=watch, daemon=True).start()
    return rises


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("problem")
    ap.add_argument("candidate", nargs="?")
    ap.add_argument("--vets", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lean", action="store_true")
    ap.add_argument("--tight", action="store_true", help="with --lean: references kept in float32 (sizes.Holding.tight)")
    ap.add_argument("--redraw", action="store_true", help="with --lean: tight, and fresh sets drawn again where read "
                                                          "(sizes.Holding.redraw_sets)")
    ap.add_argument("--allow", action="append", default=[])
    ap.add_argument("--collect", action="store_true", help="after each request, collect cycles and count what that freed")
    ap.add_argument("--trim", action="store_true", help="after each request, have the C allocator give back what it "
                                                        "keeps of freed memory (malloc_trim) and count it")
    a = ap.parse_args(argv)
    lean = sizes.Holding(lean=True, judge_on_host=True, tight=a.tight or a.redraw, redraw_sets=a.redraw,
                         output_itemsize=4 if a.tight or a.redraw else 0)
    held = {}   # the problem's size (from the plan's own footprints) and the holding the vet follows
    real_plan, real_footprint = sizes.plan_for, sizes.footprint

    def plan_for(*x, **k):
        hold, shape_size = real_plan(*x, **k)
        held["hold"] = lean if a.lean else hold
        if shape_size is not None:   # the outputs at their own dtype (a size measured later counts float64)
            held["shape_size"] = shape_size
        return held["hold"], shape_size

    def footprint(size, *x, **k):
        held["size"] = size
        return real_footprint(size, *x, **k)

    sizes.plan_for, sizes.footprint = plan_for, footprint
    if a.lean:
        sizes.holding_for = lambda *x, **k: lean
    samples, real_request = [], spawn.WorkerHandle.request

    def request(self, type_, body=None, *x, **k):
        msg = real_request(self, type_, body, *x, **k)
        storages = live_host_storages()
        r = dict(resident(), **{f"tensors {k}": v for k, v in storages.items()})
        if a.collect:   # what only the cycle collector would free: tensors kept by reference cycles
            gc.collect()
            r["in cycles"] = sum(storages.values()) - live_host_bytes()
        if a.trim:   # what the C allocator kept of memory already freed, and gives back when asked
            sizes.give_back_host()
            r["trimmed"] = r["VmRSS"] - resident()["VmRSS"]
        samples.append((type_, sum(storages.values()), r))
        return msg

    spawn.WorkerHandle.request = request
    rises = _watch_rises(threading.main_thread().ident, samples)
    with tempfile.TemporaryDirectory() as tmp:
        manifest, results = os.path.join(tmp, "m.jsonl"), os.path.join(tmp, "r.jsonl")
        if a.candidate is None:
            a.candidate = os.path.join(tmp, "ref.py")
            with open(a.candidate, "w") as fh:
                fh.write(kernelbench_sweep.reference_candidate(open(a.problem).read()))
        with open(manifest, "w") as fh:
            for i in range(a.vets):
                fh.write(json.dumps({"id": f"v{i}", "problem": os.path.abspath(a.problem),
                                     "candidate": os.path.abspath(a.candidate)}) + "\n")
        try:
            rc = cli.main(["batch", "--manifest", manifest, "--out", results, "--device", a.device, "--no-progress",
                           *[x for w in a.allow for x in ("--allow", w)]])
        except KeyboardInterrupt:   # cut short (timeout -s INT): the samples so far are still the record
            rc = 130
        verdicts = [json.loads(line)["verdict"] for line in open(results)] if os.path.exists(results) else []
    plan = {}
    size = held.get("shape_size") or held.get("size")
    if size is not None and "hold" in held:
        fp = real_footprint(size, held["hold"], judge_device=a.device != "cpu")   # a CPU judge makes its references on the host
        plan = {"holding": held["hold"].describe(), "host_bytes": fp.host, "host_terms": fp.host_terms,
                "output_bytes": size.output_elements * size.output_itemsize}
    unit = plan.get("output_bytes") or 1
    by_type = collections.defaultdict(list)
    for t, b, _ in samples:
        by_type[str(t)].append(b)
    rss_top = {k: max((r.get(k, 0) for _, _, r in samples), default=0) / unit
               for k in ("VmRSS", "RssAnon", "RssShmem", "peak", "host Shmem", "device reserved", "device used")}
    record = {"version": 3, "problem": os.path.basename(a.problem), "device": a.device, "lean": a.lean,
              "exit": rc, "verdicts": verdicts, "plan": plan,
              "peak_bytes": max((b for _, b, _ in samples), default=0),
              "peak_outputs": max((b for _, b, _ in samples), default=0) / unit,
              "resident_outputs": rss_top,
              "plan_outputs": plan.get("host_bytes", 0) / unit,
              "peak_by_request": {t: max(v) / unit for t, v in by_type.items()},
              "rises": rises,
              "samples": [[t, b, r] for t, b, r in samples]}
    with open(a.out, "w") as fh:
        json.dump(record, fh, indent=1)
    print(json.dumps({k: record[k] for k in ("verdicts", "peak_outputs", "plan_outputs", "resident_outputs", "peak_by_request")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
