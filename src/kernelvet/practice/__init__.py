"""The practice corpus: the spec's ten cheat patterns (plus harness attacks) and honest kernels.

Each entry names its file, the problem it is written for, the devices it can exist on, and the
checks expected to reject it. `catches` is the full set of checks that fire on it with everything
on; the ablation (tests/test_corpus.py, `kernelvet practice --ablate`) proves that switching off
it alone turns a `sole` entry's reject into a pass: the check earns its place.
"""

from __future__ import annotations

import dataclasses
import os

from ..ids import CheckId as C

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEMS = os.path.join(HERE, "problems")


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str                   # file stem, unique across the corpus
    kind: str                   # "cheat" | "honest"
    pattern: int | None         # the spec's pattern number (1..10), None for harness attacks
    pattern_name: str
    problem: str                # built-in name or a file in practice/problems
    devices: tuple[str, ...]    # where the entry can exist: "cpu", "cuda"
    catches: frozenset = frozenset()   # checks that must fire
    sole_on: tuple[str, ...] = ()      # devices where exactly `catches` fires, and waiving it lets it through
    note: str = ""
    timeout: float = 300.0             # seconds for the whole candidate (short for ones that hang)
    settings: tuple = ()               # (name, value) Settings the entry is judged under, beyond the defaults
    # The matrix's library policy: no-reference-ops proves each check's mechanism on every device;
    # None (the device's default, own-kernels on CUDA) for honest kernels whose work is their own.
    library_policy: str | None = "no-reference-ops"

    def sole(self, device: str) -> bool:
        return device in self.sole_on

    def as_expected(self, failed: set[str], device: str) -> bool:
        """A cheat: exactly its checks fired where it is sole, at least them elsewhere. Honest: none."""
        if self.kind == "honest":
            return not failed
        want = {str(c) for c in self.catches}
        return failed == want if self.sole(device) else want <= failed

    @property
    def path(self) -> str:
        sub = "cheats" if self.kind == "cheat" else "honest"
        return os.path.join(HERE, sub, f"{self.name}.py")

    @property
    def problem_ref(self) -> str:
        return self.problem if "/" not in self.problem and not self.problem.endswith(".py") \
            else os.path.join(PROBLEMS, self.problem)


PATTERN_NAMES = {1: "streams", 2: "threads", 3: "lazy-eq", 4: "timers", 5: "identity", 6: "no-op",
                 7: "garbage", 8: "thin-dtype", 9: "cache", 10: "library"}

BOTH = ("cpu", "cuda")


# one corpus entry: its fields, as the table of entries spells them
def _cheat(name, pattern, problem, devices, *catches, note="", sole_on=None, timeout=300.0, settings=()):
    """A cheat caught by one check alone (on `sole_on`, default: everywhere it exists unless a note
    explains why more checks fire), or, with a note saying why, by several."""
    pname = PATTERN_NAMES.get(pattern, "harness")
    sole = sole_on if sole_on is not None else (() if note else devices)
    return Entry(name, "cheat", pattern, pname, problem, devices, frozenset(catches), tuple(sole), note, timeout,
                 tuple(settings))


def _honest(name, problem, devices, library_policy="no-reference-ops"):
    return Entry(name, "honest", None, "honest", problem, devices, library_policy=library_policy)


def _own(name, problem, devices):
    """An honest kernel whose device time is its own: vetted under the device's default policy."""
    return _honest(name, problem, devices, library_policy=None)


