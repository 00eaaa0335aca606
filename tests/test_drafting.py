"""The drafting plan (request/drafts.py): which references the copy drafter reads, in which order, and the
region of every position, on a byte tokenizer (no model needed)."""

from apply_edit.faces.cases import load_case
from apply_edit.request.drafts import plan_drafting, token_lines
from apply_edit.merge import merge
from apply_edit.judging.prompting import FORMATS, build_prompt
from conftest import FIXTURES, ByteTokenizer

TOKENIZER = ByteTokenizer()
CLOSE = "</updated-code>"


def plan_for(case_name: str, candidate: bool = True):
    case = load_case(FIXTURES / case_name)
    merged = merge(case.original, case.update, "python")
    prompt = build_prompt(TOKENIZER, FORMATS["tags-draft"], case.original, case.update, merged=merged.text)
    plan = plan_drafting(TOKENIZER, case.original, "python", token_lines(TOKENIZER, case.original),
                         TOKENIZER.encode(case.update), merged if candidate else None, closing=CLOSE,
                         prompt_words=prompt.words())
    return case, merged, prompt, plan


def test_token_lines_give_the_line_each_token_starts_on():
    lines = token_lines(TOKENIZER, "ab\nc\n\nd")
    assert lines.ids == list(b"ab\nc\n\nd")
    assert lines.lines == [0, 0, 0, 1, 1, 2, 3]


def test_every_reference_position_has_a_region_and_every_separator_none():
    _, _, _, plan = plan_for("py_add_method")
    assert len(plan.region_of) == len(plan.proposer.text)
    separators = plan.proposer.text < 0
    assert (plan.region_of[separators] == -1).all() and (plan.region_of[~separators] >= 0).all()
    # The snippet and the prompt's words are regions of their own, after the file's; the merge edited some
    # of the file's regions, not all.
    assert len(plan.edited) == len(plan.regions) + 2 and plan.edited[-2] and not plan.edited[-1]
    assert any(plan.edited[:-2]) and not all(plan.edited[:-2])


def test_the_merge_comes_first_and_the_prompts_words_last():
    case, merged, prompt, plan = plan_for("py_add_method")
    refs = [plan.proposer.text[a:b].tolist() for a, b in
            zip(plan.proposer.starts, [s - 1 for s in plan.proposer.starts[1:]] + [len(plan.proposer.text)])]
    assert TOKENIZER.decode(refs[0]) == merged.text + CLOSE  # copying starts in the merged file
    assert TOKENIZER.decode(refs[1]) == case.original and TOKENIZER.decode(refs[2]) == case.update
    words = [TOKENIZER.decode(r) for r in refs[3:]]
    assert words == prompt.words() and "</draft>" in words[-1]
    words_region = plan.region_of[plan.proposer.starts[3]:]
    assert set(words_region.tolist()) == {len(plan.edited) - 1, -1}  # the words' region, and separators


def test_copy_drafting_reads_the_original_and_the_snippet_first():
    case, _, _, plan = plan_for("py_add_method", candidate=False)
    first = plan.proposer.text[:plan.proposer.starts[1] - 1].tolist()
    assert TOKENIZER.decode(first) == case.original and plan.candidate is None
    assert not any(plan.edited[:-2])  # no merge: no region is known to be edited
