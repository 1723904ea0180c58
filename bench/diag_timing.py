"""Session diagnostic (H200): where the candidate worker's per-rep events gain host time, what the
profiler costs in a forked worker, and what kernel names and streams it reports. Exploratory: its
findings shaped worker._Reps and the kernel audit; the output is committed under bench/results/."""
import json, os, statistics, sys, time

def part_profiler():
    # Fork from a parent that imported torch (+triton, +torch.profiler) but never initialised CUDA.
    import torch, triton  # noqa
    import torch.profiler  # noqa
    from torch.profiler import profile, ProfilerActivity
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        out = {}
        t = time.perf_counter(); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); out["cuda_init_s"] = time.perf_counter() - t
        a = torch.randn(256, 256, device="cuda"); b = torch.randn(256, 256, device="cuda")
        for i in range(3):
            t = time.perf_counter()
            with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
                c = a @ b
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            evs = [e for e in p.events()]
            t2 = time.perf_counter()
            out[f"session{i}_s"] = t1 - t
            out[f"events{i}_s"] = t2 - t1
        ke = p.profiler.kineto_results.events()
        out["kineto_methods"] = [m for m in dir(ke[0]) if not m.startswith("_")]
        out["kineto"] = []
        for e in ke:
            d = {"name": e.name()[:120], "dev": str(e.device_type())}
            for m in ("start_ns", "end_ns", "duration_ns", "device_index", "device_resource_id", "correlation_id", "linked_correlation_id", "is_async", "activity_type"):
                try:
                    v = getattr(e, m)(); d[m] = v if isinstance(v, (int, float, str, bool)) else str(v)
                except Exception as ex:
                    d[m] = f"ERR {ex}"
            out["kineto"].append(d)
        os.write(w, json.dumps(out).encode()); os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 1 << 20)
        if not chunk: break
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)

def kernel_names():
    import torch
    from torch.profiler import profile, ProfilerActivity
    res = {}
    for dt in (torch.float32, torch.bfloat16, torch.float16):
        for n in (256, 4096):
            a = torch.randn(n, n, device="cuda", dtype=dt); b = torch.randn(n, n, device="cuda", dtype=dt)
            a @ b; torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                a @ b; torch.cuda.synchronize()
            res[f"{dt}-{n}"] = sorted({e.name() for e in p.profiler.kineto_results.events() if "cuda" in str(e.device_type()).lower()})
    x = torch.randn(4, 8, 32, 32, device="cuda"); conv = torch.nn.Conv2d(8, 8, 3).cuda()
    conv(x); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        conv(x); torch.cuda.synchronize()
    res["conv"] = sorted({e.name() for e in p.profiler.kineto_results.events() if "cuda" in str(e.device_type()).lower()})
    # hidden stream: Triton GEMM on a private stream, caller's stream held by a sleep
    from kernelvet.practice import kernels
    a = torch.randn(256, 256, device="cuda"); b = torch.randn(256, 256, device="cuda")
    s = torch.cuda.Stream()
    kernels.matmul(a, b); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        torch.cuda._sleep(int(2e6))
        with torch.cuda.stream(s):
            kernels.matmul(a, b)
        torch.cuda.synchronize()
    res["hidden_trace"] = [(e.name()[:60], e.device_resource_id(), e.start_ns(), e.end_ns() if hasattr(e, "end_ns") else None)
                           for e in p.profiler.kineto_results.events() if "cuda" in str(e.device_type()).lower()]
    return res

