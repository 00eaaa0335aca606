"""The corpus figures of a bench run: per language, snippet style and agent habit, how many answers were exact,
how many were wrong files handed back as a success, how many were refused, and how far `confident`
can be trusted."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path


def outcome(record: dict) -> tuple[str, bool]:
    """("exact" | "wrong" | "refused", confident) for one bench record. The `merge` method's answer is a
    sound merge (an unsound one is refused there: the default would not hand it back as the merge's);
    any other method's is what it did not refuse."""
    if record["method"] == "merge":
        refused = record.get("path") == "unsound"
        confident = bool(record.get("confident")) and not refused
    else:
        refused = bool(record.get("refused")) or bool(record.get("error"))
        confident = bool(record.get("merge_confident")) and record.get("path") == "merge"
    if refused:
        return "refused", False
    return ("exact" if record["exact"] else "wrong"), confident


def _row(label: str, outcomes: list[tuple[str, bool]]) -> str:
    n = len(outcomes)
    exact = sum(o == "exact" for o, _ in outcomes)
    wrong = sum(o == "wrong" for o, _ in outcomes)
    refused = n - exact - wrong
    sure = [o for o, c in outcomes if c]
    sure_exact = sum(o == "exact" for o in sure)
    pct = (lambda k, d: f"{100 * k / d:5.1f}%" if d else "    -")
    return (f"{label:22s} {n:5d}  {exact:5d} {pct(exact, n)}  {wrong:4d} {pct(wrong, n)}  {refused:4d}  "
            f"{len(sure):5d} {pct(sure_exact, len(sure))}")


def table(records: list[dict], index: dict[str, dict], method: str) -> str:
    """The table for one method's records over the cases `index` describes (case name -> source record)."""
    rows = [r for r in records if r["method"] == method and r["case"] in index]
    by: dict[str, dict[str, list]] = {"language": defaultdict(list), "style": defaultdict(list),
                                      "habit": defaultdict(list)}
    every = []
    for r in rows:
        o = outcome(r)
        every.append(o)
        source = index[r["case"]]
        by["language"][source["language"]].append(o)
        by["style"][source["style"]].append(o)
        for habit in source.get("habits") or ["none"]:  # a corpus built before habits has none
            by["habit"][habit].append(o)
    head = f"{'':22s} {'cases':>5s}  {'exact':>11s}  {'wrong (success)':>11s}  {'refused':>4s}  {'confident, exact':>11s}"
    lines = [f"method {method}: {len(rows)} cases", head, _row("all", every)]
    for key in by:
        lines.append(f"by {key}:")
        lines += [_row("  " + name, outs) for name, outs in sorted(by[key].items())]
    return "\n".join(lines)


def main_report(records_path: Path, corpus: Path, method: str | None) -> int:
    records = json.loads(records_path.read_text(encoding="utf-8"))
    index = {r["case"]: r for r in json.loads((corpus / "index.json").read_text(encoding="utf-8"))}
    methods = [method] if method else sorted({r["method"] for r in records})
    print("\n\n".join(table(records, index, m) for m in methods))
    return 0
