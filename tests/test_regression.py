"""Canary of the model's own path: the fixtures the model once applied exactly must stay exact.

Each recorded case runs through the real default model with `--pipeline model` (the model's own output,
no merge or checks: what a prompt or drafting change could break) and must still be exact. Cases not
recorded as exact are skipped before the model runs: a wrong output changing is no regression, and on a
2-core CPU without AMX each case costs a minute. Outputs are recorded per model and dtype in
tests/regression/<model>-<dtype>.json (bfloat16 from a CPU with AMX, float32 from one without: `auto`
picks bf16 only with AMX), on one torch thread. Re-record after a deliberate change (a better prompt) with:
APPLY_EDIT_RECORD=1 .venv/bin/python -m pytest tests/test_regression.py  (then every case runs).
"""

import hashlib
import json
import os
from pathlib import Path

import pytest

from apply_edit.apply import Applier
from apply_edit.request import ApplyOptions
from apply_edit.cases import load_cases
from apply_edit.models.transformers_target import TransformersTarget, default_dtype
from conftest import FIXTURES

pytestmark = pytest.mark.model
RECORDS = Path(__file__).parent / "regression"
MODELS = ["qwen2.5-coder-0.5b"]  # smollm2-135m applies no case exactly: nothing to keep
CASES = load_cases(FIXTURES)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module", params=MODELS)
def model_run(request):
    name = request.param
    # Greedy outputs depend on the dtype (near-ties round differently): records are per model and dtype. In
    # fp32 they depend on torch's thread count too: recorded, and run, on one thread.
    patch = pytest.MonkeyPatch()
    patch.setenv("APPLY_EDIT_THREADS", "1")
    request.addfinalizer(patch.undo)
    dtype = str(default_dtype()).replace("torch.", "")
    path = RECORDS / f"{name}-{dtype}.json"
    recorded = json.loads(path.read_text()) if path.exists() else {}
    if not recorded and not os.environ.get("APPLY_EDIT_RECORD"):
        pytest.skip(f"no {dtype} record for {name} here (APPLY_EDIT_RECORD=1 records one)")
    applier = Applier(TransformersTarget.load(name))
    seen = {}
    yield name, applier, recorded, seen
    if os.environ.get("APPLY_EDIT_RECORD"):
        path.write_text(json.dumps(dict(sorted({**recorded, **seen}.items())), indent=1) + "\n")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_recorded_exact_case_stays_exact(model_run, case):
    name, applier, recorded, seen = model_run
    before = recorded.get(case.name)
    recording = bool(os.environ.get("APPLY_EDIT_RECORD"))
    if not recording and not (before and before["exact"]):
        pytest.skip(f"{case.name} is not recorded as exact for {name}")
    text = applier.stream(case.request(), ApplyOptions(pipeline="model")).result()
    exact = text == case.expected
    seen[case.name] = {"exact": exact, "output_sha256": sha(text)}
    if before and before["exact"]:
        assert exact, f"{case.name} was applied exactly by {name} and no longer is"
