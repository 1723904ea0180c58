"""Session diagnostic (H200): what the CLI adds to `python -c "import torch"`, with and without
the forked rival launcher (cli.FORK_WHEN_LATE), and where the rest goes.

Each round runs, in fresh processes and in this order: `import torch` alone, the check with the
fork allowed, the check without it (the order of the two checks alternates from round to round).
Every check prints its start-up marks (`--verbose`) and two stamps of this script's: when its
Python reached main (so: the interpreter's start) and when it called os._exit (so: from there to
the exit status reaching us, the process's teardown, the judge's CUDA context included).
Usage: python bench/diag_cli.py OUT.json [ROUNDS]

Sessions 12-13 asked the same of the environment and of two imports at once (the version of this
script before session 14): neither slowed the launcher's import; the host's pace did.
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
cli.FORK_WHEN_LATE = {fork}
_exit = os._exit
def _stamped(code):
    sys.stderr.write(f"STAMPS {{t_main}} {{time.monotonic()}}\\n")
    sys.stderr.flush()
    _exit(code)
cli.os._exit = _stamped
sys.argv = ["kernelvet"] + sys.argv[1:]
cli.entry()
"""


def _check(fork: bool) -> dict:
    argv = ["check", by_name("triton_gemm_ieee").path, "--ref", "matmul", "--device", "cuda", "--verbose",
            "--no-server"]
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _WRAP.format(fork=fork)] + argv, capture_output=True, text=True)
    t_end = time.monotonic()
    marks = [ln for ln in done.stdout.splitlines() if ln.startswith("start-up")]
    stamps = [ln.split()[1:] for ln in done.stderr.splitlines() if ln.startswith("STAMPS")]
    row = {"fork": fork, "wall_s": t_end - t0, "rc": done.returncode,
           "start_up": marks[-1] if marks else done.stderr[-400:]}
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
    res = {"rounds": [], "warm_up": _check(False)}   # Triton's cache filled before the rounds count
    for r in range(rounds):
        row = {"import_torch_s": _import_torch()}
        for fork in ((True, False) if r % 2 == 0 else (False, True)):
            row["fork" if fork else "no_fork"] = _check(fork)
        res["rounds"].append(row)
        print(r, json.dumps(row), flush=True)
    for key in ("fork", "no_fork"):
        adds = [x[key]["wall_s"] - x["import_torch_s"] for x in res["rounds"]]
        res[f"adds_{key}_median_s"] = statistics.median(adds)
        print(f"{key}: adds {[round(a, 2) for a in adds]}, median {statistics.median(adds):.2f} s; exit "
              f"{[round(x[key].get('exit_s', float('nan')), 2) for x in res['rounds']]} s", flush=True)
    with open(out, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
