"""Merge `kernelvet practice --ablate --json` files from one device into one: a run split by pattern
across time-limited calls (`kernelvet practice 1 2 3 ...`, then the rest). The merged file gets the
whole run's verdict: every corpus entry present, every cheat rejected, every honest kernel passing
both benches, every check the sole catcher of at least one cheat.

Usage: python bench/practice_merge.py OUT.json IN.json [IN.json ...]    (exit 0 when all of that holds)
"""

from __future__ import annotations

import json
import sys

from kernelvet.practice import CORPUS
from kernelvet.practice.runner import row_ok, sole_checks_expected


def merge(paths: list[str]) -> dict:
    rows, device = {}, None
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        if device is not None and data["device"] != device:
            sys.exit(f"{path}: another device ({data['device'].get('name')}) than the first file's")
        device = data["device"]
        rows.update({r["cheat"]: r for r in data["rows"]})   # a later file's row replaces an earlier one
    kind = device["type"]
    missing = [e.name for e in CORPUS if kind in e.devices and (e.name not in rows or "skipped" in rows[e.name])]
    wrong = [name for name, r in rows.items() if "skipped" not in r and not _ok(r)]
    expected = sole_checks_expected(kind)
    alone = {c for r in rows.values() for c in r.get("caught_alone_by", [])}
    ordered = [rows[e.name] for e in CORPUS if e.name in rows]
    return {"version": 1, "device": device, "rows": ordered, "merged_from": paths, "missing": missing,
            "unexpected": wrong, "checks_without_a_sole_cheat": sorted(expected - alone)}


def _ok(row: dict) -> bool:
    return row_ok(row["kind"], row.get("kernelvet", {}).get("verdict", ""), row.get("naive"))


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    merged = merge(argv[1:])
    with open(argv[0], "w") as fh:
        json.dump(merged, fh, indent=2, sort_keys=True)
    cheats = [r for r in merged["rows"] if r["kind"] == "cheat" and "skipped" not in r]
    honest = [r for r in merged["rows"] if r["kind"] == "honest" and "skipped" not in r]
    print(f"{sum(map(_ok, cheats))} of {len(cheats)} cheats rejected, {sum(map(_ok, honest))} of {len(honest)} "
          f"honest kernels passed both benches on {merged['device'].get('name')}")
    for key in ("missing", "unexpected", "checks_without_a_sole_cheat"):
        if merged[key]:
            print(f"{key.replace('_', ' ')}: {', '.join(merged[key])}")
    return 0 if not (merged["missing"] or merged["unexpected"] or merged["checks_without_a_sole_cheat"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
