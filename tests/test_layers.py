"""The package's layers: a module imports only from its own layer or below, so a request's data only
goes down (README, "How it works"). Read from the source, imports inside functions included."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "apply_edit"

# Bottom first: one folder per layer, so a module's folder names its layer.
LAYERS = ["files", "engine", "models", "drafting", "code", "merge", "judging", "request", "faces"]
# The fixed import paths of DESIGN.md's contracts, kept at the top: re-exports of the engine, nothing else.
PUBLIC = ["decoding", "proposers"]


def layer_of(module: str) -> int:
    first = module.split(".")[0]
    if first == "v1":  # the gRPC code generated from proto/, for the faces
        return LAYERS.index("faces")
    assert first in LAYERS, f"apply_edit.{module} is in no layer's folder: move it into one of {LAYERS}"
    return LAYERS.index(first)


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
        if module in ["__init__", *PUBLIC] or module.startswith("v1."):  # generated code
            continue
        mine = layer_of(module)
        upward += [f"{module} ({LAYERS[mine]}) imports {name} ({LAYERS[layer_of(name)]})"
                   for name in sorted(imports(path)) if layer_of(name) > mine]
    assert upward == []


def test_the_public_paths_only_re_export():
    for name in PUBLIC:
        body = ast.parse((PACKAGE / f"{name}.py").read_text()).body
        kinds = {type(node).__name__ for node in body[1:]}
        assert isinstance(body[0], ast.Expr) and kinds <= {"ImportFrom", "Assign"}, name
        exported = next(node for node in body if isinstance(node, ast.Assign)).value
        imported = {alias.name for node in body if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert {elt.value for elt in exported.elts} == imported, name


def test_the_contracts_entry_points_import_from_their_fixed_paths():
    from apply_edit.decoding import greedy_decode, speculative_greedy, speculative_sample
    from apply_edit.engine import decoding
    from apply_edit.models import FunctionModel
    from apply_edit.proposers import SuffixArrayProposer, draft_model_proposer

    assert greedy_decode is decoding.greedy_decode and speculative_sample is decoding.speculative_sample
    model = FunctionModel(lambda seq: [0.1, 0.2, 0.7])
    assert speculative_greedy(model, SuffixArrayProposer([2, 2]), [0], 4) == greedy_decode(model, [0], 4)
    assert callable(draft_model_proposer(model))
