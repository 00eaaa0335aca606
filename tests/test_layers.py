"""The package's layers: a module imports only from its own layer or below, so a request's data only
goes down (README, "How it works"). Read from the source, imports inside functions included."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "apply_edit"

# Bottom first. A module's layer is the first whose prefixes name it (a folder name covers the folder).
LAYERS = [
    ("files", ["files"]),
    ("engine", ["engine_api", "sampling", "decoding"]),
    ("models", ["models"]),
    ("drafting", ["proposers", "draft_length"]),
    ("code", ["languages", "regions", "definitions", "instruction"]),
    ("merge", ["merge"]),
    ("judging", ["checks", "decide", "failures", "prompting", "arbiter", "regions_to_rewrite"]),
    ("request", ["request", "drafting", "apply", "chat"]),
    ("faces", ["in_place", "cases", "bench", "cli", "service", "corpus", "v1", "__init__"]),
]


def layer_of(module: str) -> int:
    first = module.split(".")[0]
    found = [n for n, (_, names) in enumerate(LAYERS) if first in names]
    assert found, f"apply_edit.{module} is in no layer: add it to LAYERS"
    return found[0]


def imports(path: Path) -> set[str]:
    """The apply_edit modules `path` imports, as dotted names below the package."""
    here = path.relative_to(PACKAGE).with_suffix("").parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[:len(here) - node.level])
                parts = base + (node.module.split(".") if node.module else [])
                if not node.module:  # `from . import x`
                    found |= {".".join(parts + [alias.name]) for alias in node.names}
                    continue
            elif node.module and node.module.startswith("apply_edit."):
                parts = node.module.split(".")[1:]
            else:
                continue
            found.add(".".join(parts))
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".", 1)[1] for alias in node.names if alias.name.startswith("apply_edit.")}
    return {name for name in found if name}


def test_no_module_imports_from_a_layer_above_its_own():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        if "v1" in module.split("."):  # generated gRPC code
            continue
        mine = layer_of(module)
        upward += [f"{module} ({LAYERS[mine][0]}) imports {name} ({LAYERS[layer_of(name)][0]})"
                   for name in sorted(imports(path)) if layer_of(name) > mine]
    assert upward == []
