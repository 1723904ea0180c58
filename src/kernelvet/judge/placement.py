"""Where the judge compares: on the host for a small problem in a judge that has not started
CUDA, else on the judge's device; and the first-use costs of either, paid ahead."""

from __future__ import annotations

import torch

from .. import devices, metrics
from ..errors import UsageError
from ..problem import reference64
from .reference import _flops_in_float64, _flops_on_meta


# A CUDA problem this small is judged on the host (float64 references, comparisons) by a judge
# that has not started CUDA: a few milliseconds of host arithmetic per input set, where starting
# the judge's own CUDA context cost a cold `kernelvet check` 0.5-0.9 s on the H200. The 256^3
# GEMM (34 MFLOP, 0.2 M elements) is; 512^3 and a 4096 x 4096 softmax are not.
HOST_JUDGE_FLOPS = 1 << 26
HOST_JUDGE_ELEMENTS = 1 << 20


def host_judges(dev: torch.device, flops: float | None, elements: int | None = None) -> bool:
    """Whether a vet on `dev` is judged on the host: CPU runs always; CUDA runs whose reference
    is known to be small (FLOPs counted or declared; tensor elements of one input set, if known)."""
    if dev.type != "cuda":
        return True
    return flops is not None and flops <= HOST_JUDGE_FLOPS and (elements or 0) <= HOST_JUDGE_ELEMENTS


def warm_judge(device: str = "auto", flops: float | None = None, meta_flops: bool = True) -> None:
    """The judge's first-use costs where it will judge, paid now: on CUDA the context, cuBLAS's
    handle (the float64 references) and the kernels the checks compare with (CUDA loads each one
    the first time it runs); on the host (a CPU run, or a problem of `flops` small enough to be
    judged there) the host's kernels. The CLI calls this while its launcher starts, `kernelvet
    serve` before it listens; otherwise the first vet pays them. A bad device is the vet's to report."""
    try:
        dev = devices.resolve(device)
    except UsageError:
        return
    if host_judges(dev, flops):
        dev = torch.device("cpu")
    # 256 x 256: sizes past the small-tensor paths (a sort of 64 elements and one of 65536 run
    # different kernels; the H200's cold CLI still paid ~0.15 s in quantile with 8 x 8 here)
    ref = torch.rand(256, 256, device=dev, dtype=torch.float64) + 0.5
    torch.mm(ref, ref)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        out = ref.to(dtype)
        metrics.rel_error(out, ref)
        metrics.ulp_stats(out, ref, dtype)
        metrics.rel_distance(out, ref)
        metrics.same_bits(out, out.clone())
        metrics.poison_count(out, (metrics.nan_poison_word(dtype, 1),))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    # the first FLOP count loads torch's FLOP counter (which imports Triton), and on the meta
    # device its meta kernels (~1.4 s on a 2-core host; `meta_flops`: a run of many vets, which
    # will meet a big problem); not for a problem that declares its FLOPs
    if flops is None:
        linear, x = torch.nn.Linear(4, 4), [torch.ones(2, 4)]
        if meta_flops:
            _flops_on_meta(linear, x)
        _flops_in_float64(linear, x)


# One input set of more bytes than this is drawn by the CUDA device's generator (Problem.draw_inputs).
DEVICE_DRAW_BYTES = 64 << 20


def draws_on(prob, dev: torch.device) -> torch.device | None:
    """The device whose generator draws the input sets: the CUDA device for a big problem (the CPU
    generator draws ~0.5 GB/s), else None (the host's, as KernelBench draws; a small problem's judge
    starts no CUDA for it)."""
    if dev.type != "cuda":
        return None
    nbytes = prob.set_bytes()
    return dev if nbytes is not None and nbytes > DEVICE_DRAW_BYTES else None


def _judged_on(dev: torch.device, flops: float | None, model, sample: list):
    """Where the checks compare: the host for a CPU run, and for a small problem (`host_judges`)
    whose reference runs there, if this process has not started CUDA (a judge that has, a warm
    API loop or `kernelvet serve`, compares on the device: 0.85 s a warm 256^3 vet on the H200
    against 0.91 s on the host); else `dev`. With the float64 reference of `sample`, if made here."""
    cpu = torch.device("cpu")
    if dev.type != "cuda":
        return cpu, None
    if torch.cuda.is_initialized() or not host_judges(
            dev, flops, sum(x.numel() for x in sample if isinstance(x, torch.Tensor))):
        return dev, None
    try:   # a reference that only runs on the device (it moves its inputs there itself) is judged there
        return cpu, reference64(model, sample, cpu)
    except Exception:  # noqa: BLE001 - the device's run of it reports whatever is wrong with it
        return dev, None


# What torch, its extension builder and Triton say when a candidate asks for a GPU the machine
# has not got: the candidate cannot be judged here, which is no finding against it.
_NO_GPU_HERE = ("CUDA_HOME environment variable is not set", "Torch not compiled with CUDA enabled",
                "Found no NVIDIA driver", "No CUDA GPUs are available", "no CUDA-capable device is detected",
                "0 active drivers")


def needs_a_gpu(dev: torch.device, candidate_error: dict | None, candidate: str) -> None:
    """A candidate vetted on the host that failed for want of a GPU (CUDA sources to build, tensors
    made on `cuda`): one line saying so (exit 2), not a reject for what no CPU can run."""
    error = (candidate_error or {}).get("error", "")
    if dev.type == "cpu" and any(s in error for s in _NO_GPU_HERE):
        raise UsageError(f"{candidate}: the candidate needs a CUDA device, which a vet on the CPU has not got "
                         f"({error.splitlines()[0][:160]}); vet it with --device cuda")
