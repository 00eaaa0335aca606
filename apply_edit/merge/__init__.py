"""The deterministic merge of the original and the lazy snippet, with a report of how sure it is.

The snippet is a sequence of lines and marker comments (`// ... existing code ...`); a marker stands for
original lines kept as they are. The merge is one alignment of the whole snippet against the original
(dynamic programming over snippet line x original line), scored so that structure decides, then
realigned where the alignment wrote lines shown as context as new. Its passes, in order, each a module
whose docstring states the rules it implements:

- `snippet`: the original's and the snippet's lines, the snippet parsed into hunks and markers;
- `anchors`: how snippet lines relate to original lines (edits, rare identities, attached lines);
- `pairs`: definitions paired between the snippet and the original (shown whole, or new);
- `blocks`: where brackets and blocks close;
- `removals`: the original lines that go with a name the instruction asks to remove;
- `align`: the dynamic-programming alignment, as ops (keep, del, match, edit, ins);
- `repairs`: rewrites of one alignment (head and tail rewrites, dangling edits, rewritten headers);
- `twins`: alignments again with lines shown as context matched to their twins;
- `render`: the final ops as the candidate's text;
- `doubts`: where the snippet allows another reading than the one the ops took;
- `report`: how each hunk was placed, what was deleted, what was kept outside a marker's scope;
- `anchored`: a second reading of the snippet, each hunk placed by its own unique lines: the merge is
  confident only where it reads the same file;
- `evidence`: a reading of any result, placement-free: each run of lines it deletes must have the
  snippet's evidence (the checks refuse a result that deletes code a marker keeps).

Names with a leading underscore are the package's own: its modules share them, callers do not.
"""

from __future__ import annotations

import numpy as np

from ..code.definitions import definitions, snippet_definitions
from ..code.instruction import names_to_remove, noted_names, without_change_notes
from ..code.languages import code_of, uncommented
from .align import _align
from .anchored import anchored_reading
from .anchors import _attached_lines, _comment_block_top, _comment_edits, _comment_line
from .anchors import _closes as closes_block  # public: the checks read definitions as the merge does
from .anchors import _opens as opens_block
from .anchors import _trivial as says_little  # public: a line too short or bare to tell a place by
from .blocks import _block_ends, _bracket_ends, _indented_block_ends
from .doubts import doubts
from .evidence import UnexplainedRun, shown_whole_beyond_doubt, unexplained_deletions
from .pairs import _apart, _beside_namesakes, _keep_between_whole_definitions, _pairs
from .removals import _removed_lines
from .render import _render
from .repairs import (_blank_after_new_code, _blank_before_new_code, _closed_block_edits, _cut_statements,
                      _dangling_edits, _head_tail_rewrites, _new_block_closers, _replaced_attached_comments,
                      _rewritten_headers)
from .report import HunkPlacement, MergeCandidate, MergeReport, Reading, _report
from .snippet import _read, _width, code_lines, is_marker, marker_keys, split_lines
from .snippet import _width as indent_width
from .twins import _closing_twins, _kept_twins, _realigned, _resumed_lines, _resuming_runs, _rewritten_comment_ends

__all__ = ["HunkPlacement", "MergeCandidate", "MergeReport", "Reading", "UnexplainedRun", "closes_block", "code_lines",
           "indent_width", "is_marker", "marker_keys", "merge", "opens_block", "says_little",
           "shown_whole_beyond_doubt", "split_lines", "unexplained_deletions"]


