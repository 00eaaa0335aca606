"""The alignment: dynamic programming over snippet line x original line, scored so that structure decides.

Row i of the table is the gap before snippet line i (row m: after the last line), column j the gap
before original line j. Entering row i from row i - 1 writes snippet line i - 1: as new (down), or
matched to (or as an edit of) original line j - 1 (diagonal); moving along a row to the right keeps or
deletes original lines, as the marker in that gap (or its absence) says. Takes what the passes before
found (`pairs`, `attached`, `apart`, `removed`, `header_end`) and, in a realignment, the twins each
named snippet line must match (`twins.py`); hands back the best-scoring path as ops:

- a snippet line equal to an original line matches it; a line unique in the original is worth much more
  than a common one (`return nil`, `}`), and writing such a line as new code (a duplicate) costs as much;
- between two snippet lines with no marker between them, original lines are deleted (that is how a
  snippet shows a deletion); at a marker they are kept for free, but only as deep as the marker is
  indented: a marker inside a body stands for the rest of that body, not for what follows the body
  (keeping the less indented line where that body ends costs more than a deletion, each one after it
  less: a few such lines are the replaced end of the block, many are code after a forgotten marker;
  a line as shallow as the snippet's next line is a sibling of that line and costs only the latter),
  except the body's closing line (`}`, `end`) where the snippet goes on beside that body without it;
- before the first and after the last snippet line, with no marker there, original lines are kept too
  (a snippet without markers is a piece of the file), unless the snippet's unmatched head or tail is a
  rewrite of a head or tail of about its own size (`repairs._head_tail_rewrites`), or the snippet starts
  (ends) with the file's own first (last) lines;
- right after a closing line (`}`, `end`) a marker keeps code at most as deep as that line: the rest of
  the block just closed is not kept (a replaced `return err` before `}` does not survive);
- new code is not placed between two blank lines of the original: a run of blank lines (a file's double
  spacing before a definition) stays together, and the new code brings the blank lines it shows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .anchors import (_HEAD, _closes, _ends_index, _identity, _names_nothing, _rare_identities, _sharing_ends,
                      _similar, _trivial)
from .snippet import _closing_lines, _opening_lines, _Snippet, _width

# A snippet line the original has once is context almost surely: matching it is worth much, writing it
# as new code (a duplicate) costs as much. A line the original has several times (`return nil`, `}`) is
# as likely new code as context: little either way, so new code does not latch onto old code.
UNIQUE, COMMON, TRIVIAL, BLANK = 3.0, 0.5, 0.3, 0.3  # match of a line found once / more often / `}` / blank
REINDENTED = 0.25  # a match whose indentation differs is worth this much less
EDITED = -0.5  # a snippet line that replaces a similar original line (worse than a keep and a new line)
INSERT, INSERT_BLANK = 1.0, 0.2  # a line the original does not have; a line it has costs its match weight
DELETE, DELETE_BLANK = 1.0, 0.3
NOTED = 0.1  # deleting where a deletion note stands, as a share of DELETE
CROSS = 2.5  # keeping a line a marker's indentation says it does not stand for (where its block ends)
BEYOND = 0.5  # keeping each further such line: many of them are code the snippet did not mean to delete
OUT_OF_SCOPE = 10.0  # a body's opening line written as new, or its closing line placed inside it
DUPLICATE = 1000.0  # a line shown as context written as new code (see _realigned)
SPLIT = 1.0  # new code placed between two blank lines of the original (splitting their run)
NAMED_REMOVED = 2.5  # keeping a line that uses a name the instruction asks to remove (`instruction.py`)
_NEG = -1e18


def _align(orig: list[str], snippet: _Snippet, pairs, counts: Counter, attached: dict[int, np.ndarray],
           apart: dict[int, np.ndarray], removed: np.ndarray, header_end: list[int],
           comment_edits: dict[int, list[int]], context: dict[int, int] | None = None) -> list[tuple]:
    """The best-scoring alignment as ops in order: ("keep", j) ("del", j) ("match", i, j) ("edit", i, j)
    ("ins", i); "keep" ops carry a third item, True where the kept line is outside the marker's scope.
    `apart`: snippet line -> mask of the original lines it may not match or edit (`pairs._apart`).
    `attached`: snippet line -> mask of the original lines it may match (`anchors._attached_lines`).
    `removed`: mask of the original lines that use a name the instruction asks to remove.
    `header_end`: per original line, the line where the parentheses it opens close (`_bracket_ends`).
    `comment_edits`: snippet line -> the original lines it is but for a trailing comment (`_comment_edits`).
    `context`: snippet line -> the original line it must match (writing it as new costs DUPLICATE)."""
    columns = _columns(orig, removed, header_end)
    table = _Table(snippet, counts, attached, apart, comment_edits, context or {}, columns, _gaps(snippet),
                   _fixed_columns(snippet, pairs, counts, orig, columns.keys), len(snippet.lines), len(orig))
    _fill(table)
    return _back_trace(table)


@dataclass
class _Columns:
    """Per original line (a column of the table), what the scores read."""

    keys: list[str]  # stripped
    width: np.ndarray
    blank: np.ndarray
    closes: np.ndarray  # whether the line only closes blocks (`_closes`)
    ids: dict[str, int]  # the stripped lines, and the lines as written ("\0" + rstripped), numbered
    key_id: np.ndarray  # per line: the number of its stripped text
    exact_id: np.ndarray  # per line: the number of its text as written
    by_ends: dict[str, list[int]]  # `_ends_index`: the lines a line may be `_similar` to
    by_head: dict[str, list[int]]  # lines by their first word (`_HEAD`)
    by_identity: dict[tuple[str, ...], set[int]]  # `_rare_identities`
    header_end: list[int]
    removed: np.ndarray  # the lines that go with a name the instruction removes
    delete_between: np.ndarray  # the cost of deleting each line between two snippet lines
    keep_removed: np.ndarray  # the cost of keeping each line at a marker (NAMED_REMOVED where removed)
    splits: np.ndarray  # per column: SPLIT where it lies between two blank lines
    prev_width: np.ndarray  # per line: the width of the non-blank line before it
    next_width: np.ndarray  # per column: the width of the next non-blank line
    next_closes: np.ndarray  # per column: whether that line only closes a block


def _columns(orig: list[str], removed: np.ndarray, header_end: list[int]) -> _Columns:
    n = len(orig)
    keys = [line.strip() for line in orig]
    width = np.array([_width(line) for line in orig], dtype=np.int64)
    blank = np.array([not k for k in keys], dtype=bool)
    ids: dict[str, int] = {}
    key_id = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int64)
    exact_id = np.array([ids.setdefault("\0" + line.rstrip(), len(ids)) for line in orig], dtype=np.int64)
    by_head: dict[str, list[int]] = {}
    for j, k in enumerate(keys):
        if head := _HEAD.match(k):
            by_head.setdefault(head[0], []).append(j)
    delete = np.where(blank, DELETE_BLANK, DELETE)
    delete_between = np.where(removed, 0.0, delete)  # between two snippet lines a removed line goes for free
    keep_removed = np.where(removed, NAMED_REMOVED, 0.0)
    splits = np.concatenate(([0.0], np.where(blank[:-1] & blank[1:], SPLIT, 0.0), [0.0])) if n else np.zeros(1)
    prev_width = np.full(n, 1 << 30, dtype=np.int64)
    for j in range(1, n):
        prev_width[j] = prev_width[j - 1] if blank[j - 1] else width[j - 1]
    next_width = np.full(n + 1, -1, dtype=np.int64)
    next_closes = np.zeros(n + 1, dtype=bool)
    closes = np.array([_closes(k) for k in keys], dtype=bool)
    for j in range(n - 1, -1, -1):
        next_width[j] = next_width[j + 1] if blank[j] else width[j]
        next_closes[j] = next_closes[j + 1] if blank[j] else closes[j]
    return _Columns(keys, width, blank, closes, ids, key_id, exact_id, _ends_index(keys), by_head,
                    _rare_identities(keys), header_end, removed, delete_between, keep_removed, splits,
                    prev_width, next_width, next_closes)


@dataclass
class _Gaps:
    """What the markers say, per snippet line and per gap (gap i lies before line i; m + 1 gaps)."""

    closing: list[int | None]  # per line: the indentation of the marker whose scope it closes (`_closing_lines`)
    opening: list[bool]  # per line: whether it opens a body a marker inside it elides (`_opening_lines`)
    closed_at: dict[int, int]  # gap with a marker right after a closing line (`}`, `end`) -> that line's width
    after: list[int | None]  # per gap: the snippet's next non-blank line after it
    resumes: set[int]  # the first line of each hunk after a marker: where the marker stops keeping old code
    # Per gap with a marker: the width of the snippet's next line, where it is less indented than the
    # marker (it follows the block the marker is in, without closing it), else None.
    sibling_width: list[int | None]


def _gaps(snippet: _Snippet) -> _Gaps:
    s_lines, m = snippet.lines, len(snippet.lines)
    closed_at = {i: _width(s_lines[i - 1]) for i in range(1, m + 1)
                 if snippet.reach[i] is not None and _closes(s_lines[i - 1].strip())}
    after: list[int | None] = [None] * (m + 1)
    for g in range(m - 1, -1, -1):
        after[g] = g if s_lines[g].strip() else after[g + 1]
    resumes = {after[g] for g in range(m) if snippet.reach[g] is not None and after[g] is not None}
    sibling_width: list[int | None] = [None] * (m + 1)
    for g in range(1, m):
        if snippet.reach[g] is not None and (t := after[g]) is not None and not _closes(s_lines[t].strip()) \
                and _width(s_lines[t]) < snippet.reach[g]:
            sibling_width[g] = _width(s_lines[t])
    return _Gaps(_closing_lines(snippet), _opening_lines(snippet), closed_at, after, resumes, sibling_width)


@dataclass
class _FixedColumns:
    """Rows whose place in the original is settled before scoring."""

    starts_at: dict[int, int]  # row -> the one column it may be left on (where its snippet line starts)
    ends_at: dict[int, int]  # row -> the one column it may be entered on (where the line before it ends)
    inside: list[tuple[int, int, int, int]]  # (first row, last row, first column, last column) of a pair shown whole


def _fixed_columns(snippet: _Snippet, pairs, counts: Counter, orig: list[str], o_keys: list[str]) -> _FixedColumns:
    """A definition shown whole (snippet lines a..b) replaces the original's (lines start..end): the
    alignment is at column `start` before line a and places line b on column end + 1. New code after the
    last marker, with nothing after it, ends at the end of the file; a snippet that starts (ends) with the
    file's first (last) lines starts (ends) where the file does."""
    s_lines, m, n = snippet.lines, len(snippet.lines), len(orig)
    starts_at, ends_at, inside = {}, {}, []
    for a, b, start, end, whole in pairs:
        starts_at[a], ends_at[b + 1] = start, end + 1
        if whole:
            inside.append((a + 1, b, start, end + 1))
    last_hunk = [line.strip() for line, h in zip(s_lines, snippet.hunk_of) if h == snippet.hunk_of[-1]] if m else []
    if m and snippet.reach[-1] is None and not any(k in counts for k in last_hunk if k):
        ends_at[m] = n
    content = [orig[j].rstrip() for j in range(n) if o_keys[j]]
    s_content = [i for i in range(m) if s_lines[i].strip()]
    s_text = [s_lines[i].rstrip() for i in s_content]
    if content and s_content and snippet.reach[0] is None and _names_the_end(s_text, content):
        starts_at.setdefault(s_content[0], next(j for j in range(n) if o_keys[j]))
    if content and s_content and snippet.reach[-1] is None and _names_the_end(s_text[::-1], content[::-1]):
        ends_at.setdefault(s_content[-1] + 1, max(j for j in range(n) if o_keys[j]) + 1)
    return _FixedColumns(starts_at, ends_at, inside)


