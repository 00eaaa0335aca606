"""`apply-edit bench`: every method on every case, same model, dtype and prompt, in one run.

Speed is reported as ratios against plain greedy from the same run (this machine is shared and noisy;
absolute seconds move, ratios much less). When a method's output differs from plain greedy, the first
differing token is examined: is it a near-tie of the target's top two logits (batched verification and
one-token decoding round differently), or a real divergence?
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import torch

from ..request.apply import Applier
from ..request.runs import METHODS, ApplyError, ApplyOptions, ApplyRequest
from .cases import EditCase
from ..judging.decide import ApplyRefused, Judge
from ..judging.failures import KINDS, failure_kinds
from ..files.user_files import write_atomic
from ..merge import merge
from ..models.prefix_cache import PrefixCache
from ..drafting.proposers import SuffixArrayProposer

NEAR_TIE_LOGIT_GAP = 0.25  # ~ two bf16 steps at the logit magnitudes seen here
WARM_UP_LINES = 40  # of the smallest case, read once before any timed run


@dataclass
class Record:
    case: str
    method: str
    wall_s: float
    ttft_s: float
    target_passes: int
    new_tokens: int
    output: str
    exact: bool
    identical_to_plain: bool | None = None
    stats: dict = field(default_factory=dict)
    divergence: dict | None = None
    error: str | None = None  # load runs: the status a request ended with, if not OK
    candidate_is_output: bool | None = None  # merge drafting: the merge candidate was already the output
    path: str = ""  # which path produced the output (decide.PATHS); "" for unjudged methods
    refused: bool = False  # no sound result: nothing would be written (output holds the model's text)
    reason: str = ""  # the pipeline's reason for its path
    tokens: list = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        """The record as written: no token ids, and no output where it is exact (it is then the case's expected
        file; a run over every fixture would otherwise hold each file again)."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("stats", "tokens") and (k != "output" or not self.exact)}
        d.update({k: v for k, v in self.stats.items() if k not in d and k != "blocks"})
        return d

    @classmethod
    def from_json(cls, d: dict, expected: str) -> Record:
        """Inverse of to_json (without the token ids): `expected` is the case's expected file."""
        names = {f.name for f in fields(cls)} - {"stats", "tokens"}
        return cls(**{"output": expected} | {k: v for k, v in d.items() if k in names},
                   stats={k: v for k, v in d.items() if k not in names})


_FIXED_K = re.compile(r"spec-k(\d+)")
_TYPICAL = re.compile(r"spec-typical-(0?\.\d+|1(?:\.0*)?)")


def bench_method_options(method: str, options: ApplyOptions) -> ApplyOptions:
    """A bench method name → apply options. Beyond the apply methods (spec = merge drafting with k per
    region): `spec-kN` (copy drafting from original and snippet, fixed k of N), `spec-adaptive` (copy
    drafting, one adaptive k for the file), `spec-typical-T` (spec with typical acceptance at threshold T:
    not exact), `spec-model` (spec's drafting, the model's own output unjudged: equal to plain greedy) and
    `oracle` (adaptive k drafting the target's own output: the ceiling for any proposer). `merge` runs no
    model: the merge's own text (see `merge_record`)."""
    if match := _FIXED_K.fullmatch(method):
        return replace(options, method="spec-fixed", k=int(match.group(1)), drafting="copy")
    if method == "spec-adaptive":
        return replace(options, method="spec", drafting="copy")
    if match := _TYPICAL.fullmatch(method):
        return replace(options, method="spec", acceptance="typical", typical_threshold=float(match.group(1)))
    if method in ("oracle", "spec-model", *PREFIX_METHODS):
        return replace(options, method="spec", pipeline="model")
    return replace(options, method=method)


# `spec-model` on a target that keeps prompt prefixes, after what fills the store: the same apply once before
# (`spec-again`: an agent's retry), a warm-up of the file (`spec-warm`: the editor read it ahead), or whatever
# the run's earlier cases left in one store kept across the run (`spec-session`: a file's edits in turn, or
# alternative snippets for one file, as the fixtures' `*_session_*_N_*` and `*_alt_*` cases are, run in name
# order; a resumed run starts that store empty). Only the apply itself is timed; its output must equal
# `spec-model`'s (the store is exact).
PREFIX_METHODS = ("spec-again", "spec-warm", "spec-session")
PREFIX_STORE_BYTES = 1 << 30


