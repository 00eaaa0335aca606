"""Releases on the registries: download once into a cache named by sha256, check the hash, read the
source files out of the archive."""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ...code.languages import TABLE

# The languages a corpus case may be in, by file extension: those a grammar parses here, and Lua.
EXTENSIONS = {ext: language.name for language in TABLE if language.grammar for ext in language.extensions} | {
    ".lua": "lua"}
# Folders whose files are not a project's own hand-written source.
_NOT_SOURCE = {"vendor", "vendored", "third_party", "thirdparty", "third-party", "node_modules", "dist", "build",
               "_vendor", "deps", "external", "generated", "testdata", "fixtures", "__snapshots__"}
_MAX_BYTES = 400_000


@dataclass(frozen=True)
class Release:
    version: str
    url: str
    sha256: str


@dataclass(frozen=True)
class Project:
    name: str
    registry: str
    license: str
    releases: tuple[Release, ...]


def load_sources(path: Path) -> list[Project]:
    """The manifest: projects with their releases, oldest first."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [Project(row["project"], row["registry"], row["license"],
                    tuple(Release(r["version"], r["url"], r["sha256"]) for r in row["releases"]))
            for row in rows]


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "apply_edit" / "corpus-downloads"


def fetch(release: Release, cache: Path, also: list[Path] = ()) -> bytes:
    """The release's bytes, from the cache (or any folder in `also`) or downloaded; ValueError when the
    bytes do not have the manifest's sha256."""
    for folder in (cache, *also):
        path = folder / release.sha256
        if path.is_file():
            data = path.read_bytes()
            break
    else:
        with urllib.request.urlopen(release.url, timeout=120) as answer:
            data = answer.read()
    if hashlib.sha256(data).hexdigest() != release.sha256:
        raise ValueError(f"{release.url}: sha256 is not the manifest's {release.sha256}")
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / release.sha256
    if not target.exists():
        tmp = target.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(target)
    return data


def _source_path(name: str) -> str | None:
    """The path below the archive's top folder, None for a file that is not source worth an edit."""
    parts = PurePosixPath(name).parts[1:]  # every release archive has one top folder (name-version/)
    if not parts or any(p.lower() in _NOT_SOURCE or p.startswith(".") for p in parts[:-1]):
        return None
    file = parts[-1]
    if PurePosixPath(file).suffix.lower() not in EXTENSIONS or ".min." in file or file.endswith(".d.ts"):
        return None
    return "/".join(parts)


def source_files(data: bytes) -> dict[str, str]:
    """The archive's source files (path below the top folder -> UTF-8 text, line endings kept)."""
    files: dict[str, str] = {}

    def keep(name: str, read) -> None:
        path = _source_path(name)
        if path is None:
            return
        raw = read()
        if raw is None or len(raw) > _MAX_BYTES:
            return
        try:
            files[path] = raw.decode("utf-8")
        except UnicodeDecodeError:
            pass

    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                if not info.is_dir():
                    keep(info.filename, lambda: archive.read(info) if info.file_size <= _MAX_BYTES else None)
        return files
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive:
            if member.isfile():
                keep(member.name, lambda: archive.extractfile(member).read() if member.size <= _MAX_BYTES else None)
    return files
