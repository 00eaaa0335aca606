"""A load run over the OpenAI-compatible HTTP face (`apply-edit bench --server-http URL`): each case as
Morph's tagged chat message, streamed, timed on the client and compared with the server's own times, so
that what HTTP adds per request is measured."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from ..bench import Record
from ..cases import EditCase
from .load import error_lines, run_concurrently


def apply_message(case: EditCase) -> str:
    instruction = f"<instruction>{case.instruction}</instruction>\n" if case.instruction else ""
    return f"{instruction}<code>{case.original}</code>\n<update>{case.update}</update>"


def http_apply(base_url: str, case: EditCase, token: str | None = None, timeout: float = 3600) -> Record:
    """One streamed apply; the record's stats hold the server's `total_s` and the client's `http_s`."""
    body = {"model": "auto", "messages": [{"role": "user", "content": apply_message(case)}], "stream": True,
            "stream_options": {"include_usage": True}, "path": case.path.name}
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                     headers=headers)
    start = time.perf_counter()
    text, ttft, info, usage, error = "", 0.0, {}, {}, None
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for line in response:
                if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    error = event["error"]["message"]
                    break
                for choice in event.get("choices", []):
                    piece = choice["delta"].get("content") or ""
                    if piece and not text:
                        ttft = time.perf_counter() - start
                    text += piece
                info = event.get("apply_edit", info)
                usage = event.get("usage") or usage
    except urllib.error.HTTPError as exc:
        error = json.loads(exc.read()).get("error", {}).get("message", str(exc))
    wall = time.perf_counter() - start
    stats = {"server_total_s": info.get("total_s", 0.0), "http_s": wall - info.get("total_s", 0.0),
             "prompt_tokens": usage.get("prompt_tokens", 0)}
    return Record(case.name, "http", wall, ttft, info.get("target_passes", 0), usage.get("completion_tokens", 0),
                  text, text == case.expected and error is None, stats=stats, error=error,
                  path=info.get("path", ""))


def run_http_load(base_url: str, cases: list[EditCase], concurrency: int = 1, repeat: int = 1,
                  token: str | None = None) -> tuple[list[Record], float]:
    return run_concurrently(cases, lambda case: http_apply(base_url, case, token), concurrency, repeat)


def http_summary(records: list[Record]) -> str:
    ok = [r for r in records if not r.error]
    lines = [f"{len(records)} requests, {sum(r.exact for r in records)} exact, {len(records) - len(ok)} errors"]
    if ok:
        wall = sum(r.wall_s for r in ok)
        server = sum(r.stats["server_total_s"] for r in ok)
        lines.append(f"client wall {wall:.2f}s, server total {server:.2f}s: HTTP adds {wall - server:.3f}s "
                     f"({(wall - server) / wall:.2%} of wall), {(wall - server) / len(ok) * 1000:.1f} ms per request")
    return "\n".join(lines + error_lines(records))