# llama.cpp's own server on the same model's GGUF (its Q4_K_M weights) and the same prompt text: plain, its
# n-gram speculation at the best setting measured on 12-01 (ngram-simple, n 3, m 64), and ngram-mod at its
# defaults (`--spec-default`). Optional: `models/llama_server.py` says how it is built.
LLAMA_METHODS = {"llama-plain": None, "llama-ngram": ("ngram-simple", 3, 64), "llama-ngram-mod": ("ngram-mod",)}


def is_bench_method(method: str) -> bool:
    return (method in METHODS or method in ("oracle", "spec-adaptive", "spec-model", "merge", *PREFIX_METHODS,
                                            *LLAMA_METHODS)
            or _FIXED_K.fullmatch(method) is not None or _TYPICAL.fullmatch(method) is not None)


def merge_record(case: EditCase) -> Record:
    """The merge alone, no model: its text as the output, and whether it passes the checks with a sure
    place for its edit (path `sound`: the default's answer whatever the model writes; `unsound`: the
    default runs the model to the end and hands back its output only if that passes the checks, or, where
    nothing places the edit, refuses)."""
    t0 = time.perf_counter()
    judge = Judge(case.original, case.update, case.language, merge(case.original, case.update, case.language, case.instruction),
                  case.instruction)
    text = judge.candidate.text
    return Record(case.name, "merge", time.perf_counter() - t0, 0.0, 0, 0, text, text == case.expected,
                  candidate_is_output=True, path="sound" if judge.merge_sound and not judge.unplaced else "unsound",
                  reason="; ".join(judge.merge_problems) or judge.unplaced,
                  stats={"confident": judge.candidate.report.confident})


def run_case(applier: Applier | None, case: EditCase, method: str, options: ApplyOptions,
             reference: list[int] | None = None, session: PrefixCache | None = None) -> Record:
    """One method on one case; `session`: the prefix store `spec-session` keeps across the run."""
    if method == "merge":
        return merge_record(case)
    opts = bench_method_options(method, options)
    proposer = None
    if method == "oracle":
        if reference is None:
            raise ValueError("the oracle needs the target's output first: list plain or a spec method before it")
        # Copying from the target's own output: exactly that output while aligned, and it realigns if
        # this run departs from the reference at a near-tie.
        proposer = SuffixArrayProposer([reference])
    if method == "spec-session":
        with _prefix_store(applier, session):
            return _record(applier.stream(case.request(), opts), case, method)
    if method in PREFIX_METHODS:
        return _after_filling_the_prefix_store(applier, case, method, opts)
    if method in LLAMA_METHODS:
        # Plain: the same prompt (it shows the merge), without building a drafting plan llama.cpp does not read.
        return _llama_record(applier, case, method, replace(options, method="plain", pipeline="model"))
    start = time.perf_counter()
    try:
        run = applier.stream(case.request(), opts, proposer=proposer)
    except ApplyError as exc:  # the model cannot take it (too long for its context): refused, and why
        return Record(case.name, method, time.perf_counter() - start, 0.0, 0, 0, "", False, path="refused",
                      refused=True, reason=str(exc))
    return _record(run, case, method)


def new_prefix_store() -> PrefixCache:
    return PrefixCache(PREFIX_STORE_BYTES)


@contextmanager
def _prefix_store(applier: Applier, store: PrefixCache | None):
    """The target reads and fills `store` inside the block; the other methods run without one."""
    if store is None:
        raise ValueError("spec-session needs the run's prefix store")
    applier.target.prefix_cache = store
    try:
        yield
    finally:
        applier.target.prefix_cache = None


def _after_filling_the_prefix_store(applier: Applier, case: EditCase, method: str, opts: ApplyOptions) -> Record:
    with _prefix_store(applier, new_prefix_store()):
        t0 = time.perf_counter()
        if method == "spec-again":
            applier.stream(case.request(), opts).result()
        else:
            applier.warm(case.request(), opts)
        before_s = time.perf_counter() - t0
        record = _record(applier.stream(case.request(), opts), case, method)
    record.stats["before_s"] = before_s  # the untimed apply or warm-up before it
    return record


