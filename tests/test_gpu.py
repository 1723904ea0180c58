"""The CUDA half of the corpus, on a real GPU (`pytest -m gpu` on a CUDA machine).

Same matrix as test_corpus.py: every CUDA cheat rejected by its checks, `sole` ones by exactly one
check that, waived, lets it through; every honest CUDA kernel passes. Plus the 4096^3 cases of
the streams check (hidden work caught, honest and synced side streams not).
"""

import pytest

from kernelvet import load_problem, vet
from kernelvet.ids import CheckId
from kernelvet.practice import by_name, entries
from kernelvet.report import Status, Verdict

from .matrix import ablatable, assert_passes, assert_rejected, assert_waiving_lets_it_through, vet_entry

pytestmark = pytest.mark.gpu

CUDA_CHEATS = entries("cuda", "cheat")
CUDA_HONEST = entries("cuda", "honest")


@pytest.mark.parametrize("entry", CUDA_CHEATS, ids=lambda e: e.name)
def test_cuda_cheat_is_rejected(entry):
    assert_rejected(entry, "cuda")


@pytest.mark.parametrize("entry", ablatable(CUDA_CHEATS, "cuda"), ids=lambda e: e.name)
def test_cuda_ablation(entry):
    assert_waiving_lets_it_through(entry, "cuda")


@pytest.mark.parametrize("entry", CUDA_HONEST, ids=lambda e: e.name)
def test_cuda_honest_passes(entry):
    assert_passes(entry, "cuda")


@pytest.mark.parametrize("name, want", [("hidden_stream", Status.FAIL), ("triton_gemm_ieee", Status.PASS),
                                        ("synced_side_stream", Status.PASS)])
def test_streams_at_4096(name, want):
    report = vet_entry(by_name(name), "cuda", problem=load_problem("matmul", (4096, 4096, 4096)))
    assert report.finding(CheckId.STREAMS).status is want, report.finding(CheckId.STREAMS)


@pytest.mark.parametrize("shape", [(256, 256, 256), (4096, 4096, 4096)])
@pytest.mark.parametrize("name, hidden", [("hidden_stream", True), ("triton_gemm_ieee", False),
                                          ("synced_side_stream", False)])
def test_kernel_audit_witnesses_hidden_work(name, hidden, shape):
    """The profiler's trace is a witness of its own: hidden work out of the caller's stream order
    at both sizes, nothing for honest kernels and a side stream the caller waits on."""
    report = vet_entry(by_name(name), "cuda", problem=load_problem("matmul", shape), audit="always")
    streams = report.finding(CheckId.STREAMS)
    assert bool(streams.evidence.get("trace")) is hidden, streams
    audit = report.finding(CheckId.KERNEL_AUDIT)
    assert audit.status is (Status.PASS if not hidden else audit.status), audit
    assert audit.evidence.get("kernels"), audit


def test_audit_auto_is_a_second_tier():
    """`auto` traces only candidates every other check passed: a cheap reject pays no profiler."""
    cheat = vet_entry(by_name("unordered_stream"), "cuda")   # the probe, a cheap check, rejects it
    assert cheat.finding(CheckId.KERNEL_AUDIT).status is Status.SKIP
    honest = vet_entry(by_name("triton_gemm_ieee"), "cuda")
    assert honest.finding(CheckId.KERNEL_AUDIT).status is Status.PASS
    assert "audit" in honest.phases_s


def test_judge_gives_device_memory_back():
    """The judge compares on the device (references, inputs, outputs); once the report is out that
    memory goes back to the device, not to the judge's allocator cache, where the next candidate's
    worker could not have it."""
    import torch

    one_tensor = 4096 * 4096 * 4   # an input, an output or a reference of this vet: 64 MiB
    before = torch.cuda.memory_allocated() if torch.cuda.is_initialized() else 0
    vet_entry(by_name("triton_gemm_ieee"), "cuda", problem=load_problem("matmul", (4096, 4096, 4096)),
              audit="never")
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    # What may stay: cuBLAS's workspace (32 MiB on Hopper, allocated once per handle and stream and
    # kept by torch), and the free part of the segment it sits in (s7 on the H200: 32 MiB allocated
    # in a 64 MiB segment, depending on what ran before). No tensor of the vet, no idle cache.
    assert allocated - before < one_tensor, torch.cuda.memory_summary()
    assert reserved - allocated < one_tensor, torch.cuda.memory_summary()