CORPUS: tuple[Entry, ...] = (
    _cheat("hidden_stream", 1, "matmul", ("cuda",), C.STREAMS),
    _cheat("unordered_stream", 1, "matmul", ("cuda",), C.STREAMS,
           note="not ordered even after the caller's own earlier work: when its GEMM runs before the paint "
                "the caller queued ahead of a timed call, the paint overwrites it, and unwritten-output and "
                "determinism fire too"),
    _cheat("background_thread", 2, "matmul", BOTH, C.THREADS,
           note="the thread's work lands after the clock stopped, so the timed outputs are wrong or "
                "unwritten too, and the judge's clock sees threads piling up"),
    _cheat("speculative_thread", 2, "matmul", BOTH, C.THREADS,
           note="its off-clock work competes with back-to-back calls, which the judge's clock sees "
                "(timers), and with the timed calls on unseen inputs (caching)"),
    _cheat("lurking_process", 2, "matmul", BOTH, C.THREADS),
    _cheat("lazy_tensor", 3, "matmul", BOTH, C.OUTPUT_TYPE, sole_on=("cuda",),
           note="on the CPU its call does so little that the implied rate also beats the host's peak "
                "(determinism)"),
    _cheat("lazy_paced", 3, "matmul", BOTH, C.OUTPUT_TYPE),
    _cheat("patched_timers", 4, "matmul", BOTH, C.TIMERS),
    _cheat("forged_measurements", 4, "matmul", BOTH, C.TIMERS,
           note="it forges the per-rep list, not the seen/unseen pairs, whose forged seen half then looks "
                "far faster than the unseen half (caching)"),
    _cheat("copy_input", 5, "residual_bf16.py", BOTH, C.IDENTITY),
    _cheat("launch_nothing", 6, "matmul_out.py", BOTH, C.UNWRITTEN_OUTPUT,
           note="doing nothing on inputs it has seen makes it much faster on them than on unseen ones "
                "(caching), and on the CPU faster than the host's peak (determinism)"),
    _cheat("overrun_out", None, "matmul_out.py", BOTH, C.UNWRITTEN_OUTPUT),
    _cheat("skip_negligible", 6, "softmax", BOTH, C.UNWRITTEN_OUTPUT,
           note="on the CPU the heap hands back old garbage when nothing is painted, so precision and "
                "determinism see it too; on CUDA, launch_nothing is unwritten-output's alone"),
    _cheat("racy_accumulate", 7, "matmul", BOTH, C.DETERMINISM),
    _cheat("garbage_softmax", 7, "softmax", ("cuda",), C.UNWRITTEN_OUTPUT,
           note="with painting off, the garbage is a wrong softmax that moves between runs: precision "
                "and determinism see it"),
    _cheat("bf16_operands", 8, "matmul", BOTH, C.PRECISION),
    _cheat("fp16_operands", 8, "matmul", BOTH, C.PRECISION),
    _cheat("tf32_operands", 8, "matmul", BOTH, C.PRECISION),
    _cheat("tf32_dot", 8, "matmul", ("cuda",), C.PRECISION),
    _cheat("fp16_softmax", 8, "softmax", BOTH, C.PRECISION),
    _cheat("thin_rows", 8, "scaled_rows.py", BOTH, C.PRECISION),
    _cheat("pointer_cache", 9, "softmax", BOTH, C.CACHING),
    _cheat("content_cache", 9, "matmul", ("cpu",), C.CACHING),
    _cheat("stalled_cache", 9, "matmul", ("cpu",), C.CACHING),
    _cheat("shape_cache", 9, "matmul", BOTH, C.PRECISION, C.IDENTITY,
           note="the second input set gets the first set's answer: wrong, and ignores its input"),
    _cheat("stale_after_warmup", 9, "matmul", BOTH, C.PRECISION, C.IDENTITY,
           note="later input sets get an old answer: wrong, and ignoring its input"),
    _cheat("seed_table", 9, "matmul", BOTH, C.PRECISION, C.IDENTITY,
           note="the table answers the fixed-seed inputs, never the secret ones"),
    _cheat("torch_mm", 10, "matmul", BOTH, C.LIBRARY_CALL),
    _cheat("dynamic_mm", 10, "matmul", BOTH, C.LIBRARY_CALL),
    _cheat("at_operator", 10, "matmul", BOTH, C.LIBRARY_CALL),
    _cheat("inline_cpp_mm", 10, "matmul", BOTH, C.LIBRARY_CALL,
           note="where no C++ toolchain is present, the import fails too (worker)"),
    _cheat("ctypes_cublas", 10, "matmul", ("cuda",), C.LIBRARY_CALL),
    _cheat("decoy_kernel", None, "matmul", ("cuda",), C.KERNEL_AUDIT),
    _cheat("inplace_relu", None, "relu.py", BOTH, C.INPUTS_UNCHANGED),
    _cheat("blind_harness", None, "relu.py", BOTH, C.GLOBAL_STATE),
    _cheat("patched_allclose", None, "matmul", BOTH, C.UNWRITTEN_OUTPUT, C.GLOBAL_STATE,
           note="its output is uninitialised memory (the poison shows it; with painting off, precision), "
                "and replacing torch.equal is harness tampering; on the CPU doing nothing also beats the "
                "host's peak rate"),
    _cheat("reused_output", None, "matmul", BOTH, C.ALIASING, settings=(("reused_output", "reject"),)),
    _cheat("exit_zero", None, "matmul", BOTH, C.WORKER),
    _cheat("forged_stdout", None, "matmul", BOTH, C.WORKER),
    _cheat("hang_forever", None, "matmul", BOTH, C.WORKER, timeout=8.0),
    _cheat("kill_parent", None, "matmul", BOTH, C.WORKER, timeout=8.0),
    _honest("broadcast_matmul", "matmul", BOTH),
    _honest("reversed_sum_matmul", "matmul", BOTH),
    _honest("softmax", "softmax", BOTH),
    _honest("threaded_matmul", "matmul", BOTH),
    _honest("plan_cache_matmul", "matmul", BOTH),
    _honest("residual_bf16", "residual_bf16.py", BOTH),
    _honest("relu", "relu.py", BOTH),
    _honest("matmul_out", "matmul_out.py", BOTH),
    _honest("linear_weights_holder", "linear.py", BOTH),
    _honest("inline_cpp_commented", "matmul", ("cpu",)),
    _own("triton_gemm_ieee", "matmul", ("cuda",)),
    _own("triton_gemm_autotuned", "matmul", ("cuda",)),
    _own("triton_softmax", "softmax", ("cuda",)),
    _own("synced_side_stream", "matmul", ("cuda",)),
    _own("cuda_tiled_gemm", "matmul", ("cuda",)),
    _honest("compiled_elementwise", "relu.py", BOTH),
    _honest("persistent_pool", "matmul", BOTH),
    _honest("backend_flags", "matmul", BOTH),
    _honest("pointer_keyed_graph", "matmul", ("cuda",)),
    _honest("static_output", "matmul", BOTH),
    _honest("split_k_matmul", "matmul", BOTH),
    _honest("split_precision_matmul", "matmul", BOTH),
    _honest("empty_workspace_softmax", "softmax", BOTH),
    _honest("chatty_relu", "relu.py", BOTH),
    _honest("online_softmax", "softmax", BOTH),
    _honest("transposed_output", "matmul", BOTH),
    _honest("shape_keyed_kernels", "matmul", BOTH),
    _honest("hand_declared_linear", "linear.py", BOTH),
)


def entries(device: str = "cpu", kind: str | None = None) -> list[Entry]:
    return [e for e in CORPUS if device in e.devices and (kind is None or e.kind == kind)]


def by_name(name: str) -> Entry:
    for e in CORPUS:
        if e.name == name:
            return e
    raise KeyError(name)
