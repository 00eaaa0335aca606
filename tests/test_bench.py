from apply_edit.bench import Record, failure_summary, headline, oracle_reference
from apply_edit.cases import load_cases
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
