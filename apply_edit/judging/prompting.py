"""Prompts for apply, extraction of the file from the model's output, and incremental detokenization.

The model writes the whole updated file between delimiters. The assistant turn is pre-filled with the
opening delimiter, so the first generated token is already file content and copy drafting can start at
once; generation stops at the closing delimiter (which must start a line) or at end of turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence


def text_bytes(*texts: str) -> int:
    """The UTF-8 size of request texts (lone surrogates counted, not refused): what size limits measure."""
    return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


SYSTEM = (
    "You merge code edits. You get a file and an update snippet. In the snippet, comments like "
    "`// ... existing code ...` or `# ... existing code ...` stand for unchanged code of the file. "
    "Write the complete updated file: apply every change the snippet shows, keep every other line of the "
    "file exactly as it is (same order, whitespace and comments), and never write the `existing code` "
    "comments themselves."
)


@dataclass(frozen=True)
class PromptFormat:
    """How a request becomes a chat: the user message, the pre-filled answer start, the closing line."""

    name: str
    user: str  # str.format template: {instruction_block} {original} {update} {lang} {merged}
    answer_open: str  # pre-filled at the start of the assistant turn
    close: str  # the output ends at a line starting with this
    system: str = SYSTEM
    example: tuple[str, str] | None = None  # one worked (user, assistant) exchange, or none

    @property
    def shows_merge(self) -> bool:
        """The prompt shows the merge candidate (the model reads it as a draft)."""
        return "{merged}" in self.user


_EXAMPLE_ORIGINAL = "def area(w, h):\n    return w * h\n\n\ndef main():\n    print(area(2, 3))\n"
_EXAMPLE_UPDATE = "def area(w, h, scale=1):\n    return w * h * scale\n\n# ... existing code ...\n"
_EXAMPLE_MERGED = "def area(w, h, scale=1):\n    return w * h * scale\n\n\ndef main():\n    print(area(2, 3))\n"

# The file first and the instruction after it: what repeats across edits of one file (system prompt, file)
# is the prompt's start, which the target's prefix store keeps (models/prefix_cache.py).
TAGS_USER = "<code>\n{original}</code>\n\n{instruction_block}<update>\n{update}</update>"

FORMATS = {
    fmt.name: fmt
    for fmt in [
        PromptFormat("tags", user=TAGS_USER, answer_open="<updated-code>\n", close="</updated-code>"),
        PromptFormat(
            "fence",
            user="{instruction_block}The file:\n```{lang}\n{original}```\n\nThe update snippet:\n```{lang}\n{update}```"
                 "\n\nWrite the complete updated file.",
            answer_open="```{lang}\n", close="```",
        ),
        PromptFormat(
            "tags-reminder", user=TAGS_USER + "\n\nWrite the whole updated code, from its first line to its last.",
            answer_open="<updated-code>\n", close="</updated-code>",
        ),
        PromptFormat(
            "update-first",
            user="{instruction_block}<update>\n{update}</update>\n\n<code>\n{original}</code>\n\n"
                 "Write the whole code with the update applied, from its first line to its last.",
            answer_open="<updated-code>\n", close="</updated-code>",
        ),
        PromptFormat(
            "tags-draft",
            user=TAGS_USER + "\n\n<draft>\n{merged}</draft>\n\nThe draft is a mechanical merge of the update into "
                             "the code and may be wrong. Write the correct updated code, from its first line to its last.",
            answer_open="<updated-code>\n", close="</updated-code>",
        ),
        PromptFormat(
            "tags-example", user=TAGS_USER, answer_open="<updated-code>\n", close="</updated-code>",
            example=(
                TAGS_USER.format(instruction_block="", original=_EXAMPLE_ORIGINAL, update=_EXAMPLE_UPDATE),
                "<updated-code>\n" + _EXAMPLE_MERGED + "</updated-code>",
            ),
        ),
    ]
}
DEFAULT_FORMAT = "tags-draft"


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: its text, and where the documents it shows (original, snippet, merge) lie in it."""

    text: str
    documents: dict[str, tuple[int, int]]  # "original", "update", "merged" (those placed): (start, end)

    def words(self) -> list[str]:
        """The pieces of the prompt around its documents, in order (blank ones dropped): its tags and
        instructions, which copy drafting reads as a reference of their own."""
        bounds = [0, *(i for span in sorted(self.documents.values()) for i in span), len(self.text)]
        pieces = (self.text[a:b] for a, b in zip(bounds[::2], bounds[1::2]))
        return [piece for piece in pieces if piece.strip()]


# Stand-ins for the documents while the chat template renders the messages; each is then replaced by its
# document, so the builder knows where each one lies (private-use characters: not in any file's template).
_SLOT = "\ue000{}\ue001"
_SLOTS = re.compile("\ue000(\\d+)\ue001")