def _llama_record(applier: Applier, case: EditCase, method: str, opts: ApplyOptions) -> Record:
    """llama-server on a fresh process per case (ngram-mod keeps its n-grams across requests), fed our
    prompt text; its time is the completion's alone (the server's start is not counted)."""
    from ..models.llama_server import LlamaServer, Speculation, model_gguf

    plan = applier.plan(case.request(), opts)
    spec = LLAMA_METHODS[method]
    with LlamaServer(model_gguf(log=lambda *_: None), ctx=len(plan.prompt_ids) + plan.max_new + 64,
                     spec=Speculation(*spec) if spec else None) as server:
        done = server.complete(plan.prompt.text, plan.max_new, stop=[plan.stop_marker])
    extractor = plan.output_extractor()
    text = extractor.push(done.text + (plan.stop_marker if done.stop_type == "word" else "")) + extractor.finish()
    drafted, accepted = done.draft_n or 0, done.draft_accepted or 0
    stats = {"prompt_tokens": done.prompt_tokens, "prefill_s": done.prompt_ms / 1000,
             "decode_s": done.predicted_ms / 1000, "drafted_tokens": drafted, "accepted_tokens": accepted,
             "acceptance_rate": accepted / drafted if drafted else 0.0}
    return Record(case.name, method, done.wall_s, done.ttft_s, 0, done.new_tokens, text, text == case.expected,
                  stats=stats)


def _record(run, case: EditCase, method: str) -> Record:
    try:
        text, refused = run.result(), False
    except ApplyRefused:
        text, refused = run.text, True
    s = run.stats
    outcome = run.outcome
    return Record(case.name, method, s.total_s, s.ttft_s, s.decode.target_passes, s.decode.new_tokens, text,
                  not refused and text == case.expected, stats=s.to_dict(), tokens=list(run.tokens),
                  candidate_is_output=None if run.candidate is None else run.candidate == text,
                  path=outcome.path if outcome else "", refused=refused, reason=outcome.reason if outcome else "")


def divergence(applier: Applier, case: EditCase, options: ApplyOptions, plain: list[int], other: list[int]) -> dict:
    """Where `other` first departs from plain greedy, and the target's top-2 logit gap there."""
    i = next((j for j, (a, b) in enumerate(zip(plain, other)) if a != b), min(len(plain), len(other)))
    if i >= min(len(plain), len(other)):
        return {"token_index": i, "kind": "length"}
    prompt = applier.plan(case.request(), options).prompt_ids
    top = torch.topk(applier.next_token_logits(prompt + plain[:i]), 2)
    top_ids = top.indices.tolist()
    gap = float(top.values[0] - top.values[1])
    near_tie = {plain[i], other[i]} == set(top_ids) and gap <= NEAR_TIE_LOGIT_GAP
    return {"token_index": i, "plain_token": plain[i], "other_token": other[i], "top2": top_ids,
            "top2_logit_gap": gap, "kind": "near-tie" if near_tie else "divergence"}


def oracle_reference(by_method: dict[str, Record]) -> list[int] | None:
    """The output the oracle copies: the model's own speculative output (`spec-model`, or `spec` where its
    pipeline let the model write to the end), else the first target-decoded method's (prompt lookup decodes
    through generate, without token ids). Not plain greedy's by preference: in bf16 a verify pass can
    resolve a near-tie otherwise than a single-token pass, and a plain output that departs early (or even
    stops early) would leave the oracle nothing to copy; spec's passes are shaped like the oracle's."""
    spec = by_method.get("spec")
    whole_spec = spec if spec is not None and spec.path != "merge" else None  # "merge": stopped at a departure
    chosen = (by_method.get("spec-model") or whole_spec
              or next((r for r in by_method.values() if r.method not in ("prompt-lookup", "spec", *LLAMA_METHODS)), None))
    return None if chosen is None else chosen.tokens


