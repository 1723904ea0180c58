"""Session diagnostic (H200): kernelvet's reported medians with and without the launch-hiding
hold and with and without a spare worker, beside do_bench, for 256 and 1024 GEMMs."""
import json, statistics, sys, time
import torch, triton
import kernelvet
from kernelvet import judge, load_problem, spawn
from kernelvet.practice import by_name, kernels

L = spawn.shared_launcher()
out = {}
for n in (256, 1024):
    prob = load_problem("matmul", (n, n, n))
    a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
    row = {"do_bench_triton": triton.testing.do_bench(lambda: kernels.matmul(a, b, ieee=True), return_mode="median"),
           "do_bench_mm": triton.testing.do_bench(lambda: torch.mm(a, b), return_mode="median")}
    for label, settings, spare in [("pad+spare", judge.Settings(), True), ("nopad+spare", judge.Settings(hide_launch=False), True),
                                   ("pad+nospare", judge.Settings(), False), ("nopad+nospare", judge.Settings(hide_launch=False), False)]:
        res = []
        for _ in range(2):
            if not spare:
                for w, *_ in list(judge._spares.values()):
                    w.close(); w.cleanup()
                judge._spares.clear()
            r = kernelvet.vet(by_name("triton_gemm_ieee").path, prob, device="cuda", launcher=L, audit="never", settings=settings)
            if not spare:
                for w, *_ in list(judge._spares.values()):
                    w.close(); w.cleanup()
                judge._spares.clear()
            res.append((r.timing.median_ms, r.timing.reference_median_ms, r.timing.method))
        row[label] = res
    out[n] = row
    print(n, json.dumps(row), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
