"""Canary of the model's own path: fixtures the model once applied exactly must stay exact.

Each sampled case runs through the real default model with `--pipeline model` (the model's own output, no
merge or checks: what a prompt or drafting change could break) and must still be exact. Greedy outputs
depend on the dtype (near-ties round differently), and in fp32 on torch's thread count too: outcomes are
recorded per model and dtype in tests/regression/<model>-<dtype>.json (bfloat16 from a CPU with AMX, float32
from one without: `auto` picks bf16 only with AMX), and recorded and run on one torch thread.

A whole-file rewrite costs up to a minute on a 2-core CPU without AMX, so every run checks a sample that fits
the test time: the smallest fixture of each language, the SAMPLE smallest of those (as many languages as the
time allows), each where the record holds it as exact (a wrong output changing is no regression).
Recording runs the sample whatever it held before, writes each outcome as it comes, and keeps what was
recorded for other cases. Re-record after a deliberate change (a better prompt) with:
APPLY_EDIT_RECORD=1 .venv/bin/python -m pytest tests/test_regression.py
"""

import hashlib
import json
import os
from pathlib import Path

import pytest

from apply_edit.request.apply import Applier
from apply_edit.faces.cases import EditCase, load_cases
from apply_edit.models.transformers_target import TransformersTarget, default_dtype
from apply_edit.request.runs import ApplyOptions
from conftest import FIXTURES

pytestmark = pytest.mark.model
RECORDS = Path(__file__).parent / "regression"
MODEL = "qwen2.5-coder-0.5b"  # smollm2-135m applies no case exactly: nothing to keep
SAMPLE = 8
RECORDING = bool(os.environ.get("APPLY_EDIT_RECORD"))
DTYPE = str(default_dtype()).replace("torch.", "")
RECORD = RECORDS / f"{MODEL}-{DTYPE}.json"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def size(case: EditCase) -> tuple[int, str]:
    """What the model reads and writes (ties broken by name, so the sample is the same on every machine)."""
    return len(case.original) + len(case.expected), case.name


def sample(cases: list[EditCase]) -> list[EditCase]:
    """The smallest case of each language, the SAMPLE smallest of those."""
    smallest = {}
    for case in sorted(cases, key=size):
        smallest.setdefault(case.language, case)
    return sorted(smallest.values(), key=size)[:SAMPLE]


RECORDED = json.loads(RECORD.read_text()) if RECORD.exists() else {}
CASES = [c for c in sample(load_cases(FIXTURES)) if RECORDING or RECORDED.get(c.name, {}).get("exact")]


def test_the_canary_has_a_record_for_this_machines_dtype():
    assert RECORDED or RECORDING, f"no {DTYPE} record for {MODEL} (APPLY_EDIT_RECORD=1 records one)"
    assert CASES


@pytest.fixture(scope="module")
def applier(request):
    patch = pytest.MonkeyPatch()
    patch.setenv("APPLY_EDIT_THREADS", "1")
    request.addfinalizer(patch.undo)
    return Applier(TransformersTarget.load(MODEL))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_recorded_exact_case_stays_exact(applier, case):
    text = applier.stream(case.request(), ApplyOptions(pipeline="model")).result()
    exact = text == case.expected
    if RECORDING:  # written as each case comes: a stopped recording keeps what it ran
        RECORDED[case.name] = {"exact": exact, "output_sha256": sha(text)}
        RECORD.write_text(json.dumps(dict(sorted(RECORDED.items())), indent=1) + "\n")
    else:
        assert exact, f"{case.name} was applied exactly by {MODEL} in {DTYPE} and no longer is"