@dataclass
class _Table:
    """One alignment: its inputs and the table, rows 0..m (the gaps between snippet lines) by columns
    0..n (the gaps between original lines)."""

    snippet: _Snippet
    counts: Counter
    attached: dict[int, np.ndarray]
    apart: dict[int, np.ndarray]
    comment_edits: dict[int, list[int]]
    context: dict[int, int]
    columns: _Columns
    gaps: _Gaps
    fixed: _FixedColumns
    m: int  # snippet lines
    n: int  # original lines
    score: np.ndarray = field(init=False)  # per cell: the best score of a path to it
    src: np.ndarray = field(init=False)  # per cell: the column its row was entered on, on that path
    how: np.ndarray = field(init=False)  # per cell: how its row was entered: 0 insert, 1 match, 2 edit
    positions: np.ndarray = field(init=False)  # the column numbers
    shown: Counter = field(init=False)  # the snippet's stripped lines, counted

    def __post_init__(self) -> None:
        self.shown = Counter(line.strip() for line in self.snippet.lines)
        self.score = np.full((self.m + 1, self.n + 1), _NEG)
        self.src = np.zeros((self.m + 1, self.n + 1), dtype=np.int32)
        self.how = np.zeros((self.m + 1, self.n + 1), dtype=np.int8)
        self.positions = np.arange(self.n + 1)


