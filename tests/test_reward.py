"""`kernelvet.reward` on the CPU: honest and cheating answers scored from many threads at once on
one shared judge, a hanging candidate's score back at the timeout, an answer without a code block,
the problem given as a path, a built-in name or its source text, OpenRLHF's and verl's batch
shapes; the code extraction and the reward shapes as units."""

from __future__ import annotations

import concurrent.futures
import math
import time

import pytest

from kernelvet import practice, reward
from kernelvet.errors import UsageError
from kernelvet.reward import RewardShape, extract_code


def _answer(name: str, before: str = "Here is my kernel.\n") -> str:
    with open(practice.by_name(name).path, encoding="utf-8") as fh:
        return f"{before}```python\n{fh.read()}\n```\nIt should be fast."


@pytest.fixture(scope="module")
def judges():
    reward.configure(devices="cpu", timeout=120)
    yield
    reward.close()


def test_honest_and_cheating_answers_from_many_threads(judges):
    relu = practice.by_name("relu").problem_ref
    with open(relu, encoding="utf-8") as fh:
        relu_source = fh.read()
    calls = {   # name -> (answer, ground truth, the verdict it must get)
        "honest-path": (_answer("relu"), relu, "pass"),
        "honest-source": (_answer("relu"), relu_source, "pass"),
        "inplace": (_answer("inplace_relu"), relu, "reject"),
        "library": (_answer("torch_mm"), "matmul", "reject"),
        "honest-builtin": (_answer("broadcast_matmul"), "matmul", "pass"),
    }
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as ex:
        got = dict(zip(calls, ex.map(lambda c: reward.compute_score("kernelbench", c[0], c[1]), calls.values())))
    for name, (_, _, verdict) in calls.items():
        d = got[name]
        assert d["verdict"] == verdict, (name, d)
        assert d["compiled"] is True and d["slot"] == "cpu:0"
        if verdict == "pass":
            assert d["score"] == RewardShape().on_pass(d["speedup"]) >= 1.0
        else:
            assert d["score"] == 0.0 and d["failed"], (name, d)
    assert got["inplace"]["failed"] == "inputs-unchanged"
    assert got["library"]["failed"] == "library-call"


def test_a_hanging_candidate_scores_at_the_timeout(judges):
    t0 = time.monotonic()
    d = reward.compute_score("kernelbench", _answer("hang_forever"), "matmul", {"kernelvet": {"timeout": 4}})
    assert (d["score"], d["verdict"]) == (0.0, "timeout"), d
    assert "no verdict within 4 s" in d["error"]
    assert time.monotonic() - t0 < 60          # back at its timeout, not at the vet's end


def test_answers_without_code_and_unknown_problems_score_without_a_vet(judges):
    relu = practice.by_name("relu").problem_ref
    for answer in ("I would fuse the kernels.", "```python\n\n```", "```python\ndef f(:\n```", None):
        d = reward.compute_score("kernelbench", answer, relu)
        assert (d["score"], d["verdict"], d["compiled"], d["slot"]) == (0.0, "no-code", False, None), (answer, d)
    d = reward.compute_score("kernelbench", _answer("relu"), "no such problem")
    assert (d["score"], d["verdict"], d["fault"]) == (0.0, "invalid", "problem")
    d = reward.compute_score("kernelbench", _answer("relu"), relu, {"kernelvet": {"tiemout": 3}})
    assert (d["score"], d["verdict"]) == (0.0, "invalid") and "unknown option 'tiemout'" in d["error"]


def test_a_format_reward_goes_to_code_that_compiles_and_does_not_pass(judges):
    shape = {"format": 0.05}
    relu = practice.by_name("relu").problem_ref
    d = reward.compute_score("kernelbench", _answer("inplace_relu"), relu, {"kernelvet": {"shape": shape}})
    assert (d["verdict"], d["score"]) == ("reject", 0.05)
    d = reward.compute_score("kernelbench", "```python\nimport torch\n```", relu, {"kernelvet": {"shape": shape}})
    assert (d["verdict"], d["fault"], d["score"]) == ("invalid", "candidate", 0.05)   # no ModelNew, but it compiles
    d = reward.compute_score("kernelbench", "no code", relu, {"kernelvet": {"shape": shape}})
    assert d["score"] == 0.0


