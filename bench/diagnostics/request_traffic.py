"""What a vet moves between judge and worker, by request: an elementwise problem of N float32
elements (one input set and its output are N * 4 bytes each), its own Model as the candidate with
the library allowed, vetted under each holding named (the plan's choice forced, whatever the
size). For each kind of request (a pair request, its control, the null twins apart): how many,
and the bytes it carried to the worker and brought back, through the host (sealed memfds) and in
device buffers the judge lent (CUDA), in units of one set. The worker's own copies across the bus
(its input copies on the host, sizes.Holding.copies_on_host) are not messages and are not counted.

    PYTHONPATH=src [VET_DEVICE=cuda] python3 bench/diagnostics/request_traffic.py OUT.json [N] [HOLDING ...]

HOLDING: full, lean (lean, judged on the host) or tight (lean, judged on the host, sets drawn
again); all three by default. N: 2^24 by default (64 MiB a set).
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
import time

from compare_cost import write_problem   # its neighbour here (on sys.path as the script's folder)
from kernelvet import protocol, sizes, vet
from kernelvet.judge.settings import _CONTROL, _NULL_PAIR

DEVICE = os.environ.get("VET_DEVICE", "cpu")
HOLDINGS = {
    "full": sizes.Holding(output_itemsize=4),
    "lean": sizes.Holding(lean=True, judge_on_host=True, output_itemsize=4),
    "tight": sizes.Holding(lean=True, judge_on_host=True, tight=True, output_itemsize=4),
}
COLUMNS = ("requests", "to_worker_host", "to_worker_lent", "back_host", "back_lent")


def kind_of(type_: str, body: dict) -> str:
    """The request's kind: its type, and for a timing request what it times."""
    if type_ != "time":
        return type_
    unseen = body.get("unseen") or []
    what = "run" if not unseen else ("null pair" if unseen[0] >= _NULL_PAIR else
                                     "control" if unseen[0] >= _CONTROL else "pair")
    return f"time ({'null ' if body.get('null') and what != 'null pair' else ''}{what})"


class Counter:
    """protocol.send and protocol.recv wrapped in the judge's process: every message to the worker
    and every reply, its blobs' bytes by where they travel."""

    def __init__(self):
        self.rows = collections.defaultdict(lambda: dict.fromkeys(COLUMNS, 0))
        self.asked = None
        self._send, self._recv = protocol.send, protocol.recv
        protocol.send, protocol.recv = self.send, self.recv

    def send(self, sock, type_, body=None, tensors=()):
        self.asked = kind_of(type_, body or {})
        row = self.rows[self.asked]
        row["requests"] += 1
        for b in tensors:
            row["to_worker_lent" if b.lent is not None else "to_worker_host"] += b.nbytes
        return self._send(sock, type_, body, tensors)

    def recv(self, *args, **kwargs):
        msg = self._recv(*args, **kwargs)
        if self.asked is not None:
            row = self.rows[self.asked]
            for b in msg.tensors:
                row["back_lent" if b.lent is not None else "back_host"] += b.nbytes
        return msg

    def take(self, unit: int) -> dict:
        rows = {k: {c: (v if c == "requests" else round(v / unit, 2)) for c, v in row.items()}
                for k, row in sorted(self.rows.items())}
        self.rows.clear()
        return rows


def _hold(holding: sizes.Holding) -> None:
    sizes.holding_for = lambda *a, **k: holding
    sizes.plan_for = lambda *a, **k: (holding, None)


def table(line: dict) -> str:
    rows = line["rows"]
    out = [f"{line['holding']} on {line['device']}: {line['verdict']}, {line['wall_s']} s "
           f"(sets of {line['set_bytes'] >> 20} MiB)", "",
           "| request | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    out += [f"| {k} | " + " | ".join(str(r[c]) for c in COLUMNS) + " |" for k, r in rows.items()]
    total = {c: round(sum(r[c] for r in rows.values()), 2) for c in COLUMNS}
    out.append("| all | " + " | ".join(str(total[c]) for c in COLUMNS) + " |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    out = argv[0]
    n = int(argv[1]) if len(argv) > 1 else 1 << 24
    names = argv[2:] or list(HOLDINGS)
    unit = max(n // 4096, 1) * 4096 * 4
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    counter, lines = Counter(), []
    with tempfile.TemporaryDirectory() as work:
        path, cand = write_problem(work, n, "torch.relu(x)")
        for name in names:
            _hold(HOLDINGS[name])
            t0 = time.monotonic()
            report = vet(cand, path, device=DEVICE, allow=["library-call"])
            lines.append({"commit": commit, "device": DEVICE, "holding": name, "set_bytes": unit,
                          "verdict": str(report.verdict.value), "wall_s": round(time.monotonic() - t0, 1),
                          "rows": counter.take(unit)})
            print(table(lines[-1]) + "\n", flush=True)
    with open(out, "w") as fh:
        json.dump({"version": 1, "vets": lines}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
