from dataclasses import replace

import pytest

from apply_edit.faces.bench import (Record, bench_method_options, completed_records, failure_summary, headline,
                              oracle_reference, prefix_store_summary, run_bench, write_json)
from apply_edit.faces.cases import load_cases
from conftest import FIXTURES


def record(method, tokens):
    return Record("case", method, 1.0, 0.1, len(tokens), len(tokens), "", False, tokens=tokens)


def test_oracle_copies_spec_output_even_when_plain_departs_or_stops_early():
    runs = {"plain": record("plain", [1, 2]), "prompt-lookup": record("prompt-lookup", []),
            "spec": record("spec", [1, 3, 4, 5])}
    assert oracle_reference(runs) == [1, 3, 4, 5]
    runs["spec-model"] = record("spec-model", [1, 3, 4, 6])
    assert oracle_reference(runs) == [1, 3, 4, 6]


def test_oracle_does_not_copy_a_spec_run_stopped_where_the_model_left_the_merge():
    stopped = record("spec", [1, 3])
    stopped.path = "merge"
    assert oracle_reference({"plain": record("plain", [1, 2, 3]), "spec": stopped}) == [1, 2, 3]


def test_oracle_falls_back_to_the_first_target_decoded_output():
    runs = {"prompt-lookup": record("prompt-lookup", []), "plain": record("plain", [1, 2]),
            "spec-k8": record("spec-k8", [1, 2, 3])}
    assert oracle_reference(runs) == [1, 2]
    assert oracle_reference({"prompt-lookup": record("prompt-lookup", [])}) is None


def test_records_write_no_exact_output_and_a_resume_restores_it_from_the_case(tmp_path):
    cases = load_cases(FIXTURES, ["go_add_struct_method", "java_add_method"])
    exact = Record(cases[0].name, "merge", 0.1, 0.1, 0, 0, cases[0].expected, True)
    wrong = Record(cases[1].name, "merge", 0.1, 0.1, 0, 0, "not the file\n", False)
    write_json([exact, wrong], tmp_path / "run.json")
    written = (tmp_path / "run.json").read_text()
    assert cases[0].expected not in written and "not the file" in written
    assert completed_records(tmp_path / "run.json", ["merge"], cases) == [exact, wrong]
    # A case not asked for is not resumed (its expected file is not at hand).
    assert completed_records(tmp_path / "run.json", ["merge"], cases[1:]) == [wrong]


def test_records_write_an_output_identical_to_plain_once_and_a_resume_restores_it(tmp_path):
    cases = load_cases(FIXTURES, ["go_add_struct_method"])
    plain = Record(cases[0].name, "plain", 0.1, 0.1, 9, 9, "a wrong file\n", False, identical_to_plain=True)
    spec = Record(cases[0].name, "spec", 0.1, 0.1, 3, 9, "a wrong file\n", False, identical_to_plain=True)
    merge = Record(cases[0].name, "merge", 0.1, 0.1, 0, 0, cases[0].expected, True, identical_to_plain=False)
    write_json([plain, spec, merge], tmp_path / "run.json")
    assert (tmp_path / "run.json").read_text().count("a wrong file") == 1
    assert completed_records(tmp_path / "run.json", ["plain", "spec", "merge"], cases) == [plain, spec, merge]


def timed(case, method, wall, decode, tokens, passes, overhead=0.0):
    return Record(case, method, wall, 0.1, passes, tokens, "", True,
                  stats={"decode_s": decode, "propose_s": overhead, "plan_s": 0.0})


def test_headline_compares_spec_with_each_baseline_over_all_cases():
    records = []
    for case in ("a", "b"):
        records += [timed(case, "plain", 50.0, 45.0, 100, 100), timed(case, "prompt-lookup", 20.0, 15.0, 100, 40),
                    timed(case, "spec-k32", 6.0, 2.0, 100, 5), timed(case, "spec-k64", 5.5, 1.5, 100, 4),
                    timed(case, "spec", 5.0, 1.0, 100, 4, overhead=0.05), timed(case, "oracle", 4.5, 0.8, 100, 2)]
    methods = ["plain", "prompt-lookup", "spec-k32", "spec-k64", "spec", "oracle"]
    lines = headline(records, methods).splitlines()
    assert "spec vs plain: 10.00x end to end, 45.00x decode" in lines
    assert "spec vs prompt-lookup: 4.00x end to end, 15.00x decode" in lines
    assert "spec vs the best fixed k (spec-k64): 1.10x end to end" in lines
    assert "spec tokens/pass: 25.00 = 50% of the oracle drafter's 50.00" in lines
    assert "spec proposer + planning: 1.00% of wall time" in lines
    assert headline(records, ["plain", "spec-k32"]) == ""