def _fill(table: _Table) -> None:
    """The recurrence: row 0 entered at column 0, each next row entered from the one before."""
    first = np.full(table.n + 1, _NEG)
    first[0] = 0.0
    _move_along_row(table, 0, first)
    for i in range(1, table.m + 1):
        _move_along_row(table, i, _enter_row(table, i))


def _scope(table: _Table, i: int) -> int | None:
    """How deep the marker in gap i keeps lines: a marker between two snippet lines stands for code
    as deep as it is indented; one before the first or after the last line for all before or after.
    Where the line after it closes a block at that block's end in the original (a twin from
    `_closing_twins`), the marker stands for the rest of that block, however shallow it is written."""
    snippet = table.snippet
    if not 0 < i < table.m or (reach := snippet.reach[i]) is None:
        return None
    t = table.gaps.after[i]
    if t is not None and t in table.context and _closes(snippet.lines[t].strip()):
        return min(reach, _width(snippet.lines[t]) + 1)
    return reach


def _move_costs(table: _Table, i: int) -> np.ndarray:
    """Per original line: the cost of passing it along row i (keeping it, or deleting it between two
    snippet lines)."""
    snippet, columns = table.snippet, table.columns
    if _deletes_along(snippet, i):
        # A deletion note between the two lines says lines there go: deleting them costs a tenth, still
        # enough that the alignment deletes no more than the note's place needs.
        return columns.delete_between * (NOTED if i in snippet.noted_gaps else 1.0)
    if (reach := _scope(table, i)) is None:  # a piece of the file, or all that comes before / after it
        return np.zeros(table.n)  # (a line the instruction removes is deleted there, see _back_trace)
    cross = columns.prev_width >= reach
    if (sibling := table.gaps.sibling_width[i]) is not None:
        # A line as shallow as the snippet's next one is that line's sibling, not the replaced
        # end of the marker's block: keeping it costs no more than keeping any later one.
        cross = cross & (columns.width > sibling)
    costs = columns.keep_removed + np.where(columns.blank | (columns.width >= reach), 0.0,
                                            np.where(cross, CROSS, BEYOND))
    if sibling is not None:
        # The snippet goes on beside the block this marker is in, without showing its closing
        # line (`}`, `end`): that line is kept, or the block would stay open.
        costs = np.where(columns.closes & (columns.width == sibling) & (columns.prev_width >= reach),
                         columns.keep_removed, costs)
    return costs


