"""Realignment by twins: snippet lines the alignment wrote as new that are copies of original lines it
kept or deleted nearby, shown as context. Each finder names such lines and the original line each must
match (its twin); `_realigned` aligns again with those matches fixed, round after round:

- lines shown as context are not written twice: a run of snippet lines that the alignment wrote as new
  right beside a marker keeping the very same run of the original is aligned again, matched to that run
  (the lines between it and the snippet line before it are then deleted, as the snippet showed them),
  and so is its end from a line found once (`_kept_twins`); a comment line that ends a hunk of new
  comment lines before a marker (`//`, `//! ````) is its twin further down the comment block the hunk
  rewrites (`_rewritten_comment_ends`); and the first lines after a marker are where the old code
  resumes, and the last line before a marker where it goes on: a line found once is not written as new
  while its original is deleted (`_resumed_lines`),
  and a run of lines the original has in a row is not written as new either (new code latching onto
  copies of old lines had pushed them aside: `_resuming_runs`);
- a block the snippet opens on a line found once and closes after a marker inside it closes where the
  original's block does (brackets decide where indentation cannot, as in a C `switch`; a header whose
  parameters close on the line that opens its body, `): Readable<T> {`, goes on to where that body
  closes: `_closing_twins`).
"""

from __future__ import annotations

from collections import Counter

from .anchors import _names_nothing, _trivial
from .snippet import _leaves_block, _Snippet, _width


def _realigned(ops: list[tuple], finders, align) -> list[tuple]:
    """Aligns again while a finder names snippet lines that must match their twins (snippet line ->
    original line); each round can show twins that the one before hid. What a finder names is kept only
    where the alignment can match every twin named so far."""
    context: dict[int, int] = {}
    for _ in range(4):
        progressed = False
        for find in finders:
            found = {i: j for i, j in find(ops).items() if i not in context}
            if not found:
                continue
            trial = {**context, **found}
            again = align(trial)
            if {op[1]: op[2] for op in again if op[0] == "match" and op[1] in trial} == trial:
                ops, context, progressed = again, trial, True
        if not progressed:
            break
    return ops


def _kept_twins(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter,
                definition_starts: set[int], definition_heads: set[int]) -> dict[int, int]:
    """Runs of lines written as new right beside a marker that keeps the very same run of original lines
    (its twin; the nearest one): the snippet showed them as context, and deleting the original lines
    between them and the snippet's line before (after) them was costlier in the alignment's scores than a
    duplicate. New code that copies a line or two of old code is not a twin: the whole run must be, or
    the run's end next to the marker (its start, for a marker before it) from a line found once in the
    original: the new lines before it replace what lies between (`if (!(f = open(path)))` rewritten
    above its unchanged error handling, with the code that computed the path gone), where no original
    definition starts among those (a new method copying the last lines of an old one far below is new),
    unless the end's twin is where a definition begins (`definition_heads`: the first line of its leading
    comment, or its header): the snippet shows the next old definition's start as context, and the
    definitions between, shown around without a marker, are deleted. Returns snippet line -> twin line, for
    an alignment where each must match its twin."""
    def written(op: tuple) -> bool:  # new lines, and blank lines between them
        return op[0] == "ins" or (op[0] == "match" and not snippet.lines[op[1]].strip())

    def kept_run(t: int, step: int) -> list[int]:
        run = []
        while 0 <= t < len(ops) and ops[t][0] == "keep":
            if orig[ops[t][1]].strip():
                run.append(ops[t][1])
            t += step
        return run if step > 0 else run[::-1]

    found: dict[int, int] = {}
    n = 0
    while n < len(ops):
        if ops[n][0] != "ins":
            n += 1
            continue
        end = next((e for e in range(n, len(ops)) if not written(ops[e])), len(ops))
        lines = [op[1] for op in ops[n:end] if op[0] == "ins" and snippet.lines[op[1]].strip()]
        keys = [snippet.lines[i].strip() for i in lines]
        if any(not _trivial(k) for k in keys):
            after, before = kept_run(end, 1), kept_run(n - 1, -1)
            for kept, starts in ((after, range(len(after) - len(keys) + 1)),
                                 (before, range(len(before) - len(keys), -1, -1))):
                start = next((t for t in starts if [orig[j].strip() for j in kept[t:t + len(keys)]] == keys), None)
                if start is not None:
                    found.update(zip(lines, kept[start:start + len(keys)]))
                    break
            else:
                found.update(_anchored_end(lines, keys, after, before, orig, counts, definition_starts,
                                           definition_heads))
        n = end
    return found


