"""Does kernelvet time a kernel as `triton.testing.do_bench` does?

Honest Triton float32 GEMMs at 256, 1024, 4096 and 8192 and a Triton softmax, and each problem's
torch reference: do_bench (in a process of its own) and kernelvet alternate, three rounds or more,
and the table compares their medians; the target is kernelvet within 3% of do_bench (see
gpu_bench.py for how a host-bound do_bench run is told apart). Needs a CUDA device.

Usage: python bench/timing.py OUT_DIR [--quick] [--kernel] [--processes] [--pin=CPU]
  (--quick: 256, 1024 and the softmax only; --kernel: the 256^3 GEMM's CUPTI duration beside both
  clocks; --processes: do_bench against itself in fresh processes, the noise floor)
Writes OUT_DIR/gpu-bench.json and OUT_DIR/gpu-bench.md.
"""

from __future__ import annotations

import sys

PARTS = ("small", "big")
EXTRA = {"--kernel": "kernel", "--processes": "processes"}


def _usage():
    """A wrong command line: the usage on stderr, exit status 2."""
    print(next(p for p in __doc__.split("\n\n") if p.startswith("Usage")), file=sys.stderr)
    raise SystemExit(2)


def bench_args(argv: list[str]) -> list[str]:
    """gpu_bench.py's arguments for these rows: OUT_DIR, the parts, the options passed through."""
    if not argv or argv[0].startswith("-"):
        _usage()
    extra = [EXTRA[a] for a in argv[1:] if a in EXTRA]
    rest = [a for a in argv[1:] if a not in EXTRA]
    return [argv[0], "--parts=" + ",".join(PARTS + tuple(extra)), *rest]


def main(argv: list[str] | None = None) -> None:
    import gpu_bench   # bench/ is this script's directory; imports torch and Triton
    gpu_bench.main(bench_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
