"""`global-state`: process-wide settings and the harness itself are as they were before import.

A setting counts when it can lower precision or change what the candidate's ops mean: TF32 or
reduced-precision reductions switched on, `float32_matmul_precision` lowered, the default dtype
changed; and always, the harness's own machinery: torch function/dispatch mode stacks, tracers,
the dispatcher tables of the ops the harness uses, and the identity of its modules and functions.
Settings that only choose among algorithms of the same precision (`cudnn.benchmark`, cuDNN and
deterministic-algorithm switches), and switches that raise precision (`allow_tf32 = False`), are
recorded as evidence and pass: an honest kernel sets them at import every day."""

from __future__ import annotations

from ..ids import CheckId
from ..report import Finding, Status
from ._common import not_reached

# On: a thinner format or a thinner accumulation may be used where float32 was asked for.
PERMITS_THINNER = frozenset({"allow_tf32 (cuda.matmul)", "allow_tf32 (cudnn)",
                             "fp16 reduced-precision reduction", "bf16 reduced-precision reduction"})
# Which algorithm runs, at the same precision: speed and run-to-run bits, which `determinism` judges.
ALGORITHM_CHOICE = frozenset({"cudnn.benchmark", "cudnn.deterministic", "cudnn.enabled", "deterministic_algorithms"})
MATMUL_PRECISION = {"medium": 0, "high": 1, "highest": 2}


def counts(key: str, old: str, new: str) -> bool:
    """Whether changing `key` from `old` to `new` can lower precision or change semantics."""
    if key in ALGORITHM_CHOICE:
        return False
    if key in PERMITS_THINNER:
        return new == "True" and old != "True"
    if key == "float32_matmul_precision":
        return MATMUL_PRECISION.get(new, -1) < MATMUL_PRECISION.get(old, -1)
    return True   # the default dtype, and everything of the harness's own


def split(changed: dict) -> tuple[dict, dict]:
    """(changes that count, changes recorded as harmless)."""
    bad, harmless = {}, {}
    for k, v in changed.items():
        old, new = (v if isinstance(v, (list, tuple)) and len(v) == 2 else ("?", "?"))
        (bad if counts(k, str(old), str(new)) else harmless)[k] = v
    return bad, harmless


def evaluate(ev) -> Finding:
    if not ev.integrity:
        return not_reached(CheckId.GLOBAL_STATE)
    harmless: dict = {}
    for phase, entry in ev.integrity:
        bad, ok = split(entry.get("changed") or {})
        harmless.update(ok)
        if bad:
            keys = sorted(bad)
            return Finding(CheckId.GLOBAL_STATE, Status.FAIL,
                           f"the candidate changed process state (first seen after {phase}): {', '.join(keys[:6])}",
                           {"phase": phase, "changed": {k: bad[k] for k in keys[:20]},
                            "harmless": {k: harmless[k] for k in sorted(harmless)[:20]}})
    if harmless:
        return Finding(CheckId.GLOBAL_STATE, Status.PASS,
                       f"process state unchanged across {len(ev.integrity)} phases but for settings that cannot "
                       f"lower precision: {', '.join(sorted(harmless)[:6])}",
                       {"phases_checked": len(ev.integrity), "harmless": {k: harmless[k] for k in sorted(harmless)[:20]}})
    return Finding(CheckId.GLOBAL_STATE, Status.PASS, f"process state unchanged across {len(ev.integrity)} phases",
                   {"phases_checked": len(ev.integrity)})
