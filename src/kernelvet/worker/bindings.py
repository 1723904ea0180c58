"""What the worker observes with, bound before the candidate exists: clocks, syncs and tensor
primitives (`_Bound`), the process-wide state a candidate could flip (`global_state`), and
bitwise comparisons that use only the bound primitives."""

from __future__ import annotations

import sys
import threading
import time
import timeit

import torch
import torch.autograd.profiler

from ..metrics import INT_OF_WIDTH


_DUMPED_OPS = ("aten::equal", "aten::clone", "aten::copy_", "aten::fill_.Scalar", "aten::empty.memory_format",
               "aten::eq.Tensor", "aten::ne.Tensor", "aten::ne.Scalar", "aten::any", "aten::add_.Tensor",
               "aten::cat", "aten::mm", "aten::matmul", "aten::_to_copy", "aten::zero_")


class _Bound:
    """Clocks, syncs and tensor primitives, captured before the candidate exists."""

    CLOCKS = {
        "time.perf_counter": (time, "perf_counter"), "time.perf_counter_ns": (time, "perf_counter_ns"),
        "time.monotonic": (time, "monotonic"), "time.monotonic_ns": (time, "monotonic_ns"),
        "time.time": (time, "time"), "time.time_ns": (time, "time_ns"), "time.sleep": (time, "sleep"),
        "timeit.default_timer": (timeit, "default_timer"),
        "torch.cuda.synchronize": (torch.cuda, "synchronize"),
        "torch.cuda.Event": (torch.cuda, "Event"),
        "torch.cuda.Event.record": (torch.cuda.Event, "record"),
        "torch.cuda.Event.elapsed_time": (torch.cuda.Event, "elapsed_time"),
        "torch.cuda.Event.synchronize": (torch.cuda.Event, "synchronize"),
        "torch.cuda.Event.query": (torch.cuda.Event, "query"),
        "torch.cuda.Stream.synchronize": (torch.cuda.Stream, "synchronize"),
        "torch.cuda.current_stream": (torch.cuda, "current_stream"),
        "torch.cuda.empty_cache": (torch.cuda, "empty_cache"),
        "torch.cuda._sleep": (torch.cuda, "_sleep"),
        "torch.autograd.profiler.profile": (torch.autograd.profiler, "profile"),
        # what that profile calls, looked up in its module when it runs: a forged trace goes there
        **{f"torch.autograd.profiler.{f}": (torch.autograd.profiler, f)
           for f in ("_prepare_profiler", "_enable_profiler", "_disable_profiler") if hasattr(torch.autograd.profiler, f)},
        "threading.enumerate": (threading, "enumerate"),
        "threading.active_count": (threading, "active_count"),
        "torch.equal": (torch, "equal"), "torch.empty": (torch, "empty"),
        "torch.Tensor.clone": (torch.Tensor, "clone"), "torch.Tensor.copy_": (torch.Tensor, "copy_"),
        "torch.Tensor.fill_": (torch.Tensor, "fill_"), "torch.Tensor.view": (torch.Tensor, "view"),
        "torch.Tensor.untyped_storage": (torch.Tensor, "untyped_storage"),
        "torch.Tensor.narrow": (torch.Tensor, "narrow"),
        "torch.Tensor.zero_": (torch.Tensor, "zero_"),
        "torch.zeros": (torch, "zeros"), "torch.cat": (torch, "cat"), "torch.ne": (torch, "ne"),
        "torch.any": (torch, "any"), "torch.Tensor.add_": (torch.Tensor, "add_"), "torch.sum": (torch, "sum"),
    }

    def __init__(self):
        self.originals = {name: getattr(obj, attr) for name, (obj, attr) in self.CLOCKS.items()}
        o = self.originals
        self.pc, self.pc_ns, self.sleep = o["time.perf_counter"], o["time.perf_counter_ns"], o["time.sleep"]
        self.cuda_sync, self.Event = o["torch.cuda.synchronize"], o["torch.cuda.Event"]
        self.ev_record, self.ev_elapsed = o["torch.cuda.Event.record"], o["torch.cuda.Event.elapsed_time"]
        self.ev_sync = o["torch.cuda.Event.synchronize"]
        self.empty_cache, self.spin = o["torch.cuda.empty_cache"], o["torch.cuda._sleep"]
        self._profile = o["torch.autograd.profiler.profile"]
        self.enumerate = o["threading.enumerate"]
        self.equal, self.empty = o["torch.equal"], o["torch.empty"]
        self.clone, self.copy_ = o["torch.Tensor.clone"], o["torch.Tensor.copy_"]
        self.fill_, self.view, self.zero_ = o["torch.Tensor.fill_"], o["torch.Tensor.view"], o["torch.Tensor.zero_"]
        self.storage, self.narrow = o["torch.Tensor.untyped_storage"], o["torch.Tensor.narrow"]
        self.zeros, self.cat, self.ne, self.any = o["torch.zeros"], o["torch.cat"], o["torch.ne"], o["torch.any"]
        self.add_, self.sum = o["torch.Tensor.add_"], o["torch.sum"]

    def kernel_trace(self, cuda: bool = True, cpu: bool = False):
        """Torch's profiler (Kineto; CUPTI for CUDA) one level below `torch.profiler.profile`, whose
        start asks `hasattr(torch, "_inductor")` and so imports Inductor and Dynamo: ~5 s in a
        fresh worker on an H200, paid by every audit once the launcher stopped
        importing Dynamo. Events: `.kineto_results.events()` after the block."""
        return self._profile(use_cpu=cpu or not cuda, use_device="cuda" if cuda else None, use_kineto=True)

    def moved(self) -> list[str]:
        return sorted(name for name, (obj, attr) in self.CLOCKS.items()
                      if getattr(obj, attr, None) is not self.originals[name])

    @staticmethod
    def is_clock(name: str) -> bool:
        """Clocks, events and syncs belong to `timers`; the other primitives are harness state."""
        return name.startswith(("time.", "timeit.", "torch.cuda."))