def build_prompt(tokenizer, fmt: PromptFormat, original: str, update: str, instruction: str = "",
                 language: str = "", merged: str | None = None) -> Prompt:
    """The full prompt, ending with the pre-filled start of the answer. `merged`: the merge candidate,
    for the formats that show it (`fmt.shows_merge`)."""
    if fmt.shows_merge and merged is None:
        raise ValueError(f"prompt format {fmt.name!r} shows the merge: pass it")
    instruction_block = f"<instruction>{instruction.strip()}</instruction>\n\n" if instruction.strip() else ""
    # The instruction has a slot too (not a document: its words are the prompt's), so no text a user sends
    # can pass for a slot.
    names = ("original", "update", "merged", "instruction")
    documents = [_with_newline(original), _with_newline(update), _with_newline(merged or ""), instruction_block]
    user = fmt.user.format(**{name: _SLOT.format(i) for i, name in enumerate(names[:3])},
                           instruction_block=_SLOT.format(3), lang=language)
    messages = [{"role": "system", "content": fmt.system}]
    if fmt.example:
        messages += [{"role": "user", "content": fmt.example[0]}, {"role": "assistant", "content": fmt.example[1]}]
    messages.append({"role": "user", "content": user})
    if getattr(tokenizer, "chat_template", None):
        head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:
        head = "\n\n".join(m["content"] for m in messages) + "\n\n"
    text, spans, at = "", {}, 0
    for slot in _SLOTS.finditer(head):
        which = int(slot.group(1))
        text += head[at:slot.start()]
        if which < 3:
            spans[names[which]] = (len(text), len(text) + len(documents[which]))
        text += documents[which]
        at = slot.end()
    return Prompt(text + head[at:] + fmt.answer_open.format(lang=language), spans)


class OutputExtractor:
    """Turns streamed model text into streamed file text.

    Stops at the closing delimiter at the start of a line, and holds back any tail that could still turn
    out to be that delimiter, so no delimiter fragment is ever streamed. When the original file has no
    final newline, the newline before the delimiter is the delimiter's, not the file's.
    """

    def __init__(self, close: str, keep_final_newline: bool = True):
        self.marker = "\n" + close
        self.keep_final_newline = keep_final_newline
        self.pending = "\n"  # a virtual newline so a delimiter on the very first line is found too
        self.done = False

    def push(self, text: str) -> str:
        """Feed model text; returns the file text that is now certain."""
        if self.done:
            return ""
        self.pending += text
        at = self.pending.find(self.marker)
        if at >= 0:
            self.done = True
            body = self.pending[1:at + 1] if self.keep_final_newline else self.pending[1:at]
            self.pending = ""
            return body
        # pending[cut:] could still become the delimiter (it starts with the newline the delimiter needs).
        cut = len(self.pending) - self._partial_marker()
        if self.keep_final_newline and cut < len(self.pending):
            cut += 1  # that newline belongs to the file either way: release it, keep it as context
        cut = max(cut, 1)
        out, self.pending = self.pending[1:cut], self.pending[cut - 1:]
        return out

    def finish(self) -> str:
        """End of generation without a delimiter (end of turn, token limit): release what is held."""
        if self.done:
            return ""
        self.done = True
        rest, self.pending = self.pending[1:], ""
        if not self.keep_final_newline and rest.endswith("\n"):
            rest = rest[:-1]
        return rest

    def _partial_marker(self) -> int:
        """Length of the longest tail of `pending` that is a proper prefix of the marker."""
        for n in range(min(len(self.marker) - 1, len(self.pending)), 0, -1):
            if self.marker.startswith(self.pending[-n:]):
                return n
        return 0


class IncrementalDetokenizer:
    """Token ids in, text out, never splitting a multi-byte character.

    Decodes a short window (from `prefix` on) instead of the whole sequence each time; text whose last
    character is incomplete (U+FFFD) is held until the next tokens complete it.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # window start
        self.read = 0  # ids[prefix:read] have been turned into text already

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def push(self, ids: Sequence[int]) -> str:
        self.ids.extend(ids)
        done_text = self._decode(self.ids[self.prefix:self.read])
        window_text = self._decode(self.ids[self.prefix:])
        if window_text.endswith("\ufffd") or not window_text.startswith(done_text):
            return ""
        self.prefix, self.read = self.read, len(self.ids)
        return window_text[len(done_text):]

    def flush(self) -> str:
        """End of generation: whatever is still held (e.g. a character cut off by the token limit)."""
        done_text = self._decode(self.ids[self.prefix:self.read])
        window_text = self._decode(self.ids[self.prefix:])
        self.prefix = self.read = len(self.ids)
        return window_text[len(done_text):]


class TextStop:
    """Token-level stop for the engine: generation ends with the token that completes `marker` in text.

    Called with all new tokens after each block; decodes only the tail since the last check (plus a few
    tokens of look-back, in case the marker straddles blocks). Returns how many tokens to keep.
    """

    LOOKBACK = 16

    def __init__(self, tokenizer, marker: str, lead: str = "\n"):
        self.tokenizer = tokenizer
        self.marker = marker
        self.lead = lead  # text before the first new token (the answer opening ends with a newline)
        self.checked = 0

    def __call__(self, tokens: list[int]) -> int | None:
        start = max(0, self.checked - self.LOOKBACK - len(self.marker))
        lead = self.lead if start == 0 else ""

        def has_marker(end: int) -> bool:
            return self.marker in lead + self.tokenizer.decode(tokens[start:end], skip_special_tokens=False)

        if not has_marker(len(tokens)):
            self.checked = len(tokens)
            return None
        end = max(self.checked, start + 1)
        while not has_marker(end):
            end += 1
        self.checked = len(tokens)
        return end
