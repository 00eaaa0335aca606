"""Which text an apply hands back: the model's, the merge's, or none (refused), and why.

The rule, in order (`ApplyRun` applies it while the model streams):
1. The merge is *trusted* when its report is confident (every hunk placed by structure, nothing kept
   outside a marker's scope) and it passes every check (`checks.py`). Then the text is the merge: it is
   streamed as the model verifies it, and where the model first disagrees, decoding stops and the rest
   of the merge follows at once (path `merge`, with the line of disagreement). Where the model writes it
   to the end, path `model+merge`.
2. Otherwise the model writes its own output, streamed as verified. It is handed back when it passes
   every check (path `model+merge` when it equals the merge, else `model`).
3. Otherwise the merge, when it passes every check (path `merge-fallback`: the text sent so far is
   replaced by it).
4. Otherwise nothing: the apply is refused with the checks' reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .checks import problems
from .merge import MergeCandidate

PATHS = ("model", "model+merge", "merge", "merge-fallback", "refused")


class ApplyRefused(ValueError):
    """No sound result: neither the model's output nor the merge passed the checks (nothing is written)."""


@dataclass
class Outcome:
    path: str  # one of PATHS
    reason: str = ""  # why this path (for `refused`: what failed)
    disagreement_line: int | None = None  # 1-based line of the merge where the model first departed
    problems: dict[str, list[str]] = field(default_factory=dict)  # per candidate ("model", "merge")


def first_difference_line(a: str, b: str) -> int:
    """The 1-based line of `a` holding the first character where a and b differ."""
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return a.count("\n", 0, n) + 1


@dataclass
class Judge:
    """The checks for one request, run once per candidate text."""

    original: str
    update: str
    language: str
    candidate: MergeCandidate
    instruction: str = ""

    def __post_init__(self) -> None:
        self.merge_problems = self._problems(self.candidate.text)

    def _problems(self, text: str) -> list[str]:
        return problems(self.original, self.update, text, self.language, self.candidate.text, self.instruction)

    @property
    def merge_trusted(self) -> bool:
        return self.candidate.report.confident and not self.merge_problems

    def after_model(self, model_text: str, finished: bool) -> Outcome:
        """The outcome once the model has stopped: `finished` when it wrote its whole answer."""
        merge_text = self.candidate.text
        if self.merge_trusted:
            if finished and model_text == merge_text:
                return Outcome("model+merge", "the model reproduced the merge")
            line = first_difference_line(merge_text, model_text)
            return Outcome("merge", f"the merge is structurally sure and passes the checks; the model departed "
                                    f"from it at line {line}", disagreement_line=line)
        model_problems = self._problems(model_text)
        found = {"model": model_problems, "merge": self.merge_problems}
        line = None if model_text == merge_text else first_difference_line(merge_text, model_text)
        if not model_problems:
            if line is None:
                return Outcome("model+merge", "the model reproduced the merge", problems=found)
            return Outcome("model", "the merge is unsure; the model's output passes the checks", line, found)
        if not self.merge_problems:
            return Outcome("merge-fallback", "the model's output fails the checks ("
                           + "; ".join(model_problems) + "); the merge passes them", line, found)
        return Outcome("refused", "no sound result: the model's output " + "; ".join(model_problems)
                       + " — and the merge " + "; ".join(self.merge_problems), line, found)