def test_the_judges_warm_up_runs_on_cuda():
    """The CLI's warm-up of the judge's device (cuBLAS's handle, the checks' kernels) on CUDA."""
    import torch
    from kernelvet import judge
    judge.warm_judge("cuda")
    assert torch.cuda.is_initialized()


def test_a_small_problem_is_judged_on_the_host_and_the_judge_starts_no_cuda():
    """256^3 (34 MFLOP): references and comparisons on the host, the device described by the worker,
    and no CUDA context in the judge, in a fresh process (this one's may be started by other tests).
    1024^3: judged on the device; then 256^3 again, on the device (the judge's context is started)."""
    import subprocess
    import sys
    script = (
        "import torch\n"
        "from kernelvet import load_problem, vet\n"
        "from kernelvet.practice import by_name\n"
        "path = by_name('triton_gemm_ieee').path\n"
        "small = vet(path, load_problem('matmul', (256, 256, 256)), device='cuda', prepare_next=False)\n"
        "print('small', small.verdict, small.device['judged_on'], small.device['name'], torch.cuda.is_initialized())\n"
        "big = vet(path, load_problem('matmul', (1024, 1024, 1024)), device='cuda', prepare_next=False)\n"
        "print('big', big.verdict, big.device['judged_on'], torch.cuda.is_initialized())\n"
        "again = vet(path, load_problem('matmul', (256, 256, 256)), device='cuda', prepare_next=False)\n"
        "print('again', again.verdict, again.device['judged_on'])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    lines = {ln.split()[0]: ln.split()[1:] for ln in done.stdout.splitlines() if ln.split()}
    assert done.returncode == 0, done.stderr[-2000:]
    verdict, judged_on, *name, cuda_started = lines["small"]
    assert (verdict, judged_on, cuda_started) == ("pass", "cpu", "False"), lines
    assert lines["big"] == ["pass", "cuda:0", "True"] and lines["again"] == ["pass", "cuda:0"], lines
    import torch
    assert " ".join(name) == torch.cuda.get_device_name(0), lines


HOST_WORK_THEN_MM = '''
import time
import torch
from torch import nn


class ModelNew(nn.Module):
    def forward(self, A, B):
        t = time.perf_counter()
        while time.perf_counter() - t < 1e-3:   # a millisecond of the host's work inside the call
            pass
        return torch.mm(A, B)
'''


def test_host_work_inside_the_call_is_timed(write):
    """A call whose host is slower than its device work is timed at the host's pace, as do_bench
    times it: no spin before its reps hides the millisecond it spends on the host, and the
    judge's clock agrees with the reported time."""
    report = vet(write("host_work.py", HOST_WORK_THEN_MM), load_problem("matmul", (256, 256, 256)),
                 device="cuda", library_policy="off", prepare_next=False)
    assert report.verdict is Verdict.PASS, [f.summary for f in report.failed]
    assert report.timing.median_ms >= 0.8 and "host-bound" in report.timing.method, report.timing
    assert report.finding(CheckId.TIMERS).status is Status.PASS


def test_vets_in_a_row_start_the_next_worker_before_their_clocks():
    """On one launcher, each vet but the last starts the next vet's worker during its candidate
    phase and waits for its device before its clocks; every verdict as alone."""
    from kernelvet import spawn
    launcher = spawn.shared_launcher()
    path = by_name("triton_gemm_ieee").path
    prob = load_problem("matmul", (512, 512, 512))
    reports = [vet(path, prob, device="cuda", launcher=launcher, prepare_next=i < 2) for i in range(3)]
    assert all(r.verdict is Verdict.PASS for r in reports), [[f.summary for f in r.failed] for r in reports]
    assert "spare-wait" in reports[0].phases_s and "spare-wait" in reports[1].phases_s
    assert "spare-wait" not in reports[2].phases_s