def run_bench(applier: Applier | None, cases: list[EditCase], methods: list[str], options: ApplyOptions, log=print,
              on_case=None) -> list[Record]:
    """Every method on every case; `on_case(records)` is called as each case completes (to save progress).
    `applier` may be None when every method runs without a model (`merge`)."""
    if not cases:
        return []
    if applier is not None:
        # Warm-up: the first forward passes of a fresh process are slow (allocation, kernel selection). On the
        # smallest case's first lines: its prefill is all the warm-up costs, and where every case is a long
        # file (a 2,000-line file's prefill takes minutes in fp32), the whole of one would outlast the runs.
        smallest = min(cases, key=lambda c: len(c.original) + len(c.update)).request()
        head = ApplyRequest("".join(smallest.original.splitlines(True)[:WARM_UP_LINES]),
                            "".join(smallest.update.splitlines(True)[:WARM_UP_LINES]), language=smallest.language_resolved)
        applier.stream(head, replace(options, method="plain", max_new_tokens=4)).result()
        applier.cost_curve()  # measured once per model and dtype, before any timed run
    records = []
    session = new_prefix_store() if "spec-session" in methods else None
    for case in cases:
        by_method = {}
        for method in methods:
            rec = run_case(applier, case, method, options, oracle_reference(by_method), session)
            by_method[method] = rec
            records.append(rec)
        plain = by_method.get("plain")
        if plain is not None:
            for rec in by_method.values():
                rec.identical_to_plain = rec.output == plain.output
                # A merge answer has no model tokens: there is no decoding to compare it with.
                if rec is not plain and not rec.identical_to_plain and rec.tokens:
                    rec.divergence = divergence(applier, case, options, plain.tokens, rec.tokens)
        for rec in by_method.values():
            log(format_row(rec))
        if on_case is not None:
            on_case(list(by_method.values()))
    return records


HEADER = (f"{'case':34} {'method':14} {'wall s':>7} {'ttft s':>7} {'passes':>6} {'tok/pass':>8} {'acc %':>6} "
          f"{'=plain':>6} {'exact':>5} path")


def format_row(r: Record) -> str:
    same = "-" if r.identical_to_plain is None else ("yes" if r.identical_to_plain else "NO")
    acc = f"{r.stats['acceptance_rate'] * 100:6.1f}" if r.stats.get("drafted_tokens") else "     -"
    return (f"{r.case:34} {r.method:14} {r.wall_s:7.2f} {r.ttft_s:7.2f} {r.target_passes:6d} "
            f"{r.stats.get('tokens_per_pass', 0):8.2f} {acc} {same:>6} {'yes' if r.exact else 'no':>5} {r.path}")


@dataclass
class Totals:
    """One method's sums over the cases of a run."""
    wall: float
    decode: float
    tokens: int
    passes: int
    overhead: float  # seconds spent building the drafting plan and proposing

    @classmethod
    def of(cls, records: list[Record], method: str) -> Totals:
        rs = [r for r in records if r.method == method]
        return cls(sum(r.wall_s for r in rs), sum(r.stats.get("decode_s", 0.0) for r in rs),
                   sum(r.new_tokens for r in rs), sum(r.target_passes for r in rs),
                   sum(r.stats.get("propose_s", 0.0) + r.stats.get("plan_s", 0.0) for r in rs))

    @property
    def tokens_per_pass(self) -> float:
        return self.tokens / self.passes if self.passes else 0.0  # 0: no passes counted (a merge, llama.cpp)


def summary(records: list[Record], methods: list[str]) -> str:
    """Totals per method over all cases, with speed as ratios to plain greedy from the same run."""
    lines = ["", f"{'method':14} {'wall s':>8} {'decode s':>8} {'mean ttft':>9} {'tok/pass':>8} {'wasted':>7} "
                 f"{'overhead':>8} {'vs plain':>8} {'decode vs plain':>15} {'=plain':>12} {'exact':>6} {'merge=out':>9}"]
    plain = Totals.of(records, "plain") if "plain" in methods else None
    for m in methods:
        rs = [r for r in records if r.method == m]
        t = Totals.of(records, m)
        ttft = sum(r.ttft_s for r in rs) / max(len(rs), 1)
        ratio = f"{plain.wall / t.wall:7.2f}x" if plain and t.wall else "-"
        decode_ratio = f"{plain.decode / t.decode:14.2f}x" if plain and t.decode else "-"
        compared = [r for r in rs if r.identical_to_plain is not None]
        ties = sum(1 for r in rs if r.divergence and r.divergence.get("kind") == "near-tie")
        same = f"{sum(r.identical_to_plain for r in compared)}/{len(compared)}" if compared else "-"
        same += f" ({ties} tie)" if ties else ""
        exact = f"{sum(r.exact for r in rs)}/{len(rs)}"
        # Drafted tokens the target rejected: each still cost verify time.
        wasted = sum(r.stats.get("drafted_tokens", 0) - r.stats.get("accepted_tokens", 0) for r in rs)
        merged = [r.candidate_is_output for r in rs if r.candidate_is_output is not None]
        merge_out = f"{sum(merged)}/{len(merged)}" if merged else "-"
        lines.append(f"{m:14} {t.wall:8.2f} {t.decode:8.2f} {ttft:9.2f} {t.tokens_per_pass:8.2f} {wasted:7d} "
                     f"{t.overhead / max(t.wall, 1e-9) * 100:7.2f}% {ratio:>8} {decode_ratio:>15} {same:>12} "
                     f"{exact:>6} {merge_out:>9}")
    return "\n".join(lines)