def _deletes_along(snippet: _Snippet, i: int) -> bool:
    """Whether the original lines passed along row i are deleted: between two snippet lines with no
    marker between them, and before the first (after the last) where a deletion note stands there."""
    m = len(snippet.lines)
    return snippet.reach[i] is None and (0 < i < m or i == 0 and snippet.noted_head or i == m and snippet.noted_tail)


def _move_along_row(table: _Table, i: int, cand: np.ndarray) -> None:
    """Row i's scores from the scores of entering it on each column (`cand`): the best of entering
    there and of entering on a column to the left and passing the original lines between."""
    fixed, positions = table.fixed, table.positions
    if i in fixed.ends_at:
        cand = np.where(positions == fixed.ends_at[i], cand, _NEG)
    costs = _move_costs(table, i)
    # Moving along the row consumes original lines; the best start for each column is a running max.
    acc = np.concatenate(([0.0], np.cumsum(costs)))
    val = cand + acc
    if (closed := table.gaps.closed_at.get(i)) is not None:
        # Right after a closing line, code continues at most as deep as it: keeping a deeper line
        # first (the rest of the block just closed) costs CROSS; staying put costs nothing.
        val = val - np.where(table.columns.next_width > closed, CROSS, 0.0)
    run = np.maximum.accumulate(val)
    moved = run - acc
    table.score[i] = np.maximum(cand, moved)
    table.src[i] = np.where(cand >= moved, positions, np.maximum.accumulate(np.where(val >= run, positions, 0)))
    if i in fixed.starts_at:
        table.score[i, :fixed.starts_at[i]] = _NEG
        table.score[i, fixed.starts_at[i] + 1:] = _NEG
    for lo, hi, start, stop in fixed.inside:
        if lo <= i <= hi:
            table.score[i, :start] = _NEG
            table.score[i, stop + 1:] = _NEG