def test_failure_summary_counts_exact_outputs_and_failure_kinds_per_method():
    case = load_cases(FIXTURES, ["py_add_method"])[0]
    other = load_cases(FIXTURES, ["py_append_at_end"])[0]
    records = [Record(case.name, "spec", 1.0, 0.1, 1, 1, case.expected, True, path="merge"),
               Record(case.name, "plain", 1.0, 0.1, 1, 1, case.original, False),
               Record(other.name, "spec", 1.0, 0.1, 1, 1, other.original, False, path="refused", refused=True),
               Record(other.name, "plain", 1.0, 0.1, 1, 1, other.expected, True)]
    lines = failure_summary(records, [case, other], ["plain", "spec"]).splitlines()
    assert lines[1].split() == ["method", "exact", "even", "odd", "refused", "wrong", "edit", "not", "applied",
                                "truncated", "markers", "copied", "code", "dropped", "reformatted", "other"]
    # py_add_method sorts first (even half), py_append_at_end second (odd); a refusal is not a wrong file
    assert lines[2].split() == ["plain", "1/2", "0/1", "1/1", "0", "1", "1", "0", "0", "0", "0", "0"]
    assert lines[3].split() == ["spec", "1/2", "1/1", "0/1", "1", "0", "0", "0", "0", "0", "0", "0"]
    assert lines[5].split() == ["spec", "merge", "1/1", "exact"]
    assert lines[6].split() == ["spec", "refused", "0/1", "exact"]


def test_prefix_store_summary_sets_each_method_against_the_cold_apply():
    def rec(case, method, ttft, cached, output="x"):
        return Record(case, method, ttft + 1.0, ttft, 1, 1, output, True,
                      stats={"prompt_cached": cached, "prompt_tokens": 1000})

    records = [rec("a_1", "spec-model", 10.0, 0), rec("a_1", "spec-session", 10.0, 0),
               rec("a_2", "spec-model", 10.0, 0), rec("a_2", "spec-session", 2.0, 512),
               rec("a_3", "spec-model", 20.0, 0), rec("a_3", "spec-session", 8.0, 512, output="y"),
               rec("a_3", "spec-again", 1.0, 1000)]
    lines = prefix_store_summary(records, ["spec-model", "spec-session", "spec-again"]).splitlines()
    # spec-session counts only the cases that found something stored: a_1 was the file's first edit
    assert lines[1:] == ["spec-again: TTFT 1.0 s against spec-model's 20.0 s (5%) on 1 cases, per case 5% to 5% "
                         "(median 5%); 1000 of 1000 prompt tokens from the store; outputs equal to spec-model's 1/1",
                         "spec-session: TTFT 10.0 s against spec-model's 30.0 s (33%) on 2 cases, per case 20% to 40% "
                         "(median 40%); 1024 of 2000 prompt tokens from the store; outputs equal to spec-model's 1/2"]
    assert prefix_store_summary(records, ["spec-session"]) == ""  # nothing cold to set it against


@pytest.mark.model
def test_a_session_of_edits_to_one_file_reads_what_the_earlier_ones_stored(monkeypatch):
    # One thread count throughout: the store keeps each count's prefixes apart (`threads.py`), and a
    # machine busy with other work would have the two applies read with different counts.
    monkeypatch.setenv("APPLY_EDIT_THREADS", "1")
    from apply_edit.request.apply import Applier
    from apply_edit.request.runs import ApplyOptions
    from apply_edit.models.transformers_target import TransformersTarget

    first = load_cases(FIXTURES, ["py_multi_hunk_dataclass"])[0]
    # another snippet for the same file, as an agent's second try (the store holds the file's whole chunks)
    second = replace(first, name=first.name + "_retry", update="# ... existing code ...\nimport sys\n")
    applier = Applier(TransformersTarget.load("smollm2-135m", dtype="fp32"))
    methods = ["spec-model", "spec-session"]
    records = run_bench(applier, [first, second], methods, ApplyOptions(max_new_tokens=8), log=lambda _: None)
    by = {(r.case, r.method): r for r in records}
    assert by[first.name, "spec-session"].stats["prompt_cached"] == 0  # the file's first apply: nothing stored yet
    # all of the file's share of the prompt: its reading ends a pass where the file ends
    shared = applier.plan(second.request(), bench_method_options("spec-session", ApplyOptions(max_new_tokens=8))).shared
    assert shared > 512 and by[second.name, "spec-session"].stats["prompt_cached"] == shared
    assert all(by[c.name, "spec-session"].output == by[c.name, "spec-model"].output for c in (first, second))
    assert applier.target.prefix_cache is None  # the other methods ran without the store
    assert "outputs equal to spec-model's 1/1" in prefix_store_summary(records, methods)


def test_a_case_the_model_cannot_take_is_recorded_as_refused_and_the_run_goes_on():
    from apply_edit.request.runs import ApplyError, ApplyOptions
    from apply_edit.faces.bench import run_case

    class TooLong:
        def stream(self, request, options, proposer=None):
            raise ApplyError("request too long for the model: 21838 prompt tokens + 10996 to write")

    case = load_cases(FIXTURES, ["go_add_struct_method"])[0]
    rec = run_case(TooLong(), case, "spec", ApplyOptions())
    assert rec.refused and rec.path == "refused" and not rec.exact and "too long" in rec.reason