def merge(original: str, update: str, language: str = "", instruction: str = "",
          notes_as_code: frozenset[int] = frozenset()) -> MergeCandidate:
    """The merge of `update` into `original`; `instruction` only says which names it removes.
    `notes_as_code`: snippet lines (0-based) that read as deletion notes, to be read as code instead."""
    update = without_change_notes(original, update, language)
    orig, update_lines, counts, snippet, notes = _read(original, update, language, notes_as_code)
    # The second reading, before the passes below add to the snippet's reading (`anchored.py`).
    second = None
    if not notes_as_code and (read := anchored_reading(orig, snippet, original.endswith("\n"), uncommented(language))):
        second = MergeCandidate("".join(read[0]), read[1], len(orig))
    names = names_to_remove(instruction, update, language, original) | noted_names(notes)
    in_snippet, in_original = [], []
    if language and orig:
        top_level = [n for n in snippet.markers if not _width(update_lines[n])]
        in_snippet = snippet_definitions("".join(update_lines), language, top_level)
        in_original = definitions(original, language) if in_snippet or names else []
    beside = _beside_namesakes(snippet, in_snippet, in_original, orig, counts)
    pairs = _pairs(snippet, in_snippet, in_original, beside, orig)
    comment, code = _comment_line(language), code_of(language)
    _keep_between_whole_definitions(snippet, pairs, orig, comment)
    apart = _apart(snippet, in_snippet, in_original, orig, counts, beside)
    attached = _attached_lines(snippet, [line.strip() for line in orig], counts, language)
    comment_edits = _comment_edits(snippet, orig, counts, language)
    removed = _removed_lines(orig, names, in_original, language)
    header_end = _bracket_ends(orig, code)

    def align(context: dict[int, int] | None = None) -> list[tuple]:
        ops = _align(orig, snippet, pairs, counts, attached, apart, removed, header_end, comment_edits, context)
        return _head_tail_rewrites(ops, snippet, orig, counts)

    # Where the snippet's blocks close, by brackets and, where a marker hides closers, by indentation.
    snippet_ends = {**_block_ends(snippet.lines, code), **_indented_block_ends(snippet.lines, code)}
    ops = align()
    defined = {d.name for d in in_original}
    new_definitions = {i for i, n in enumerate(snippet.number)
                       if n in {d.name_line for d in in_snippet if d.name not in defined}}
    if apart_pairs := (_dangling_edits(ops, snippet, orig) + _new_block_closers(ops, snippet_ends, new_definitions)
                       + _closed_block_edits(ops, snippet, orig)):
        for i, j in apart_pairs:
            apart.setdefault(i, np.zeros(len(orig), dtype=bool))[j] = True
        ops = align()
    ops = _rewritten_headers(ops, snippet, orig, header_end, code)

    defined = in_original or (definitions(original, language) if language else [])
    definition_starts = {d.name_line for d in defined}
    definition_heads = {_comment_block_top(d.start_line, orig, comment) for d in defined}
    original_ends = _block_ends(orig, code)
    # Finders in order of precedence: a run of lines the original has in a row pins where the old code
    # resumes better than a single line does (`default:` after a marker has many instances; the lines
    # that follow it in the hunk name the one).
    ops = _realigned(ops, [lambda o: _kept_twins(o, snippet, orig, counts, definition_starts, definition_heads),
                           lambda o: _resuming_runs(o, snippet, orig),
                           lambda o: _resumed_lines(o, snippet, orig, counts),
                           lambda o: _rewritten_comment_ends(o, snippet, orig, comment),
                           lambda o: _closing_twins(o, snippet, orig, counts, snippet_ends, original_ends)], align)
    ops = _cut_statements(ops, snippet, orig, header_end, code)
    ops = _replaced_attached_comments(ops, snippet, orig, comment)
    ops = _blank_after_new_code(_blank_before_new_code(ops, snippet, orig), snippet, orig)

    text, origin, replaced = _render(ops, snippet, orig, original, language)
    report = _report(ops, snippet, orig, counts, pairs, replaced)
    # Deletions a definition shown whole, or a name the edit removes, accounts for are no doubt.
    accounted = {j for _, _, start, end, whole in pairs if whole for j in range(start, end + 1)}
    accounted |= {int(j) for j in np.flatnonzero(removed)}
    report.readings += doubts(ops, snippet, orig, counts, accounted, pairs)
    # A note told by its form alone (`# removed the old fallback`) might be a comment the edit adds.
    report.readings += [Reading("note", f"snippet line {n + 1} (`{update_lines[n].strip()}`) read as a note, not code",
                                snippet_line=n) for n, named in sorted(notes.items()) if not named]
    if second is not None:
        report.read_twice = second.text == text
        if not report.read_twice:
            ours, theirs = split_lines(text), split_lines(second.text)
            line = next((n for n, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs))) + 1
            report.readings.append(Reading("anchored", f"each hunk placed by its own lines reads another file "
                                                       f"(from line {line})"))

    def reread(readings: list[Reading]) -> str:
        """The text with `readings` taken the other way: their ops rewritten and rendered again, or, for
        notes, the snippet merged again with them read as code (then alone: the alignment is another)."""
        if any(r.kind == "anchored" for r in readings):
            if len(readings) > 1:
                raise ValueError("the anchored reading is a file of its own: take it the other way alone")
            return second.text
        as_code = frozenset(r.snippet_line for r in readings if r.kind == "note")
        if as_code:
            if len(as_code) < len(readings):
                raise ValueError("a note read as code makes another alignment: take it the other way alone")
            return merge(original, update, language, instruction, notes_as_code | as_code).text
        other = list(ops)
        for reading in readings:
            for n, op in reading.other:
                other[n] = op
        return _render(other, snippet, orig, original, language)[0]

    return MergeCandidate(text, origin, len(orig), report, reread, second)
