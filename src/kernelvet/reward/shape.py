"""How a verdict becomes a reward. Every number is the caller's to set (`RewardShape(...)`, or
`extra_info["kernelvet"]["shape"]`); the defaults:

- no code block, or code that does not compile: `no_code` (0.0)
- code that compiles but does not pass (reject, a malformed candidate): `format` (0.0; a small
  value such as 0.05 rewards answers that at least compile, cheats that compile included)
- the judge or the problem failed, or no verdict in time: `error` (0.0)
- pass: `pass_score` + `speedup_weight` * log2(speedup), the log clipped to
  [0, log2(`speedup_cap`)] (1.0 at the reference's speed or slower, 2.0 at twice it, 1 + log2(10)
  at ten times or more); `speedup_fn="linear"` uses speedup - 1 clipped the same way; a pass
  without timing scores `pass_score`.
"""

from __future__ import annotations

import dataclasses
import math

from ..errors import UsageError

SPEEDUP_FNS = ("log2", "linear")


@dataclasses.dataclass(frozen=True)
class RewardShape:
    pass_score: float = 1.0
    speedup_weight: float = 1.0
    speedup_cap: float = 10.0
    speedup_fn: str = "log2"
    format: float = 0.0
    no_code: float = 0.0
    error: float = 0.0

    def __post_init__(self):
        if self.speedup_fn not in SPEEDUP_FNS:
            raise UsageError(f"reward shape: speedup_fn {self.speedup_fn!r} is not one of {', '.join(SPEEDUP_FNS)}")
        if not self.speedup_cap >= 1:
            raise UsageError(f"reward shape: speedup_cap must be at least 1, got {self.speedup_cap!r}")

    @classmethod
    def of(cls, value) -> "RewardShape":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            known = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise UsageError(f"reward shape: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
            return cls(**value)
        raise UsageError(f"reward shape: expected a dict or RewardShape, got {type(value).__name__}")

    def on_pass(self, speedup: float | None) -> float:
        if speedup is None or not math.isfinite(speedup) or speedup <= 0:
            return self.pass_score
        capped = min(speedup, self.speedup_cap)
        gain = math.log2(capped) if self.speedup_fn == "log2" else capped - 1.0
        return self.pass_score + self.speedup_weight * max(0.0, gain)
