"""A corpus of real edits, made from consecutive releases of permissively licensed projects.

`sources.json` names each project's releases on the registries this project can reach (Debian's
archive, PyPI, npm) with their sha256. `build` downloads them (`releases`), finds the source files that
changed from one release to the next and cuts each file's diff into edits: a few nearby hunks applied to
the older file (`edits`). A seeded snippet writer turns each edit into the lazy snippet an agent would
write for it, in one of several styles (`snippets`). Cases are split by project into a tuning half and a
report half, and written as fixture folders (`original.<ext>`, `update.<ext>`, `expected.<ext>`,
optional `instruction.txt`) with a `source.json` saying where the edit came from. `report` gives a bench
run's figures per language and style; `readings` measures the target's evidence on the readings the merge
leaves open, per kind (what `arbiter.PRIOR` and `arbiter.WEIGHED` come from).
"""