def failure_summary(records: list[Record], cases: list[EditCase], methods: list[str]) -> str:
    """Per method: exact outputs (all cases, and each half: even and odd positions by name), refusals, wrong
    files written as a success, the failure kinds of the wrong ones (a case can show several), and per path
    of the pipeline how many of its outputs were exact."""
    by_name = {c.name: c for c in cases}
    half = {c.name: n % 2 for n, c in enumerate(sorted(cases, key=lambda c: c.name))}
    lines = ["", f"{'method':14} {'exact':>7} {'even':>7} {'odd':>7} {'refused':>7} {'wrong':>5}  " + "  ".join(KINDS)]
    paths = []
    for m in methods:
        rs = [r for r in records if r.method == m and r.case in by_name]
        wrong = [r for r in rs if not r.exact and not r.refused]
        counts = Counter(kind for r in wrong
                         for kind in failure_kinds(by_name[r.case].original, by_name[r.case].expected, r.output))
        halves = [f"{sum(r.exact for r in rs if half[r.case] == h)}/{sum(half[r.case] == h for r in rs)}" for h in (0, 1)]
        lines.append(f"{m:14} {sum(r.exact for r in rs):>3}/{len(rs):<3} {halves[0]:>7} {halves[1]:>7} "
                     f"{sum(r.refused for r in rs):>7} {len(wrong):>5}  " + "  ".join(f"{counts[k]:>{len(k)}}" for k in KINDS))
        by_path = Counter(r.path for r in rs if r.path)
        paths += [f"{m:14} {p:15} {sum(r.exact for r in rs if r.path == p):>3}/{n} exact" for p, n in sorted(by_path.items())]
    return "\n".join(lines + ([""] + paths if paths else []))


def headline(records: list[Record], methods: list[str], method: str = "spec") -> str:
    """`method` against each baseline that ran beside it: plain greedy, prompt lookup, the best fixed draft
    length, the oracle drafter's tokens per pass, and its own proposer + planning share of wall time."""
    if method not in methods:
        return ""
    totals = {m: Totals.of(records, m) for m in methods}
    t = totals[method]
    lines = [""]
    for base in ("plain", "prompt-lookup"):
        if base in methods:
            b = totals[base]
            lines.append(f"{method} vs {base}: {b.wall / max(t.wall, 1e-9):.2f}x end to end, "
                         f"{b.decode / max(t.decode, 1e-9):.2f}x decode")
    fixed = [m for m in methods if _FIXED_K.fullmatch(m)]
    if fixed:
        best = min(fixed, key=lambda m: totals[m].wall)
        lines.append(f"{method} vs the best fixed k ({best}): {totals[best].wall / max(t.wall, 1e-9):.2f}x end to end")
    if "oracle" in methods:
        o = totals["oracle"]
        lines.append(f"{method} tokens/pass: {t.tokens_per_pass:.2f} = {t.tokens_per_pass / max(o.tokens_per_pass, 1e-9):.0%}"
                     f" of the oracle drafter's {o.tokens_per_pass:.2f}")
    lines.append(f"{method} proposer + planning: {t.overhead / max(t.wall, 1e-9):.2%} of wall time")
    return "\n".join(lines)