def _line_weights(key: str, counts: Counter, shown: Counter) -> tuple[float, float]:
    """(what matching the stripped snippet line `key` is worth, what writing it as new costs). `shown`
    counts the snippet's lines: a line is unique only where both have it once (a line the snippet shows
    twice and the original has once is new code at least once, and says nothing about where its hunk goes)."""
    if not key:
        return BLANK, INSERT_BLANK
    if key not in counts:
        return 0.0, INSERT
    if _trivial(key):
        return TRIVIAL, TRIVIAL
    weight = UNIQUE if counts[key] == 1 and shown[key] == 1 and not _names_nothing(key) else COMMON
    return weight, weight


def _enter_row(table: _Table, i: int) -> np.ndarray:
    """The scores of entering row i on each column, writing snippet line i - 1: as new (from the same
    column of row i - 1) or on original line j - 1 (from column j - 1), matched or as an edit; records
    which in `how`."""
    columns, gaps = table.columns, table.gaps
    line = table.snippet.lines[i - 1]
    key, prev = line.strip(), table.score[i - 1]
    weight, insert = _line_weights(key, table.counts, table.shown)
    cand = prev - (DUPLICATE if i - 1 in table.context else insert)
    if key:
        cand = cand - columns.splits  # new code goes beside a run of blank lines, not into it
    gain, edited = _diagonal_gains(table, i - 1, weight)
    diag = np.concatenate(([_NEG], prev[:-1] + gain))
    if (reach := gaps.closing[i - 1]) is not None:
        # The first line less indented than the marker before it closes the marker's scope: it is
        # placed where that scope ends (on the first such original line, or before it when new).
        ends = ~columns.blank & (columns.width < reach)
        cand = np.where(np.concatenate((ends, [True])), cand, cand - OUT_OF_SCOPE)
        diag = np.where(np.concatenate(([False], ends)), diag, diag - OUT_OF_SCOPE)
    if i - 1 in gaps.resumes and not _closes(key):
        # New code after a marker starts where a block at its depth may: a marker does not stop in
        # the middle of a deeper block (before its lines, or before the closing line at this depth).
        width = _width(line)
        cand = cand - np.where((columns.next_width > width) | ((columns.next_width == width) & columns.next_closes),
                               CROSS, 0.0)
    if gaps.opening[i - 1]:
        cand = cand - OUT_OF_SCOPE  # a marker inside a body stands for existing code: the body exists
    better = diag >= cand
    table.how[i] = np.where(better, np.where(np.concatenate(([False], edited)), 2, 1), 0)
    return np.where(better, diag, cand)


