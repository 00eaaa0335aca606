from apply_edit.bench import Record, oracle_reference


def record(method, tokens):
    return Record("case", method, 1.0, 0.1, len(tokens), len(tokens), "", False, tokens=tokens)


def test_oracle_copies_spec_output_even_when_plain_departs_or_stops_early():
    runs = {"plain": record("plain", [1, 2]), "prompt-lookup": record("prompt-lookup", []),
            "spec": record("spec", [1, 3, 4, 5])}
    assert oracle_reference(runs) == [1, 3, 4, 5]


def test_oracle_falls_back_to_the_first_target_decoded_output():
    runs = {"prompt-lookup": record("prompt-lookup", []), "plain": record("plain", [1, 2]),
            "spec-k8": record("spec-k8", [1, 2, 3])}
    assert oracle_reference(runs) == [1, 2]
    assert oracle_reference({"prompt-lookup": record("prompt-lookup", [])}) is None