def global_state() -> dict:
    """Process-wide settings a candidate could flip to change what the harness sees."""
    b = torch.backends
    state = {
        "allow_tf32 (cuda.matmul)": b.cuda.matmul.allow_tf32,
        "allow_tf32 (cudnn)": b.cudnn.allow_tf32,
        "fp16 reduced-precision reduction": b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "bf16 reduced-precision reduction": b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "cudnn.benchmark": b.cudnn.benchmark,
        "cudnn.deterministic": b.cudnn.deterministic,
        "cudnn.enabled": b.cudnn.enabled,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "torch_function_mode_stack": torch._C._len_torch_function_stack(),
        "torch_dispatch_mode_stack": torch._C._len_torch_dispatch_stack(),
        "sys.settrace": sys.gettrace() is not None,
        "sys.setprofile": sys.getprofile() is not None,
    }
    for op in _DUMPED_OPS:
        try:
            state[f"dispatch {op}"] = _hash_text(torch._C._dispatch_dump_table(op))
        except RuntimeError:
            pass
    # The harness itself: its modules and their functions must be the ones it loaded, under every
    # name a harness module calls them by (the worker's modules call each other's by their own).
    for name, mod in sorted(sys.modules.items()):
        if _is_harness(name):
            state[f"module {name}"] = id(mod)
            for attr, val in sorted(vars(mod).items()):
                if callable(val) and _is_harness(getattr(val, "__module__", None)):
                    state[f"{name}.{attr}"] = id(val)
    return state


def _is_harness(module) -> bool:
    return isinstance(module, str) and (module == "kernelvet" or module.startswith("kernelvet."))


def _hash_text(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_memory_stats = torch.cuda.memory_stats   # bound before any candidate exists


def _same_bits(bound: _Bound, a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN payloads included), immune to the candidate's __eq__."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    width = a.element_size()
    ai = bound.view(a.contiguous(), INT_OF_WIDTH[width]) if a.dtype != torch.bool else a
    bi = bound.view(b.contiguous(), INT_OF_WIDTH[width]) if b.dtype != torch.bool else b
    return bool(bound.equal(ai, bi))


def _bits_differ(bound: _Bound, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """`_same_bits` negated, left on the device (no host sync); shapes and dtypes already equal."""
    if a.numel() == 0:
        return bound.zeros((), dtype=torch.bool, device=a.device)
    if a.dtype == torch.bool:
        return bound.any(bound.ne(a, b))
    width = INT_OF_WIDTH[a.element_size()]
    return bound.any(bound.ne(bound.view(a.contiguous(), width), bound.view(b.contiguous(), width)))
