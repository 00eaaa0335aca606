"""What a verify pass costs on a target: measured once per model and dtype, kept on disk."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from ..engine.api import CostCurve
from ..files.user_files import write_atomic

COST_CONTEXTS = (1000, 6000)  # two points give the slope; attention is linear in context beyond


def measure_cost(target, contexts=COST_CONTEXTS, ks=(0, 1, 4, 16, 32, 64), repeats: int = 3) -> CostCurve:
    """Time verify passes over k drafted tokens after each context length (median of repeats), and the
    reading of each context as a prompt; contexts the model cannot hold are skipped."""
    limit = target.context_limit() or float("inf")
    points, prefill = {}, {}
    for context in [c for c in contexts if c + max(ks) + 1 < limit] or [min(contexts)]:
        prefix = [(i * 7919) % 1000 + 100 for i in range(context)]
        target.reset()
        t0 = time.perf_counter()
        target.logits(prefix, [])  # prefill once; each timed pass then reuses the cache
        prefill[context] = time.perf_counter() - t0
        points[context] = {}
        for k in ks:
            block = [(i * 31) % 1000 + 100 for i in range(k)]
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                target.logits(prefix + [5], block)
                times.append(time.perf_counter() - t0)
            points[context][k] = sorted(times)[len(times) // 2]
    target.reset()
    return CostCurve(points, prefill)


def cached_cost(target, cache_file: Path, measure: Callable[[], CostCurve] | None = None) -> CostCurve:
    """The cost curve for this model and dtype, measured once (`measure`, by default `measure_cost` on the
    target) and kept in `cache_file` (measured again where the file holds only the passes' costs, as it did
    before prompts' reading times were kept)."""
    if cache_file.exists() and "passes" in (raw := json.loads(cache_file.read_text())):
        return CostCurve({int(c): {int(k): v for k, v in by_k.items()} for c, by_k in raw["passes"].items()},
                         {int(c): v for c, v in raw["prefill"].items()})
    curve = measure() if measure is not None else measure_cost(target)
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(cache_file, json.dumps({"passes": curve.points, "prefill": curve.prefill}, indent=1))
    return curve
