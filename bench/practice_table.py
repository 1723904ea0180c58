"""On this device, is every cheat rejected, every honest kernel passed, and every check the only
catcher of at least one cheat?

Runs `kernelvet practice --ablate` (every practice entry against the naive bench and against
kernelvet, then each `sole` cheat again with its check waived) and judges the JSON it writes as
practice_merge.py judges a run split across several invocations.

Usage: python bench/practice_table.py OUT_DIR [--device=cuda|cpu] [PATTERN ...]
Writes OUT_DIR/practice-<device>.json and OUT_DIR/practice-<device>.txt; exit 0 when all of the
above holds for the entries run (a run of some patterns only is joined with practice_merge.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

import practice_merge   # bench/ is this script's directory


def practice_command(out_json: str, device: str, patterns: list[str]) -> list[str]:
    return [sys.executable, "-m", "kernelvet", "practice", *patterns, "--device", device, "--ablate",
            "--json", out_json]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0].startswith("-"):
        print(next(p for p in __doc__.split("\n\n") if p.startswith("Usage")), file=sys.stderr)
        return 2
    device = next((a.split("=", 1)[1] for a in argv[1:] if a.startswith("--device=")), "cuda")
    patterns = [a for a in argv[1:] if not a.startswith("--device=")]
    os.makedirs(argv[0], exist_ok=True)
    out_json = os.path.join(argv[0], f"practice-{device}.json")
    with open(os.path.join(argv[0], f"practice-{device}.txt"), "w") as log:
        cmd = practice_command(out_json, device, patterns)
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if not os.path.exists(out_json):
        print(f"kernelvet practice wrote no results (exit {rc}); see practice-{device}.txt", file=sys.stderr)
        return 1
    if patterns:   # some patterns only: practice's own verdict; practice_merge.py joins the parts
        with open(os.path.join(argv[0], f"practice-{device}.txt")) as fh:
            print(fh.read().rstrip().rsplit("\n", 1)[-1])
        return 0 if rc == 0 else 1
    return practice_merge.main([os.path.join(argv[0], f"practice-{device}-judged.json"), out_json])


if __name__ == "__main__":
    sys.exit(main())