def prefix_store_summary(records: list[Record], methods: list[str]) -> str:
    """Each prefix-store method's TTFT against `spec-model`'s cold one on the same cases (for `spec-session`,
    the cases that found something stored: a file's later edits), and whether the outputs stayed equal."""
    cold = {r.case: r for r in records if r.method == "spec-model"} if "spec-model" in methods else {}
    lines = []
    for m in (m for m in PREFIX_METHODS if m in methods and cold):
        pairs = [(r, cold[r.case]) for r in records if r.method == m and r.case in cold]
        if m == "spec-session":
            pairs = [(r, c) for r, c in pairs if r.stats.get("prompt_cached")]
        if not pairs:
            lines.append(f"{m}: no case started from a stored prefix")
            continue
        warm, base = sum(r.ttft_s for r, _ in pairs), sum(c.ttft_s for _, c in pairs)
        shares = sorted(r.ttft_s / max(c.ttft_s, 1e-9) for r, c in pairs)
        reused = sum(r.stats.get("prompt_cached", 0) for r, _ in pairs)
        prompt = sum(r.stats.get("prompt_tokens", 0) for r, _ in pairs)
        lines.append(f"{m}: TTFT {warm:.1f} s against spec-model's {base:.1f} s ({warm / max(base, 1e-9):.0%}) on "
                     f"{len(pairs)} cases, per case {shares[0]:.0%} to {shares[-1]:.0%} (median "
                     f"{shares[len(shares) // 2]:.0%}); {reused} of {prompt} prompt tokens from the store; outputs "
                     f"equal to spec-model's {sum(r.output == c.output for r, c in pairs)}/{len(pairs)}")
    return "\n".join([""] + lines) if lines else ""


def write_json(records: list[Record], path: str | Path) -> None:
    """The records as JSON; an output equal to plain greedy's (identical_to_plain) is written once, in plain's
    record (a run of several methods over the fixtures would otherwise hold each wrong output per method)."""
    rows = [r.to_json() for r in records]
    for row in rows:
        if row.get("identical_to_plain") and row["method"] != "plain":
            row.pop("output", None)
    write_atomic(Path(path), json.dumps(rows, indent=1) + "\n")


def completed_records(path: str | Path, methods: list[str], cases: list[EditCase]) -> list[Record]:
    """The records of a previous run's JSON for those of `cases` it completed with every one of `methods`: a
    long bench can be stopped and resumed without redoing them (each case's methods still run side by side)."""
    expected = {c.name: c.expected for c in cases}
    rows = [d for d in json.loads(Path(path).read_text()) if d["case"] in expected]
    # An output left out is the case's expected file, or plain's output where it is identical to that.
    plain = {d["case"]: d["output"] for d in rows if d["method"] == "plain" and "output" in d}
    records = [Record.from_json(d, plain.get(d["case"], expected[d["case"]]) if d.get("identical_to_plain")
                                else expected[d["case"]]) for d in rows]
    by_case: dict[str, dict[str, Record]] = {}
    for r in records:
        by_case.setdefault(r.case, {})[r.method] = r
    return [runs[m] for runs in by_case.values() if all(m in runs for m in methods) for m in methods]


def write_chart(records: list[Record], methods: list[str], path: str | Path) -> None:
    """A PNG bar chart: end-to-end speedup over plain greedy per case, one bar per method."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("the chart needs matplotlib: pip install 'apply-edit[chart]'") from exc
    plain = {r.case: r.wall_s for r in records if r.method == "plain"}
    if not plain:
        raise RuntimeError("the chart shows speedup over plain greedy: include plain in --methods")
    cases = list(plain)
    shown = [m for m in methods if m != "plain"]
    width = 0.8 / max(len(shown), 1)
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(cases) * max(len(shown), 1) ** 0.5), 5))
    for i, m in enumerate(shown):
        by_case = {r.case: r.wall_s for r in records if r.method == m}
        ax.bar([c + i * width for c in range(len(cases))], [plain[c] / by_case[c] if by_case.get(c) else 0 for c in cases],
               width, label=m)
    ax.set_xticks([c + width * (len(shown) - 1) / 2 for c in range(len(cases))], cases, rotation=75, ha="right",
                  fontsize=7)
    ax.set_ylabel("speedup over plain greedy (end to end)")
    ax.axhline(1.0, color="grey", linewidth=0.5)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
