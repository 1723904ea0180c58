"""`kernelvet.reward`: a verdict as a reward, in the shapes RL trainers call.

    from kernelvet.reward import compute_score          # verl: custom_reward_function
    compute_score("kernelbench", answer, "path/to/19_ReLU.py")  -> {"score": 2.0, "verdict": "pass", ...}

    from kernelvet.reward import reward_func            # OpenRLHF: --remote_rm_url this file
    reward_func(queries, prompts, labels) -> {"rewards": tensor, "scores": tensor, "extra_logs": {...}}

The candidate is the last fenced python block of the answer (answer.py); the problem is what
`ground_truth` names or holds (a path, a built-in name, or its source text); options ride in
`extra_info["kernelvet"]` (`timeout`, `allow`, `shape`). Calls from any number of threads share
one warm judge per device of the process (`configure()` or KERNELVET_REWARD_GPUS /
KERNELVET_REWARD_DEVICES say which; default every GPU, else the CPU), and every call returns a
score by its timeout. Reward shapes: shape.py.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import threading

from .answer import compiles, extract_code
from .scorer import Scorer, ScorerConfig
from .shape import RewardShape

__all__ = ["RewardShape", "ScorerConfig", "close", "compiles", "compute_score", "compute_score_batch", "configure",
           "extract_code", "reward_func"]

_scorer: Scorer | None = None
_config: ScorerConfig | None = None
_lock = threading.Lock()


def configure(**kw) -> None:
    """The process's judges and defaults (ScorerConfig's fields), before the first score; a
    later call closes the judges and starts new ones with the new settings."""
    global _config, _scorer
    if "shape" in kw:
        kw["shape"] = RewardShape.of(kw["shape"])
    for key in ("allow", "allow_ops"):
        if key in kw:
            kw[key] = tuple(kw[key])
    with _lock:
        _config = ScorerConfig(**{**ScorerConfig.from_env().__dict__, **kw})
        if _scorer is not None:
            _scorer.close()
            _scorer = None


def _get() -> Scorer:
    global _scorer
    with _lock:
        if _scorer is None:
            _scorer = Scorer(_config or ScorerConfig.from_env())
        return _scorer


def close() -> None:
    """Stop the process's judges (also done at exit)."""
    global _scorer
    with _lock:
        scorer, _scorer = _scorer, None
    if scorer is not None:
        scorer.close()


atexit.register(close)


def compute_score(data_source, solution_str, ground_truth, extra_info=None) -> dict:
    """verl's custom reward function: the score of one answer, with the verdict's details
    (`score`, `verdict`, `failed`, `speedup`, `error`, `fault`, `compiled`, `slot`, `vet_s`)."""
    options = (extra_info or {}).get("kernelvet") if isinstance(extra_info, dict) else None
    return _get().score(solution_str, ground_truth, options)


def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos=None, **kwargs) -> list[dict]:
    """verl's batch reward manager's function (`reward_model.reward_manager=batch`): every answer
    of a batch scored at once on the shared judges, in order."""
    extra_infos = extra_infos if extra_infos is not None else [None] * len(solution_strs)
    return _many(list(zip(data_sources, solution_strs, ground_truths, extra_infos)))


def _many(calls: list[tuple]) -> list[dict]:
    if not calls:
        return []
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(64, len(calls))) as ex:
        return list(ex.map(lambda c: compute_score(*c), calls))


def reward_func(queries, prompts, labels, **kwargs) -> dict:
    """OpenRLHF's reward function: each query's answer (the query minus its prompt) against its
    label (the problem), scored at once on the shared judges."""
    import torch
    answers = [q[len(p):] if isinstance(q, str) and isinstance(p, str) and q.startswith(p) else q
               for q, p in zip(queries, prompts)]
    details = _many([("", a, label, None) for a, label in zip(answers, labels)])
    scores = torch.tensor([d["score"] for d in details], dtype=torch.float32)
    passed = torch.tensor([1.0 if d["verdict"] == "pass" else 0.0 for d in details])
    return {"rewards": scores, "scores": scores, "extra_logs": {"kernelvet_pass": passed}, "details": details}