def test_openrlhf_and_verl_batch_shapes(judges):
    torch = pytest.importorskip("torch")
    relu = practice.by_name("relu").problem_ref
    prompt = "Write a faster ReLU.\n"
    out = reward.reward_func([prompt + _answer("relu"), prompt + "no code"], [prompt, prompt], [relu, relu])
    assert isinstance(out["rewards"], torch.Tensor) and out["rewards"].tolist()[1] == 0.0
    assert out["rewards"].tolist()[0] >= 1.0 and out["extra_logs"]["kernelvet_pass"].tolist() == [1.0, 0.0]
    assert [d["verdict"] for d in out["details"]] == ["pass", "no-code"]
    got = reward.compute_score_batch(["kernelbench"] * 2, ["no code", _answer("inplace_relu")], [relu, relu])
    assert [d["verdict"] for d in got] == ["no-code", "reject"]


def test_the_last_python_block_is_the_candidate():
    assert extract_code("```python\na = 1\n```\ntext\n```py\nb = 2\n```") == "b = 2\n"
    assert extract_code("```python\na = 1\n```\n```\nplain\n```") == "a = 1\n"     # a tagged block first
    assert extract_code("```\nplain\n```") == "plain\n"
    assert extract_code("```bash\nls\n```") is None
    assert extract_code("<think>```python\nx = 0\n```</think>no code after thinking") is None
    assert extract_code("<think>```python\nx = 0\n```</think>\n~~~python\ny = 1\n~~~") == "y = 1\n"
    assert extract_code("````python\ns = '```'\n````") == "s = '```'\n"         # a longer fence holds a shorter
    assert extract_code("```python\nnever closed") is None


def test_reward_shapes():
    s = RewardShape()
    assert (s.on_pass(None), s.on_pass(0.5), s.on_pass(1.0), s.on_pass(2.0)) == (1.0, 1.0, 1.0, 2.0)
    assert s.on_pass(1e6) == pytest.approx(1 + math.log2(10)) and s.on_pass(float("nan")) == 1.0
    lin = RewardShape(speedup_fn="linear", speedup_cap=3, speedup_weight=0.5)
    assert (lin.on_pass(2.0), lin.on_pass(5.0)) == (1.5, 2.0)
    with pytest.raises(UsageError, match="unknown key 'pas_score'"):
        RewardShape.of({"pas_score": 1})
    with pytest.raises(UsageError, match="speedup_fn"):
        RewardShape(speedup_fn="exp")


def test_a_pass_whose_time_the_judge_did_not_vouch_for_earns_no_speed_reward():
    from kernelvet.batch.results import Record
    from kernelvet.reward.scorer import _from_record
    timing = {"median_ms": 0.01, "speedup": 8.0}
    shape = RewardShape()
    vouched = Record(id="a", problem="p", candidate="c", verdict="pass", timing={**timing, "vouched": True})
    unvouched = Record(id="a", problem="p", candidate="c", verdict="pass", timing={**timing, "vouched": False})
    assert _from_record(vouched, shape, time.monotonic())["score"] == shape.on_pass(8.0) == 4.0
    got = _from_record(unvouched, shape, time.monotonic())
    assert got["score"] == shape.pass_score and got["speedup"] is None


@pytest.mark.gpu
def test_rewards_on_every_gpu():
    reward.close()
    reward.configure(gpus="all", timeout=300, library_policy="no-reference-ops")   # the corpus's own
    try:
        relu = practice.by_name("relu").problem_ref
        calls = [(_answer("relu"), relu), (_answer("inplace_relu"), relu), (_answer("torch_mm"), "matmul"),
                 (_answer("broadcast_matmul"), "matmul")]
        got = reward.compute_score_batch(["kernelbench"] * 4, [a for a, _ in calls], [g for _, g in calls])
        assert [d["verdict"] for d in got] == ["pass", "reject", "reject", "pass"], got
        assert all(d["slot"].startswith("cuda:") for d in got)
        assert got[0]["score"] >= 1.0 and got[1]["score"] == 0.0
    finally:
        reward.close()
