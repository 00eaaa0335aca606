"""A load run over the gRPC face (`apply-edit bench --server HOST:PORT`): every case sent over parallel streams,
timed on the client, summed up as throughput and TTFT / total percentiles. `run_concurrently` also drives
the HTTP face's load run (`http_load.py`)."""

from __future__ import annotations

import statistics
import threading
import time

from ...judging.decide import ApplyRefused
from ...request.runs import ApplyOptions
from ..bench import Record
from ..cases import EditCase
from .client import RemoteError, RemoteRun


def run_concurrently(cases: list[EditCase], one, concurrency: int, repeat: int = 1) -> tuple[list[Record], float]:
    """`one(case) -> Record` for every case `repeat` times over `concurrency` threads; (records, wall s)."""
    work = [case for _ in range(repeat) for case in cases]
    records: list[Record] = []
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not work:
                    return
                case = work.pop(0)
            try:
                record = one(case)
            except Exception as exc:  # counted in the summary, never a request silently lost with its thread
                record = Record(case.name, "", 0.0, 0.0, 0, 0, "", False, error=f"{type(exc).__name__}: {exc}")
            with lock:
                records.append(record)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records, time.perf_counter() - start


def run_load(channel, cases: list[EditCase], options: ApplyOptions, concurrency: int,
             repeat: int = 1) -> tuple[list[Record], float]:
    """Send every case `repeat` times over `concurrency` parallel streams on `channel` (`client.connect`);
    client-side times per request."""

    def one(case: EditCase) -> Record:
        start = time.perf_counter()
        run = RemoteRun(channel, case.request(), options)
        text, error, refused = run.text, None, ""
        try:
            text = run.result()
        except ApplyRefused as exc:  # an answer: no sound result, nothing would be written
            refused = str(exc)
        except RemoteError as exc:
            error = str(exc)
        s = run.stats
        wall = s.total_s or time.perf_counter() - start  # a refusal or an error ends the run unfinished
        return Record(case.name, options.method, wall, s.ttft_s, s.decode.target_passes, s.decode.new_tokens, text,
                      text == case.expected and not (error or refused), stats=s.to_dict(), error=error,
                      path=s.path or ("refused" if refused else ""), refused=bool(refused), reason=refused)

    return run_concurrently(cases, one, concurrency, repeat)


def error_lines(records: list[Record]) -> list[str]:
    """One line per request that failed, naming its case: the end of both load runs' summaries."""
    return [f"error: {r.case}: {r.error}" for r in records if r.error]


def _percentile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def load_summary(records: list[Record], wall: float, concurrency: int) -> str:
    ok = [r for r in records if not r.error]
    errors = len(records) - len(ok)
    ttft = [r.ttft_s for r in ok]
    total = [r.wall_s for r in ok]
    tokens = sum(r.new_tokens for r in ok)
    lines = [f"{len(records)} requests, concurrency {concurrency}, {wall:.1f}s: {len(ok) / wall:.3f} req/s, "
             f"{tokens / wall:.1f} tokens/s, errors {errors}, the expected file {sum(r.exact for r in ok)}, "
             f"refused {sum(r.refused for r in ok)}"]
    if ok:
        lines.append(f"ttft  p50 {_percentile(ttft, 50):6.2f}s  p99 {_percentile(ttft, 99):6.2f}s")
        lines.append(f"total p50 {_percentile(total, 50):6.2f}s  p99 {_percentile(total, 99):6.2f}s")
    return "\n".join(lines + error_lines(records))
