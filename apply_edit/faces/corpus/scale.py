"""The scale set: one edit the merge cannot place, in files of growing length, so a bench run shows what the
file's length costs where the model has to write (`apply-edit corpus scale --out DIR`).

Each case is the same JavaScript module at a given length: numbered functions of a few shapes around one
function whose edit moves three of its lines into a new function. The edited function sits in the file's
middle; only the functions around it grow in number.
"""

from __future__ import annotations

from pathlib import Path

LINES = (100, 1_000, 3_000, 10_000)

_SHAPES = (
    "function total{i}(items) {{\n  let sum = {i};\n  for (const item of items) {{\n"
    "    sum += item.price * item.count;\n  }}\n  return sum;\n}}\n\n",
    "function label{i}(user) {{\n  if (!user.name) {{\n    return 'user-{i}';\n  }}\n"
    "  return `${{user.name}} ({i})`;\n}}\n\n",
    "async function fetch{i}(client, id) {{\n  const response = await client.get(`/items/{i}/${{id}}`);\n"
    "  return response.ok ? response.body : null;\n}}\n\n",
    "const limits{i} = {{\n  retries: {r},\n  timeout: {t},\n  name: 'limits-{i}',\n}};\n\n",
)

_ROUTE = ("function route(request, queue) {\n  if (request.ok) {\n    const body = JSON.stringify(request.payload);\n"
          "    transport.send(request.id, body);\n    metrics.count('sent', body.length);\n"
          "  } else if (request.retry) {\n    queue.push(request);\n  }\n  return queue.length;\n}\n\n")
_ROUTE_EDITED = ("function deliver(request) {\n  const body = JSON.stringify(request.payload);\n"
                 "  transport.send(request.id, body);\n  metrics.count('sent', body.length);\n}\n\n"
                 "function route(request, queue) {\n  if (request.ok) {\n    deliver(request);\n"
                 "  } else if (request.retry) {\n    queue.push(request);\n  }\n  return queue.length;\n}\n\n")
# The sending lines move into a new function, which the snippet shows by a marker there: a merge in file
# order cannot fetch them (the checks refuse its answer), so the model writes the region.
UPDATE = ("// ... existing code ...\nfunction deliver(request) {\n  // ... the lines that send the request, moved "
          "here from route ...\n}\n\nfunction route(request, queue) {\n  if (request.ok) {\n    deliver(request);\n"
          "  } else if (request.retry) {\n// ... existing code ...\n")


def _filler(start: int, lines: int) -> str:
    """Numbered functions from `start` on, until they fill at least `lines` lines."""
    out, n, i = [], 0, start
    while n < lines:
        text = _SHAPES[i % len(_SHAPES)].format(i=i, r=i % 5 + 1, t=(i % 7 + 1) * 500)
        out.append(text)
        n += text.count("\n")
        i += 1
    return "".join(out)


def scale_case(lines: int) -> tuple[str, str, str]:
    """(original, update, expected) of the edit in a file of about `lines` lines."""
    head = "'use strict';\n\n"
    around = max(0, lines - _ROUTE.count("\n") - head.count("\n"))
    before, after = _filler(0, around // 2), _filler(10 ** 6, around - around // 2)
    return (f"{head}{before}{_ROUTE}{after}".rstrip("\n") + "\n", UPDATE,
            f"{head}{before}{_ROUTE_EDITED}{after}".rstrip("\n") + "\n")


def write_scale_set(out: Path, sizes: tuple[int, ...] = LINES) -> list[Path]:
    """Write one case folder per size under `out` (`scale_00100` ...); returns them."""
    folders = []
    for lines in sizes:
        original, update, expected = scale_case(lines)
        folder = out / f"scale_{lines:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in (("original", original), ("update", update), ("expected", expected)):
            (folder / f"{name}.js").write_text(text, encoding="utf-8")
        folders.append(folder)
    return folders
