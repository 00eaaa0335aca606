"""The measurement behind the arbiter's prior and its weighed kinds (`arbiter.PRIOR`, `arbiter.WEIGHED`): on
a corpus half, every reading the merge leaves open (its other way passes the checks too), of every kind,
weighed by the target in its window, and which of the two ways is the expected file.

`apply-edit corpus readings corpus/tune --json readings.json` writes one record per open reading and
prints, per kind: how many, which way was right, and how often the target's evidence favoured it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from ...judging.arbiter import Arbiter
from ..cases import load_cases
from ...merge.report import READING_KINDS


def weigh_open_readings(applier, folder: Path, log=print) -> list[dict]:
    """Per open reading of each case under `folder` whose merge passes the checks: kind, which way is the
    expected file (`merge`, `other`, `neither`), the target's evidence for the other way, its cost."""
    arbiter = Arbiter(applier.tokenizer, applier.likelihoods)
    records = []
    for case in load_cases(folder):
        request = case.request()
        if not request.judge.merge_sound:
            continue
        candidate = request.judge.candidate
        for reading, other in request.judge.open_readings(READING_KINDS):
            question = arbiter.question(request.original, request.update, request.instruction,
                                        request.language_resolved, candidate, other)
            verdict = arbiter.weigh(reading, *question)
            right = "merge" if candidate.text == case.expected else "other" if other == case.expected else "neither"
            records.append({"case": case.name, "kind": reading.kind, "what": reading.what, "right": right,
                            "evidence": verdict.evidence, "tokens": verdict.tokens, "seconds": verdict.seconds})
            log(f"{case.name:50} {reading.kind:9} right: {right:7} evidence {verdict.evidence:+7.1f} "
                f"({verdict.tokens} tokens, {verdict.seconds:.1f} s)")
    return records


def summary(records: list[dict]) -> list[str]:
    """Per kind: readings, which way was right, and how often the evidence's sign agreed with it."""
    by_kind = defaultdict(list)
    for r in records:
        by_kind[r["kind"]].append(r)
    lines = ["kind       open  merge right  other right  neither  evidence for the right way"]
    for kind in READING_KINDS:
        rs = by_kind.get(kind, [])
        decided = [r for r in rs if r["right"] != "neither"]
        agreed = sum((r["evidence"] > 0) == (r["right"] == "other") for r in decided)
        lines.append(f"{kind:9} {len(rs):5} {sum(r['right'] == 'merge' for r in rs):12} "
                     f"{sum(r['right'] == 'other' for r in rs):12} {sum(r['right'] == 'neither' for r in rs):8}"
                     f"  {agreed} of {len(decided)}")
    return lines


def main_readings(applier, folder: Path, out: Path | None) -> int:
    records = weigh_open_readings(applier, folder)
    if out is not None:
        out.write_text(json.dumps(records, indent=1) + "\n")
    print("\n".join(summary(records)))
    return 0
