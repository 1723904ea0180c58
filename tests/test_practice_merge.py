"""bench/practice_merge.py: a practice run split across calls, merged, gets the whole run's verdict."""

import importlib.util
import json
import os

from kernelvet.practice import CORPUS

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("practice_merge", os.path.join(HERE, "..", "bench", "practice_merge.py"))
practice_merge = importlib.util.module_from_spec(spec)
spec.loader.exec_module(practice_merge)

DEVICE = {"type": "cpu", "name": "test cpu"}


def _row(e, alone=()):
    if "cpu" not in e.devices:
        return {"cheat": e.name, "kind": e.kind, "skipped": "needs cuda"}
    verdict = "reject" if e.kind == "cheat" else "pass"
    row = {"cheat": e.name, "kind": e.kind, "naive": {"believed": True}, "kernelvet": {"verdict": verdict}}
    if e.kind == "cheat":
        row["caught_alone_by"] = list(alone or sorted(map(str, e.catches)))
    return row


def _write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "device": DEVICE, "rows": rows}))
    return str(path)


def test_two_halves_merge_into_a_whole_run(tmp_path):
    rows = [_row(e) for e in CORPUS]
    a = _write(tmp_path, "a.json", rows[:20])
    b = _write(tmp_path, "b.json", rows[20:])
    assert practice_merge.main([str(tmp_path / "m.json"), a, b]) == 0
    merged = json.loads((tmp_path / "m.json").read_text())
    assert [r["cheat"] for r in merged["rows"]] == [e.name for e in CORPUS]


def test_a_missing_entry_a_passed_cheat_and_a_lonely_check_fail_the_merge(tmp_path):
    rows = [_row(e) for e in CORPUS if e.name != "relu"]
    racy = next(r for r in rows if r["cheat"] == "racy_accumulate")
    racy["caught_alone_by"] = []          # determinism then catches no cheat alone
    torch_mm = next(r for r in rows if r["cheat"] == "torch_mm")
    torch_mm["kernelvet"]["verdict"] = "pass"
    assert practice_merge.main([str(tmp_path / "m.json"), _write(tmp_path, "a.json", rows)]) == 1
    merged = json.loads((tmp_path / "m.json").read_text())
    assert merged["missing"] == ["relu"] and merged["unexpected"] == ["torch_mm"]
    assert "determinism" in merged["checks_without_a_sole_cheat"]