def reps_variants():
    import torch, triton
    from kernelvet.practice import kernels
    out = {}
    flush = torch.empty(int(2 * torch.cuda.get_device_properties(0).L2_cache_size), dtype=torch.uint8, device="cuda")
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    class M(torch.nn.Module):
        def __init__(s, f): super().__init__(); s.f = f
        def forward(s, a, b): return s.f(a, b)
    for n in (256, 1024, 4096):
        a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
        fns = {"torch.mm": torch.mm, "triton": lambda x, y: kernels.matmul(x, y, ieee=True)}
        for name, f in fns.items():
            mod = M(f)
            for _ in range(5): f(a, b)
            torch.cuda.synchronize()
            t = time.perf_counter()
            while time.perf_counter() - t < 0.025: f(a, b)
            torch.cuda.synchronize()
            row = {}
            row["do_bench"] = [triton.testing.do_bench(lambda: f(a, b), warmup=25, rep=100, return_mode="median") for _ in range(3)]
            def run(variant, reps=200 if n < 4096 else 40):
                ts = []
                for _ in range(reps):
                    if "touch" in variant: a.clone(); b.clone()
                    if "paint" in variant:
                        h = [torch.empty(n * n, dtype=torch.int32, device="cuda").fill_(7) for _ in range(2)]; del h
                    flush.zero_()
                    if "pad" in variant: torch.cuda._sleep(int(variant["pad"]))
                    st.record()
                    o = (mod if "module" in variant else f)(a, b)
                    en.record(); en.synchronize()
                    t0 = time.perf_counter(); torch.cuda.synchronize(); _ = time.perf_counter() - t0
                    if "compare" in variant: torch.equal(o.view(torch.int32), o.view(torch.int32))
                    ts.append(st.elapsed_time(en))
                return statistics.median(ts)
            for label, v in {"flush": {}, "touch": {"touch": 1}, "touch+paint": {"touch": 1, "paint": 1},
                             "touch+paint+module": {"touch": 1, "paint": 1, "module": 1},
                             "all+compare": {"touch": 1, "paint": 1, "module": 1, "compare": 1},
                             "all+pad20k": {"touch": 1, "paint": 1, "module": 1, "compare": 1, "pad": 20000},
                             "all+pad100k": {"touch": 1, "paint": 1, "module": 1, "compare": 1, "pad": 100000}}.items():
                row[label] = run(v)
            # host-side enqueue time of one call
            hs = []
            for _ in range(50):
                torch.cuda.synchronize(); t0 = time.perf_counter(); mod(a, b); hs.append(time.perf_counter() - t0)
            row["host_enqueue_us"] = statistics.median(hs) * 1e6
            out[f"{name}-{n}"] = row
            print(name, n, json.dumps(row), flush=True)
    return out

def vets():
    import torch
    import kernelvet
    from kernelvet import spawn
    out = {}
    t = time.perf_counter(); L = spawn.shared_launcher(); out["launcher_start_s"] = time.perf_counter() - t
    base = "src/kernelvet/practice/"
    cases = [("honest/triton_gemm_ieee.py", (), "warm-cache"), ("honest/triton_gemm_ieee.py", (), "a"),
             ("honest/triton_gemm_ieee.py", ("unwritten-output",), "nopaint"),
             ("cheats/torch_mm.py", ("library-call",), "torch_mm-allowed"), ("cheats/torch_mm.py", (), "reject"),
             ("cheats/hidden_stream.py", (), "hidden"), ("cheats/launch_nothing.py", (), "launch_nothing")]
    for path, allow, label in cases:
        t = time.perf_counter()
        rep = kernelvet.vet(base + path, "matmul", device="cuda", allow=allow, launcher=L)
        wall = time.perf_counter() - t
        d = rep.to_json()
        tm = d.get("timing") or {}
        out[label] = {"wall_s": wall, "verdict": d["verdict"], "phases": d.get("phases_s"),
                      "median_ms": tm.get("median_ms"), "ref_median_ms": tm.get("reference_median_ms"),
                      "failed": [f["check"] for f in d["findings"] if f["status"] == "fail"]}
        print(label, json.dumps(out[label]), flush=True)
    return out

if __name__ == "__main__":
    dest = sys.argv[1]
    res = {}
    res["profiler_in_fork"] = part_profiler(); print("profiler", {k: v for k, v in res["profiler_in_fork"].items() if k != "kineto"}, flush=True)
    res["vets"] = vets()
    res["kernel_names"] = kernel_names(); print(json.dumps(res["kernel_names"])[:3000], flush=True)
    res["reps"] = reps_variants()
    with open(dest, "w") as fh: json.dump(res, fh, indent=1, default=str)
