"""What does the CLI add to `python -c "import torch"`, and where does it go?

Each round runs, in fresh processes: `import torch` alone, then the check. Every check prints its
start-up marks (`--verbose`) and two stamps of this script's: when its Python reached main (so:
the interpreter's start) and when it called os._exit (so: from there to the exit status reaching
us, the process's teardown, the judge's CUDA context included). The rounds where the CLI adds
most are those where the launcher's own `import torch` ends well after the CLI's: the host's
pace, not kernelvet's work, sets the spread.
Usage: python bench/diagnostics/cli_startup.py OUT.json [ROUNDS]
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from kernelvet.practice import by_name

_WRAP = """
import os, sys, time
t_main = time.monotonic()
import kernelvet.cli as cli
_exit = os._exit
def _stamped(code):
    sys.stderr.write(f"STAMPS {t_main} {time.monotonic()}\\n")
    sys.stderr.flush()
    _exit(code)
cli.os._exit = _stamped
sys.argv = ["kernelvet"] + sys.argv[1:]
cli.entry()
"""


def _check() -> dict:
    argv = ["check", by_name("triton_gemm_ieee").path, "--ref", "matmul", "--device", "cuda", "--verbose",
            "--no-server"]
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _WRAP] + argv, capture_output=True, text=True)
    t_end = time.monotonic()
    marks = [ln for ln in done.stdout.splitlines() if ln.startswith("start-up")]
    stamps = [ln.split()[1:] for ln in done.stderr.splitlines() if ln.startswith("STAMPS")]
    row = {"wall_s": t_end - t0, "rc": done.returncode, "start_up": marks[-1] if marks else done.stderr[-400:]}
    if stamps:
        t_main, t_exit = (float(x) for x in stamps[-1])
        row.update(python_start_s=t_main - t0, exit_s=t_end - t_exit)
    return row


def _import_torch() -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    return time.monotonic() - t0


def main() -> None:
    out, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 6
    res = {"rounds": [], "warm_up": _check()}   # Triton's cache filled before the rounds count
    for r in range(rounds):
        res["rounds"].append({"import_torch_s": _import_torch(), "check": _check()})
        print(r, json.dumps(res["rounds"][-1]), flush=True)
    adds = [x["check"]["wall_s"] - x["import_torch_s"] for x in res["rounds"]]
    res["adds_median_s"] = statistics.median(adds)
    print(f"adds {[round(a, 2) for a in adds]}, median {statistics.median(adds):.2f} s; exit "
          f"{[round(x['check'].get('exit_s', float('nan')), 2) for x in res['rounds']]} s", flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
