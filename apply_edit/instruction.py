"""What an instruction says that a snippet cannot show: the code names it asks to remove.

A snippet shows an edit by its new lines; a line it drops beside a marker it cannot show at all (the
marker says "unchanged"). So "drop the deprecated `http.CloseNotifier`", or "std::random_shuffle was
removed in C++17", is a removal only the instruction states. The merge does not keep such a line for a
marker, and the checks refuse a result that still has the name.
"""

from __future__ import annotations

import re

from .languages import code_of

# "remove `x`", "drop the deprecated x", "stop depending on x", "no longer use x" and their like.
_REMOVE_VERB = re.compile(
    r"\b(?:remove|drop|delete|stop (?:using|depending on|calling)|get rid of|no longer (?:use|support|"
    r"depend on|call))(?:s|d|ing)?\s+(?:(?:the|its|their|deprecated|unused|old|legacy|closing|trailing|stray)\s+)*"
    r"`?([A-Za-z_][\w.:]*|[^\s\w`'\"]{2,})", re.IGNORECASE)
# "x was removed", "`x` has been removed": the name of something that no longer exists.
_WAS_REMOVED = re.compile(r"`?([A-Za-z_][\w.:]*)`?\s+(?:was|were|has been|have been)\s+removed\b", re.IGNORECASE)
# `http.CloseNotifier`, `call_extra`, `attrIndex`, `?>`: not a word
_CODE_NAME = re.compile(r"[._:]|[a-z][A-Z]|^[^\w]+$")


def names_to_remove(instruction: str, update: str, language: str) -> set[str]:
    """The code names the instruction asks to remove that the snippet's code does not use (a snippet
    comment that names them, `// x was removed; use y`, does not keep them)."""
    named = {m[1].rstrip(".:") for pattern in (_REMOVE_VERB, _WAS_REMOVED) for m in pattern.finditer(instruction)}
    named = {name for name in named if _CODE_NAME.search(name)}
    if not named:
        return set()
    code = code_text(update, language)
    return {name for name in named if not uses(code, name)}


def code_text(text: str, language: str) -> str:
    """The text's code: its comments and strings taken out, line by line."""
    return "\n".join(map(code_of(language), text.split("\n")))


def uses(code: str, name: str) -> bool:
    """Whether `code` uses `name` as a whole name (`std::shuffle` is not in `std::shuffle_order`)."""
    return re.search(r"(?<!\w)" + re.escape(name) + r"(?!\w)", code) is not None