def _diagonal_gains(table: _Table, s: int, weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Per original line: what placing snippet line s on it is worth (_NEG where it may not go), and
    whether that is an edit rather than a match."""
    columns, line = table.columns, table.snippet.lines[s]
    key = line.strip()
    gain = np.full(table.n, _NEG)
    edited = np.zeros(table.n, dtype=bool)
    if key in columns.ids:
        strip_eq = columns.key_id == columns.ids[key]
        gain[strip_eq] = weight - REINDENTED
        exact = columns.ids.get("\0" + line.rstrip())
        if exact is not None:
            gain[columns.exact_id == exact] = weight
    if key and len(key) >= 4 and key not in table.counts:  # a line the original has is not an edit of another
        for j in _edited_lines(table, s):
            if gain[j] == _NEG:
                gain[j], edited[j] = EDITED, True
    if (others := table.apart.get(s)) is not None:
        gain = np.where(others, _NEG, gain)
    if (decorated := table.attached.get(s)) is not None:
        gain = np.where(decorated, gain, _NEG)
    if (twin := table.context.get(s)) is not None:
        gain = np.where(table.positions[:-1] == twin, gain, _NEG)
    return gain, edited


def _edited_lines(table: _Table, s: int) -> set[int]:
    """The original lines that snippet line s (a line the original does not have) may be an edit of."""
    columns, line = table.columns, table.snippet.lines[s]
    key = line.strip()
    edits = {j for j in _sharing_ends(columns.by_ends, key) if _similar(key, columns.keys[j])}
    identity = _identity(key)
    if table.gaps.opening[s] and (head := _HEAD.match(key)):
        # A new opening line whose body a marker keeps edits an opener of that body's kind at its
        # depth (`<View style={styles.actions}>` given a second style): the body exists. Its
        # header may have gone on over more lines (`def build(name,` / `path):`). A definition of a
        # new name edits only a header that reads like it (a rename): one of another name and other
        # parameters is another definition (a new function whose body the marker says is moved there).
        renames = identity is not None and identity[0] == "defines"
        edits |= {j for j in columns.by_head.get(head[0], ()) if columns.width[j] == _width(line)
                  and columns.keys[columns.header_end[j]][-1:] == key[-1] and key[-1] in "{([>:"
                  and (not renames or _similar(key, columns.keys[j]))}
    if identity and identity[0] in ("defines", "declares") and identity in columns.by_identity:
        edits = set()  # a header or declaration edits the one of the name it declares, not a neighbour's
    return edits | columns.by_identity.get(identity, set()) | set(table.comment_edits.get(s, ()))


def _back_trace(table: _Table) -> list[tuple]:
    """The best path, from the last cell back to the first, as ops in order."""
    snippet, columns, m = table.snippet, table.columns, table.m
    ops: list[tuple] = []
    i, j = m, table.n
    while True:
        s = int(table.src[i, j])
        reach = _scope(table, i)
        for k in range(j - 1, s - 1, -1):
            if _deletes_along(snippet, i) or reach is None and columns.removed[k]:
                ops.append(("del", k))
            else:
                outside = reach is not None and not columns.blank[k] and columns.width[k] < reach
                ops.append(("keep", k, bool(outside)))
        j = s
        if i == 0:
            break
        if table.how[i, j] == 0:
            ops.append(("ins", i - 1))
        else:
            ops.append(("match" if table.how[i, j] == 1 else "edit", i - 1, j - 1))
            j -= 1
        i -= 1
    return ops[::-1]


def _names_the_end(snippet: list[str], original: list[str]) -> bool:
    """Whether the snippet's first non-blank lines that equal the original's first ones (pass both
    reversed for the last ones) say "the start of the file": a line of code does; closing lines alone
    (`}`, `end`) do only where the original has that run of them nowhere else."""
    k = next((n for n, (a, b) in enumerate(zip(snippet, original)) if a != b), min(len(snippet), len(original)))
    if k == 0:
        return False
    if not all(_trivial(line.strip()) for line in original[:k]):
        return True
    run = original[:k]
    return not any(original[s:s + k] == run for s in range(1, len(original) - k + 1))