def _anchored_end(lines: list[int], keys: list[str], after: list[int], before: list[int], orig: list[str],
                  counts: Counter, definition_starts: set[int], definition_heads: set[int]) -> dict[int, int]:
    """The longest end of a written run (next to a kept run `after` it) or start (next to one `before` it)
    that starts (ends) with a line found once in the original and is a run of the kept lines, with no
    definition starting among the kept lines it passes over, but where the end begins a definition."""
    def anchor(key: str) -> bool:
        return counts[key] == 1 and not _trivial(key) and not _names_nothing(key)

    kept_after = [orig[j].strip() for j in after]
    for k in range(1, len(keys)):
        tail = keys[k:]
        if anchor(tail[0]):
            at = next((t for t in range(len(after) - len(tail) + 1) if kept_after[t:t + len(tail)] == tail), None)
            if at is not None and (not definition_starts & set(after[:at]) or after[at] in definition_heads):
                return dict(zip(lines[k:], after[at:at + len(tail)]))
    kept_before = [orig[j].strip() for j in before]
    for k in range(len(keys) - 1, 0, -1):
        head = keys[:k]
        if anchor(head[-1]):
            at = next((t for t in range(len(before) - k, -1, -1) if kept_before[t:t + k] == head), None)
            if at is not None and not definition_starts & set(before[at + k:]):
                return dict(zip(lines[:k], before[at:at + k]))
    return {}


def _resumed_lines(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter) -> dict[int, int]:
    """The first line after a marker, written as new although the old code has it right there: the
    marker says the existing code resumes at that line, so it is context. Its twin is the last instance
    the marker keeps just before it (deleting the old lines after the twin was costlier in the scores
    than a duplicate), or its one instance in the original where the alignment deletes that (new code
    after it latched onto copies of old lines and pushed it aside, whether or not the marker kept any)
    or matches it to the same text shown again further on (new code that copies the context line: the
    copy is the new one). Blank lines typed between the marker and it change none of this.
    Elsewhere a line written as new and deleted from its place may be moved on purpose (imports put in
    order). So is the last line before a marker, where the marker says the old code goes on after it:
    its one instance, where the alignment deletes that (new code before it took the old lines it ends
    with as edits)."""
    deleted = {orig[op[1]].strip(): op[1] for op in ops if op[0] == "del"}
    found = {}
    for n, op in enumerate(ops):
        if op[0] != "ins" or n == 0:
            continue
        key = snippet.lines[op[1]].strip()
        if _trivial(key):
            continue
        g = op[1]  # the gap before it, past blank lines typed beside a marker
        while snippet.reach[g] is None and g > 0 and not snippet.lines[g - 1].strip():
            g -= 1
        if snippet.reach[g] is None:
            if snippet.reach[op[1] + 1] is not None and key in deleted and counts[key] == 1:
                found[op[1]] = deleted[key]
            continue
        t = n - 1
        while t >= 0 and (ops[t][0] == "keep" and orig[ops[t][1]].strip() != key
                          or ops[t][0] == "ins" and not snippet.lines[ops[t][1]].strip()):
            t -= 1
        if t >= 0 and ops[t][0] == "keep":
            found[op[1]] = ops[t][1]
        elif counts[key] == 1 and key in deleted:
            found[op[1]] = deleted[key]
        elif counts[key] == 1 and (later := next((o[2] for o in ops[n + 1:] if o[0] == "match"
                                                  and orig[o[2]].strip() == key), None)) is not None:
            found[op[1]] = later
    return found


def _rewritten_comment_ends(ops: list[tuple], snippet: _Snippet, orig: list[str], comment) -> dict[int, int]:
    """The last line before a marker, a comment line (`//`, `//! ````, ` *`) written as new after new
    comment lines that follow a matched comment line: the hunk rewrites that comment block, and the line
    is its twin further down the same block, which the marker keeps (writing it as new was cheaper in the
    scores than deleting the old lines it replaces, so the old paragraph survived beside the new one)."""
    lines, found = snippet.lines, {}
    for n, op in enumerate(ops):
        if op[0] != "ins" or not comment(key := lines[op[1]].strip()):
            continue
        g = op[1] + 1  # the gap after it, past blank lines
        while snippet.reach[g] is None and g < len(lines) and not lines[g].strip():
            g += 1
        if snippet.reach[g] is None:
            continue
        b = n - 1
        while b >= 0 and ops[b][0] == "ins" and comment(lines[ops[b][1]].strip()):
            b -= 1
        if b == n - 1 or b < 0 or ops[b][0] != "match" or not comment(orig[ops[b][2]].strip()):
            continue
        t = n + 1
        while t < len(ops) and ops[t][0] in ("ins", "match") and not lines[ops[t][1]].strip():
            t += 1
        while t < len(ops) and ops[t][0] == "keep" and comment(orig[ops[t][1]].strip()):
            if orig[ops[t][1]].strip() == key:
                found[op[1]] = ops[t][1]
                break
            t += 1
    return found


