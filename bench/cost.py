"""What does a vet cost, through the Python API and through the CLI?

The API (warm launcher, warm Triton cache): an honest 256^3 Triton GEMM with the kernel audit
(`--audit auto`) and without, and early rejects, each alone and back to back, with their phases.
The CLI: `kernelvet check` against `python -c "import torch"` alone, in alternating pairs (what the
CLI adds is the median of the pairs' differences), and the same check served by `kernelvet serve`.
Needs a CUDA device.

Usage: python bench/cost.py OUT_DIR [--api | --cli]
Writes OUT_DIR/gpu-bench.json, OUT_DIR/gpu-bench.md and the CLI's reports.
"""

from __future__ import annotations

import sys

PARTS = {"--api": ("latency",), "--cli": ("cli",), None: ("latency", "cli")}


def _usage():
    """A wrong command line: the usage on stderr, exit status 2."""
    print(next(p for p in __doc__.split("\n\n") if p.startswith("Usage")), file=sys.stderr)
    raise SystemExit(2)


def bench_args(argv: list[str]) -> list[str]:
    """gpu_bench.py's arguments for these rows: OUT_DIR and the parts."""
    if not argv or argv[0].startswith("-") or len(argv) > 2 or (len(argv) == 2 and argv[1] not in PARTS):
        _usage()
    return [argv[0], "--parts=" + ",".join(PARTS[argv[1] if len(argv) == 2 else None])]


def main(argv: list[str] | None = None) -> None:
    import gpu_bench   # bench/ is this script's directory; imports torch and Triton
    gpu_bench.main(bench_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
