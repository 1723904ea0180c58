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

Not counted: the worker's process (its own copies of the outputs it sends through the host), and
memory the allocator or the OS holds beyond live tensors. OUT.json keeps every sample.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # bench/, for the sweep's candidates

import kernelbench_sweep  # noqa: E402

from kernelvet import cli, sizes, spawn  # noqa: E402


def live_host_bytes() -> int:
    seen, total = set(), 0
    for o in gc.get_objects():
        if isinstance(o, torch.Tensor) and o.device.type == "cpu":
            try:
                s = o.untyped_storage()
            except RuntimeError:   # a tensor without storage (a wrapper subclass)
                continue
            if s.data_ptr() not in seen:
                seen.add(s.data_ptr())
                total += s.nbytes()
    return total


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("problem")
    ap.add_argument("candidate", nargs="?")
    ap.add_argument("--vets", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lean", action="store_true")
    ap.add_argument("--allow", action="append", default=[])
    a = ap.parse_args(argv)
    held = {}   # the problem's size (from the plan's own footprints) and the holding the vet follows
    real_plan, real_footprint = sizes.plan_for, sizes.footprint

    def plan_for(*x, **k):
        hold, shape_size = real_plan(*x, **k)
        held["hold"] = sizes.Holding(lean=True, judge_on_host=True) if a.lean else hold
        if shape_size is not None:   # the outputs at their own dtype (a size measured later counts float64)
            held["shape_size"] = shape_size
        return held["hold"], shape_size

    def footprint(size, *x, **k):
        held["size"] = size
        return real_footprint(size, *x, **k)

    sizes.plan_for, sizes.footprint = plan_for, footprint
    if a.lean:
        sizes.holding_for = lambda *x, **k: sizes.Holding(lean=True, judge_on_host=True)
    samples, real_request = [], spawn.WorkerHandle.request

    def request(self, type_, body=None, *x, **k):
        msg = real_request(self, type_, body, *x, **k)
        samples.append((type_, live_host_bytes()))
        return msg

    spawn.WorkerHandle.request = request
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
        rc = cli.main(["batch", "--manifest", manifest, "--out", results, "--device", a.device, "--no-progress",
                       *[x for w in a.allow for x in ("--allow", w)]])
        verdicts = [json.loads(line)["verdict"] for line in open(results)]
    plan = {}
    size = held.get("shape_size") or held.get("size")
    if size is not None and "hold" in held:
        fp = real_footprint(size, held["hold"])
        plan = {"holding": held["hold"].describe(), "host_bytes": fp.host, "host_terms": fp.host_terms,
                "output_bytes": size.output_elements * size.output_itemsize}
    unit = plan.get("output_bytes") or 1
    by_type = collections.defaultdict(list)
    for t, b in samples:
        by_type[str(t)].append(b)
    record = {"version": 1, "problem": os.path.basename(a.problem), "device": a.device, "lean": a.lean,
              "exit": rc, "verdicts": verdicts, "plan": plan,
              "peak_bytes": max((b for _, b in samples), default=0),
              "peak_outputs": max((b for _, b in samples), default=0) / unit,
              "plan_outputs": plan.get("host_bytes", 0) / unit,
              "peak_by_request": {t: max(v) / unit for t, v in by_type.items()},
              "samples": [[t, b] for t, b in samples]}
    with open(a.out, "w") as fh:
        json.dump(record, fh, indent=1)
    print(json.dumps({k: record[k] for k in ("verdicts", "peak_outputs", "plan_outputs", "peak_by_request")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
