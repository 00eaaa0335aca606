"""Build the corpus: releases -> edits -> snippets -> case folders, split by project.

Everything is drawn from seeded generators keyed by the case's source (project, version, path, edit),
so the same manifest and seed give the same cases byte for byte, whatever else changes.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .edits import Edit, consistent, file_edits
from .releases import EXTENSIONS, Project, fetch, source_files
from .snippets import write_snippet

SOURCES = Path(__file__).with_name("sources.json")
HALVES = ("tune", "report")
_PER_FILE = 2


@dataclass
class Candidate:
    project: Project
    older: str
    newer: str
    path: str
    number: int  # the edit's index in its file's diff
    edit: Edit

    @property
    def language(self) -> str:
        return EXTENSIONS[PurePosixPath(self.path).suffix.lower()]

    def key(self) -> str:
        return f"{self.project.name}:{self.older}:{self.newer}:{self.path}:{self.number}"


def half_of(project: str) -> str:
    """The half a project's cases go to: fixed by its name alone, so no project is in both."""
    return HALVES[int(hashlib.sha256(project.encode()).hexdigest()[:8], 16) % 2]


def _rng(seed: int, key: str) -> random.Random:
    return random.Random(int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()[:16], 16))


def project_candidates(project: Project, cache: Path, also: list[Path]) -> list[Candidate]:
    """Every edit between the project's consecutive releases."""
    found: list[Candidate] = []
    files = [source_files(fetch(release, cache, also)) for release in project.releases]
    for (old, new), (older, newer) in zip(zip(files, files[1:]), zip(project.releases, project.releases[1:])):
        for path in sorted(old.keys() & new.keys()):
            for number, edit in enumerate(file_edits(old[path], new[path])):
                found.append(Candidate(project, older.version, newer.version, path, number, edit))
    return found


def choose(candidates: list[Candidate], per_project: int, rng: random.Random) -> list[Candidate]:
    """Up to `per_project` edits, spread over the project's languages first, then its files (at most
    `_PER_FILE` from one file), of those that leave the program consistent (`edits.consistent`)."""
    by_language: dict[str, dict[str, list[Candidate]]] = defaultdict(lambda: defaultdict(list))
    for c in candidates:
        by_language[c.language][c.path].append(c)
    queues = []
    for language in sorted(by_language):
        files = list(by_language[language].values())
        rng.shuffle(files)
        picks = [rng.sample(edits, min(_PER_FILE, len(edits))) for edits in files]
        queues.append([c for round_ in range(_PER_FILE) for p in picks if round_ < len(p) for c in [p[round_]]])
    chosen: list[Candidate] = []
    while len(chosen) < per_project and any(queues):
        for queue in queues:
            if queue and len(chosen) < per_project:
                c = queue.pop(0)
                if consistent(c.edit, c.language):
                    chosen.append(c)
    return chosen


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40]


def write_case(folder: Path, c: Candidate, seed: int) -> dict:
    """One case folder and its record."""
    rng = _rng(seed, c.key())
    snippet = write_snippet(c.edit, c.language, rng)
    ext = PurePosixPath(c.path).suffix
    folder.mkdir(parents=True)
    for stem, text in (("original", c.edit.before), ("update", snippet.update), ("expected", c.edit.after)):
        (folder / f"{stem}{ext}").write_text(text, encoding="utf-8", newline="")
    if snippet.instruction:
        (folder / "instruction.txt").write_text(snippet.instruction + "\n", encoding="utf-8")
    record = {"case": folder.name, "half": folder.parent.name, "language": c.language, "style": snippet.style,
              "habits": list(snippet.habits), "project": c.project.name, "registry": c.project.registry, "license": c.project.license,
              "from_version": c.older, "to_version": c.newer, "path": c.path,
              "hunks": [[h.old_start + 1, h.old_end, len(h.added)] for h in c.edit.hunks],
              "urls": [r.url for r in c.project.releases if r.version in (c.older, c.newer)]}
    (folder / "source.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def build(projects: list[Project], out: Path, cache: Path, also: list[Path] = (), per_project: int = 8,
          seed: int = 0, log=print) -> list[dict]:
    """Write the corpus under out/tune and out/report (replacing an earlier build) and out/index.json."""
    staging = out.with_name(out.name + ".building")
    if staging.exists():
        shutil.rmtree(staging)
    records: list[dict] = []
    names: Counter = Counter()
    for project in sorted(projects, key=lambda p: p.name):
        try:
            candidates = project_candidates(project, cache, list(also))
        except (OSError, ValueError) as exc:  # a release gone from the registry, a bad archive
            log(f"corpus: skipping {project.name}: {exc}")
            continue
        chosen = choose(candidates, per_project, _rng(seed, project.name))
        for c in chosen:
            base = f"{c.language}_{_slug(project.name)}_{_slug(PurePosixPath(c.path).stem)}"
            names[base] += 1
            folder = staging / half_of(project.name) / f"{base}_{names[base]}"
            records.append(write_case(folder, c, seed))
        log(f"corpus: {project.name}: {len(chosen)} of {len(candidates)} edits")
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "index.json").write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    if out.exists():
        if not (out / "index.json").exists():
            raise ValueError(f"{out} exists and is not a corpus build; not replacing it")
        shutil.rmtree(out)
    staging.rename(out)
    return records


def summary(records: list[dict]) -> str:
    """Cases per half and language, and per style."""
    rows = Counter((r["half"], r["language"]) for r in records)
    projects = {(r["half"], r["language"]): set() for r in records}
    for r in records:
        projects[(r["half"], r["language"])].add(r["project"])
    lines = [f"{len(records)} cases from {len({r['project'] for r in records})} projects, "
             f"{len({r['language'] for r in records})} languages"]
    for language in sorted({r["language"] for r in records}):
        cells = [f"{half} {rows[(half, language)]:4d} ({len(projects.get((half, language), ()))} projects)"
                 for half in HALVES]
        lines.append(f"  {language:11s} " + "  ".join(cells))
    styles = Counter(r["style"] for r in records)
    lines.append("  styles: " + ", ".join(f"{s} {n}" for s, n in styles.most_common()))
    return "\n".join(lines)


def main_build(sources: Path, out: Path, cache: Path, also: list[Path], per_project: int, seed: int) -> int:
    from .releases import load_sources

    records = build(load_sources(sources), out, cache, also, per_project, seed,
                    log=lambda m: print(m, file=sys.stderr))
    print(summary(records))
    return 0
