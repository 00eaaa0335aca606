"""The service core's rules of who runs where, without a model: a merge answer is given on the caller's
thread at once; everything a model run does, from starting it to closing it, happens on the model's thread."""

import threading

from apply_edit.request.runs import ApplyOptions, merge_answer
from apply_edit.faces.cases import load_case
from apply_edit.faces.service.core import ModelService
from apply_edit.faces.service.metrics import Metrics
from conftest import FIXTURES

CASE = load_case(FIXTURES / "py_edit_loop_body")


class _Run:
    """A stand-in run (unit test only): two pieces, and where each step ran."""

    needs_model = True

    def __init__(self, seen: list):
        self.seen = seen

    def __iter__(self):
        for piece in ("a", "b"):
            self.seen.append(("piece", threading.current_thread().name))
            yield piece

    def close(self):
        self.seen.append(("close", threading.current_thread().name))


class _Applier:
    def __init__(self):
        self.seen = []

    def stream(self, request, options):
        self.seen.append(("start", threading.current_thread().name))
        return _Run(self.seen)


def _service() -> ModelService:
    service = ModelService("stand-in", Metrics())
    service.applier = _Applier()
    return service


def test_a_model_run_starts_streams_and_closes_on_the_model_thread():
    service = _service()
    runs = []
    pieces = service.pieces(lambda applier: applier.stream(CASE.request(), ApplyOptions()), runs.append, lambda: True)
    assert "".join(pieces) == "ab" and len(runs) == 1
    assert {step for step, _ in service.applier.seen} == {"start", "piece", "close"}
    assert all(thread.startswith("apply-edit-model") for _, thread in service.applier.seen)
    assert service.idle()


def test_a_merge_answer_is_given_here_without_the_model():
    service = _service()
    runs = []
    with service._model:  # another request holds the model
        pieces = service.pieces(lambda applier: applier.stream(CASE.request(), ApplyOptions()), runs.append,
                                lambda: True, lambda: merge_answer(CASE.request(), ApplyOptions()))
        assert "".join(pieces) == CASE.expected
    assert runs[0].stats.path == "merge" and service.applier.seen == []
