"""Fixture edit cases: ``<dir>/<case>/original.<ext>``, ``update.<ext>``, ``expected.<ext>``, optional
``instruction.txt``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..request.runs import ApplyRequest
from ..code.regions import language_for


@dataclass
class EditCase:
    name: str
    path: Path  # the original file
    original: str
    update: str
    expected: str
    instruction: str = ""

    @property
    def language(self) -> str:
        return language_for(self.path.name, self.original)

    def request(self) -> ApplyRequest:
        """The apply request this case stands for, as a client would send it."""
        return ApplyRequest(self.original, self.update, self.instruction, self.language, str(self.path))


def read_text(path: Path) -> str:
    """UTF-8 text with line endings kept exactly (CRLF stays CRLF)."""
    with path.open(encoding="utf-8", newline="") as f:
        return f.read()


def _one(folder: Path, stem: str) -> Path:
    found = sorted(p for p in folder.glob(f"{stem}.*"))
    if len(found) != 1:
        raise ValueError(f"{folder}: expected exactly one {stem}.<ext>, found {len(found)}")
    return found[0]


def load_case(folder: Path) -> EditCase:
    original = _one(folder, "original")
    instruction = folder / "instruction.txt"
    return EditCase(
        name=folder.name,
        path=original,
        original=read_text(original),
        update=read_text(_one(folder, "update")),
        expected=read_text(_one(folder, "expected")),
        instruction=read_text(instruction).strip() if instruction.exists() else "",
    )


def load_cases(directory: str | Path, only: list[str] | None = None) -> list[EditCase]:
    """Every case folder under `directory` (sorted by name), or just those named in `only`."""
    root = Path(directory)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory of case folders")
    folders = [p for p in sorted(root.iterdir()) if p.is_dir() and any(p.glob("original.*"))]
    if only:
        missing = set(only) - {p.name for p in folders}
        if missing:
            raise ValueError(f"no such case(s) in {root}: {', '.join(sorted(missing))}")
        folders = [p for p in folders if p.name in only]
    if not folders:
        raise ValueError(f"{root} holds no case folders (each needs original.<ext>, update.<ext>, expected.<ext>)")
    return [load_case(p) for p in folders]
