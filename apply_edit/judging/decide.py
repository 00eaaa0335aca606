"""Which text an apply hands back: the merge's, the model's, or none (refused), and why.

The rule (`ApplyRun` applies it):
1. When the merge passes every check (`checks.py`), the text is the merge (path `merge`). The default
   `checked` pipeline hands it back at once without running the model; the `verify` pipeline streams it
   as the model reads each region the merge changed (`request.VerifiedRegionsRun`): path `model+merge`
   where the model wrote the merge's text in every one, else `merge` with the first line where it
   departed. The merge's report (confident or not) goes into the reason. But where nothing the snippet
   shows places its edit (`Judge.unplaced`: only common lines match, and the two readings place it apart),
   the apply is refused at once, in every pipeline that judges: either text would be a guess.
2. Otherwise (the merge is unsound) the model writes the regions the merge fails in (path `merge+model`),
   or, where the snippet shows no code (an instruction alone) or with `--pipeline model`, the whole file
   (path `model`), streamed as verified; handed back when it passes every check. A merge whose failures lie
   in no region of its own is refused at once by default (`runs.merge_answer`).
3. Otherwise nothing: the apply is refused with the checks' reasons. The model is stopped as soon as a
   line it wrote fails a check that no ending can undo (`checks.LineChecks`: a marker copied, a name the
   edit removes kept), so a refusal comes when it is certain, not after the rest of the file.

Why the merge first even where its report is unsure: on the fixtures the small default model is right
far less often than the merge, and where the merge was unsure but sound, the model's differing output
also passed the checks and was wrong (c_real_zlib_zran_check_realloc_fseeko, README); where the merge was
sound and wrong, the model reproduced it (go_fresh_chi_logger_drop_closenotifier, 164 s). The model's
reading of a sound merge never changes the answer, so by default it is not paid for; the model writes
the file only where the merge cannot.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .checks import LineChecks, problems
from ..code.instruction import deletion_notes
from ..merge import MergeCandidate, Reading

# merge+target: the merge's text with each reading it left open (`merge.Reading`) decided by the target
# (`arbiter.py`); merge+model: the merge's text with the regions it fails the checks in written by the
# target (`regions_to_rewrite.py`).
PATHS = ("model", "model+merge", "merge", "merge+target", "merge+model", "refused")


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
        self.merge_problems = self.problems_of(self.candidate.text)
        # Where the alignment's text fails the checks and the second reading's (each hunk placed by its own
        # lines) passes them, that is the merge: on the corpus's tune half it was the expected file in 20
        # of 22 such applies, which the model's regions mostly refused (tests/bench/README.md).
        self.alignment_problems: list[str] = []
        second = self.candidate.anchored
        if self.merge_problems and second is not None and second.text != self.candidate.text \
                and not self.problems_of(second.text):
            self.alignment_problems, self.merge_problems = self.merge_problems, []
            self.candidate = second
        self._other_ways: dict[int, str | None] = {}  # per reading (index): its other way's text, if sound

    @cached_property
    def unplaced(self) -> str:
        """Why nothing the snippet shows places it, "" where something does: every hunk is matched by
        common lines only (`}`, `return nil`) or is new code between markers, and the second reading,
        which places each hunk on its own, puts it elsewhere. Code repeated in a file (two impls alike)
        then has no right place to be told, and either text is a guess. So is any place for a snippet whose
        every hunk is new lines between markers."""
        report, second = self.candidate.report, self.candidate.anchored
        if self.alignment_problems or not report.hunks or len(report.ambiguous) < len(report.hunks):
            return ""
        if all(h.anchor == "new" for h in report.hunks):
            return ("the snippet shows no line of the file, only new lines between markers: nothing tells where "
                    "they go; a line of the file beside them would")
        if second is None or second.text == self.candidate.text:
            return ""
        places = sorted({first_difference_line(self.original, text) for text in (self.candidate.text, second.text)})
        return (f"the snippet's lines match more than one place in the file and none of them is found once: "
                f"read two ways, it edits line {' or line '.join(map(str, places))}; a line of the file found once "
                "beside them would tell where they go")

    def problems_of(self, text: str, comments_may_go: bool = False) -> list[str]:
        """What the checks find wrong with `text` as the edited file ([] when it passes them)."""
        return problems(self.original, self.update, text, self.language, self.candidate.text, self.instruction,
                        comments_may_go)

    @property
    def merge_sound(self) -> bool:
        """The merge is the answer: it passes every check."""
        return not self.merge_problems

    def open_readings(self, kinds: tuple[str, ...]) -> list[tuple[Reading, str]]:
        """The readings of `kinds` the merge chose among others where the other way is sound too, each
        with its text: what the target decides (`arbiter.py`). One whose other way fails the checks is
        settled by them."""
        found = []
        for n, reading in enumerate(self.candidate.report.readings):
            if reading.kind not in kinds:
                continue
            if n not in self._other_ways:
                other = self.candidate.reread([reading])
                self._other_ways[n] = other if other != self.candidate.text and self.sound_reading(other) else None
            if self._other_ways[n] is not None:
                found.append((reading, self._other_ways[n]))
        return found

    def sound_reading(self, text: str) -> bool:
        """Whether the text with readings of the merge taken the other way passes the checks. The lines
        such a way drops are what the reading is about: comment lines among them are no lost code (the
        file's licence block, where the snippet's first lines stand in its place)."""
        return not self.problems_of(text, comments_may_go=True)

    def line_checks(self) -> LineChecks:
        """The checks the model's output can fail line by line, to run as it is written."""
        notes = deletion_notes(self.original, self.update, self.language)
        return LineChecks(self.original, self.update, self.language, self.instruction, notes)

    def sureness(self) -> str:
        """How sure the merge is, with the first reading it chose where it is not (`MergeReport.readings`)."""
        report = self.candidate.report
        if self.alignment_problems:
            return ("read hunk by hunk, each placed by its own lines; the alignment "
                    + "; ".join(self.alignment_problems))
        if report.confident:
            return "structurally sure"
        return "placed without full certainty" + (f": {report.readings[0]}" if report.readings else "")

    def without_model(self) -> Outcome:
        """The outcome where the model does not run: the merge if it passes the checks, else a refusal."""
        if not self.merge_sound:
            return Outcome("refused", "no sound result without the model: the merge " + "; ".join(self.merge_problems),
                           problems={"merge": self.merge_problems})
        if self.unplaced:
            return Outcome("refused", f"no sure place for the edit: {self.unplaced}",
                           problems={"merge": [self.unplaced]})
        return Outcome("merge", f"the merge ({self.sureness()}) passes the checks")

    def after_model(self, model_text: str) -> Outcome:
        """The outcome once the model has written its whole answer, where the merge fails the checks."""
        merge_text = self.candidate.text
        model_problems = self.problems_of(model_text)
        found = {"model": model_problems, "merge": self.merge_problems}
        line = first_difference_line(merge_text, model_text)
        if not model_problems:
            return Outcome("model", "the merge fails the checks (" + "; ".join(self.merge_problems)
                           + "); the model's output passes them", line, found)
        return self._refused("the model's output " + "; ".join(model_problems), line, found)

    def stopped(self, model_text: str, line_problems: list[str]) -> Outcome:
        """The outcome where the model was stopped because the lines it wrote fail `line_checks`."""
        lines = model_text.count("\n")
        found = {"model": line_problems, "merge": self.merge_problems}
        return self._refused(f"the model's output (stopped after its line {lines}: no ending can pass) "
                             + "; ".join(line_problems), first_difference_line(self.candidate.text, model_text), found)

    def late(self, model_text: str, seconds: float, foreseen: str = "") -> Outcome:
        """The outcome where the model was stopped because writing the file took longer than `seconds`, or,
        with `foreseen` (why, `Applier.too_slow`), was not started because it could not be done within them."""
        lines = model_text.count("\n")
        found = {"model": [f"not finished within {seconds:g} s"], "merge": self.merge_problems}
        how = f"not started: {foreseen}" if foreseen else \
            f"stopped after its line {lines}: not finished within {seconds:g} s"
        return self._refused(f"the model's output ({how})", first_difference_line(self.candidate.text, model_text), found)

    def _refused(self, model_says: str, line: int, found: dict[str, list[str]]) -> Outcome:
        return Outcome("refused", f"no sound result: {model_says} — and the merge " + "; ".join(self.merge_problems),
                       line, found)
