"""The one model behind every face of the server (gRPC, HTTP): a bounded queue in front of it, one request
on it at a time, its work on one thread, and the metrics of what it did.

A face turns its request into an `ApplyRequest` + `ApplyOptions` (or a chat request), then

    with service.admitted():                       # a place in the queue, or Busy / NotReady
        for piece in service.pieces(start, on_run, is_active, answer_now):
            ...                                    # (ClientGone if the client left while it waited)
    # the model, its KV cache and the queue place are released on every way out

and answers in its own protocol. `answer_now()` is a run that needs no model (a merge that passes the
checks), answered on the face's thread without waiting behind the model's work; every other request's
work, from its prompt to its last piece, runs on the model's thread while it holds the model.
`is_active` is the face's "is the client still there" (gRPC context, HTTP disconnect); a run is
cancelled through `run.cancel()`, which the face wires to its own signal.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterator

from ...request.apply import Applier
from ...request.runs import ApplyRequest, ApplyRun, ApplyStats
from .metrics import Metrics


class NotReady(Exception):
    """The model is still loading."""


class Busy(Exception):
    """The queue is full; `retry_after_ms` is a guess from the recent mean request time."""

    def __init__(self, message: str, retry_after_ms: int):
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class ClientGone(Exception):
    """The client went away while its request was waiting for the model; nothing to answer."""


class ModelService:
    """One model, used by one request at a time; up to `max_queue` more wait, the rest are turned away."""

    def __init__(self, model_name: str, metrics: Metrics, max_queue: int = 8):
        self.model_name = model_name
        self.metrics = metrics
        self.max_queue = max_queue
        self.applier: Applier | None = None  # set once the model is loaded
        self._model = threading.Lock()
        self._admit = threading.Lock()
        self.in_flight = 0  # running + waiting
        self._mean_s = 5.0  # running mean request time, for the retry hint
        # The model's work for every request runs on this one thread, the faces' workers only relay the pieces.
        # glibc keeps freed memory in per-thread arenas: run on whichever worker, each request's peak (KV cache,
        # prefill activations) stayed behind once per worker thread; measured, 12 requests on 12 threads of a
        # pool took the RSS from 1.0 to 1.6 GB, on one thread it stayed at 0.92-1.03 GB.
        self._model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="apply-edit-model")

    def idle(self) -> bool:
        """Nothing running or waiting, the model free."""
        return self.in_flight == 0 and not self._model.locked()

    def check_ready(self) -> None:
        if self.applier is None:
            raise NotReady("the model is still loading; retry shortly")

    @contextmanager
    def admitted(self):
        """A place among the running and queued requests, or Busy with a retry hint; NotReady while loading."""
        self.check_ready()
        with self._admit:
            if self.in_flight >= 1 + self.max_queue:
                wait_ms = int(self._mean_s * self.in_flight * 1000)
                raise Busy(f"server busy: {self.in_flight} requests running or queued; "
                           f"retry in about {wait_ms / 1000:.0f}s", wait_ms)
            self.in_flight += 1
        try:
            yield
        finally:
            with self._admit:
                self.in_flight -= 1

    @contextmanager
    def holding_model(self, is_active: Callable[[], bool]):
        """Waits for the model (ClientGone if the client leaves meanwhile) and holds it."""
        self.metrics.queue_depth.inc()
        try:
            while not self._model.acquire(timeout=0.05):
                if not is_active():
                    raise ClientGone()
        finally:
            self.metrics.queue_depth.dec()
        try:
            yield
        finally:
            self._model.release()

    def on_model(self, fn, *args):
        """fn(*args) on the model thread; its result, or its exception raised here."""
        return self._model_thread.submit(fn, *args).result()

    def pieces(self, start: Callable[[Applier], ApplyRun], on_run: Callable[[ApplyRun], None],
               is_active: Callable[[], bool], answer_now: Callable[[], ApplyRun | None] = lambda: None
               ) -> Iterator[str]:
        """Yields a run's pieces, after handing the run to `on_run` (to wire cancellation). `answer_now()`,
        called here: a run that needs no model (`apply.merge_answer`), answered at once. Otherwise the request
        waits for the model (`holding_model`); the run is started (`start(applier)`: the merge, its checks,
        the prompt) and each piece computed on the model thread, and closed there on every way out, which
        frees its KV cache."""
        run = answer_now()
        if run is not None:
            on_run(run)
            yield from run
            return
        with self.holding_model(is_active):
            run = self.on_model(start, self.applier)
            on_run(run)
            pieces = iter(run)
            try:
                while (piece := self.on_model(next, pieces, _END)) is not _END:
                    yield piece
            finally:
                self.on_model(_close, pieces, run)

    def warm(self, request: ApplyRequest, is_active: Callable[[], bool]) -> tuple[int, float]:
        """Read a file's prompt start into the prefix store (`Applier.warm`) as one more request in the queue:
        the tokens held of it, and the seconds it took on the model."""
        with self.admitted(), self.holding_model(is_active):
            start = time.perf_counter()
            held = self.on_model(self.applier.warm, request)
            return held, time.perf_counter() - start

    def observe(self, stats: ApplyStats, labels) -> None:
        m = self.metrics
        m.paths.labels(stats.path or "unjudged").inc()
        m.ttft.labels(*labels).observe(stats.ttft_s)
        m.ttlt.labels(*labels).observe(stats.total_s)
        m.tokens_per_pass.labels(*labels).observe(stats.decode.tokens_per_pass)
        if stats.decode.drafted_tokens:
            m.acceptance.labels(*labels).observe(stats.decode.acceptance_rate)
        self._mean_s = 0.8 * self._mean_s + 0.2 * stats.total_s


_END = object()


def _libc_malloc_trim():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


_MALLOC_TRIM = _libc_malloc_trim()


def _close(pieces, run) -> None:
    """End a request on the model thread, and hand the memory it freed back to the system (glibc keeps freed
    memory for reuse otherwise, so the RSS of an idle server would depend on which request came last)."""
    pieces.close()
    run.close()
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)  # ~10 ms