def _closing_twins(ops: list[tuple], snippet: _Snippet, orig: list[str], counts: Counter,
                   snippet_ends: dict[int, int], original_ends: dict[int, int]) -> dict[int, int]:
    """A block the snippet opens on an original line found once closes where the original's block does.
    With a marker inside, the marker stands for the rest of that block and no more (where the
    indentation cannot tell, as in a C `switch` whose `case` lines sit at its own depth), unless it is
    less indented than the opener (`_shallower_marker`); shown whole,
    it replaces that block, however many old lines that deletes (a trailing marker would otherwise keep
    them and the snippet's closing lines be written twice)."""
    placed = {op[1]: op[2] for op in ops if op[0] == "match"}
    found = {}
    for opener, closer in snippet_ends.items():
        at = placed.get(opener)
        if at is None or at not in original_ends or placed.get(closer) == original_ends[at] \
                or counts[orig[at].strip()] != 1:
            continue
        end = original_ends[at]
        # A header's bracket closed on a line that opens its body (`): Readable<T> {`, `} else {`): the
        # block goes on to where that body closes.
        while end in original_ends and orig[end].strip()[:1] in ")]}" and _width(orig[end]) == _width(orig[at]) \
                and snippet.lines[closer].strip() != orig[end].strip():
            end = original_ends[end]
        # A marker may hide openers, so brackets alone do not pair lines: the closer sits at its opener's
        # depth, and no marker between them leaves the opener's block (`pairs._leaves_block`).
        if _leaves_block(snippet, opener, closer) or _shallower_marker(snippet, opener, closer) \
                or _keeps_nothing(snippet, opener, closer, placed, orig, end):
            continue
        if _width(snippet.lines[closer]) == _width(snippet.lines[opener]) \
                and snippet.lines[closer].strip() == orig[end].strip() and placed.get(closer) != end:
            found[closer] = end
    return found


def _shallower_marker(snippet: _Snippet, opener: int, closer: int) -> bool:
    """Whether a marker between the two lines is less indented than the opener: typed flush left, as
    agents do, it stands for lines at any depth, the opener's block's end and code after it among them."""
    depth = _width(snippet.lines[opener])
    return any(snippet.reach[g] is not None and snippet.reach[g] < depth for g in range(opener + 1, closer + 1))


def _keeps_nothing(snippet: _Snippet, opener: int, closer: int, placed: dict[int, int], orig: list[str],
                   end: int) -> bool:
    """Whether the block's code ends with the line shown before the last marker inside it: a marker
    stands for some code, so this one stands for more than the rest of that block (siblings after it
    that the block's closer in the snippet ends)."""
    gaps = [g for g in range(opener + 1, closer + 1) if snippet.reach[g] is not None]
    if not gaps:
        return False
    shown = max((i for i in range(opener, gaps[-1]) if snippet.lines[i].strip()), default=opener)
    at = placed.get(shown)
    return at is not None and at < end and not any(orig[j].strip() for j in range(at + 1, end))


def _resuming_runs(ops: list[tuple], snippet: _Snippet, orig: list[str]) -> dict[int, int]:
    """The lines a hunk starts with after a marker, where two or more of them (one a line of code) follow
    each other in the original too: the marker says the existing code resumes there, so the alignment
    must not write them as new (a new block after them had latched onto old lines further on). Their
    twin is the last such run in the original between the lines found once that the alignment matched
    in the hunks before and after theirs, and past some code after the line shown before the marker,
    which stands for that code (a run found right after it is another block's end that the run copies)."""
    written = {op[1] for op in ops if op[0] == "ins"}
    placed = {op[1]: op[2] for op in ops if op[0] in ("match", "edit")}
    content = [j for j, line in enumerate(orig) if line.strip()]
    text = [orig[j].strip() for j in content]
    once = Counter(text)
    # Where the alignment placed lines found once in the original: what surely comes before and after.
    at = {op[1]: op[2] for op in ops
          if op[0] == "match" and not _trivial(key := orig[op[2]].strip()) and once[key] == 1}
    found: dict[int, int] = {}
    for start in range(len(snippet.lines)):
        if snippet.reach[start] is None:
            continue
        run = [i for i in range(start, len(snippet.lines))
               if snippet.hunk_of[i] == snippet.hunk_of[start] and snippet.lines[i].strip()]
        keys = [snippet.lines[i].strip() for i in run]
        for k in range(len(keys), 1, -1):  # the longest head of the hunk that is a run in the original
            head = run[:k]
            if not written & set(head) or all(_trivial(key) for key in keys[:k]):
                continue
            # Only other hunks' anchors bound it: this hunk's own may be the latched ones.
            hunk = snippet.hunk_of[start]
            before = max((j for i, j in at.items() if i < head[0] and snippet.hunk_of[i] != hunk), default=-1)
            after = min((j for i, j in at.items() if i > head[-1] and snippet.hunk_of[i] != hunk), default=len(orig))
            # The marker stands for some code: the run resumes past the line after the one the snippet
            # shows before the marker.
            shown = placed.get(max((i for i in range(start) if snippet.lines[i].strip()), default=-1), -1)
            places = [s for s in range(len(text) - k + 1) if text[s:s + k] == keys[:k]
                      and before < content[s] and content[s + k - 1] < after
                      and (shown < 0 or any(orig[j].strip() for j in range(shown + 1, content[s])))]
            if places:
                found.update(zip(head, (content[places[-1] + n] for n in range(k))))
                break
    return found

