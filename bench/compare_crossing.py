"""What one comparison of a big output on the device against its float64 reference on the host
costs (a big problem judged on the host), the reference crossing pageable or through pinned
staging (crossing.STAGE_PINNED), beside a digest of the output's bits (bits_digest.py), which
spares a bit-identical output the comparison; and what the way back costs, the output moved to
the host as the judge keeps a fresh set's (`.to("cpu")`, pageable) or a slice at a time through a
pinned stage (crossing.moved_home).

    PYTHONPATH=src python3 bench/compare_crossing.py OUT.json [ELEMENTS [REPS]]

ELEMENTS defaults to 2^30 (a 4 GiB float32 output, an 8 GiB reference: KernelBench level 1's
small-K matmul). Each configuration runs REPS times (default 3), interleaved; raw seconds kept.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

from kernelvet import bits_digest, crossing, metrics


def _timed(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    out_path = argv[0]
    n = int(argv[1]) if len(argv) > 1 else 1 << 30
    reps = int(argv[2]) if len(argv) > 2 else 3
    dev = torch.device("cuda")
    out = torch.randn(n, device=dev)
    ref = out.to("cpu", torch.float64)
    ref += 1e-7   # a near miss: the norms are those of an honest output's
    raw: dict[str, list[float]] = {"pageable": [], "pinned": [], "digest": [], "home_pageable": [],
                                   "home_staged": []}
    results = {}
    for _ in range(reps):
        for mode in ("pageable", "pinned"):
            crossing.STAGE_PINNED = mode == "pinned"
            got = {}
            raw[mode].append(_timed(lambda: got.setdefault("c", metrics.compare(out, ref))))
            results[mode] = metrics.rel_error_of(got["c"])
        raw["digest"].append(_timed(lambda: bits_digest.digest(out, 12345)))
        raw["home_pageable"].append(_timed(lambda: out.to("cpu")))
        raw["home_staged"].append(_timed(lambda: crossing.moved_home(out)))
    assert torch.equal(crossing.moved_home(out), out.cpu())
    assert abs(results["pageable"] - results["pinned"]) <= 1e-12 * max(results["pageable"], 1e-30), results
    record = {"version": 2, "elements": n, "output_dtype": "float32", "reference_dtype": "float64",
              "device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
              "raw_s": raw, "median_s": {k: statistics.median(v) for k, v in raw.items()},
              "rel_error": results}
    record["pinned_speedup"] = record["median_s"]["pageable"] / record["median_s"]["pinned"]
    record["home_staged_speedup"] = record["median_s"]["home_pageable"] / record["median_s"]["home_staged"]
    with open(out_path, "w") as fh:
        json.dump(record, fh, indent=1)
    print(json.dumps({k: record[k] for k in ("device", "median_s", "pinned_speedup", "home_staged_speedup")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
