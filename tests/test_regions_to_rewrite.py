"""The regions the target rewrites where the merge fails the checks (`regions_to_rewrite.py`), and the run
that rewrites them (`request.RegionRun`), whether or not the whole file would fit the target's context."""

import pytest

from apply_edit.request.apply import Applier
from apply_edit.judging.decide import ApplyRefused
from apply_edit.merge import merge, split_lines
from apply_edit.judging.regions_to_rewrite import changed_regions, failing_regions, region_snippet, with_merges_blank_lines
from apply_edit.request.runs import ApplyOptions, ApplyRequest, RegionRun
from conftest import TEST_MODEL


def filler(prefix: str) -> str:
    return "".join(f"function {prefix}{i}(x) {{\n  const y = x * {i};\n  return y + {i};\n}}\n\n" for i in range(6))


ROUTE = ("function route(req) {\n  if (req.ok) {\n    const body = encode(req);\n    send(body);\n  } else {\n"
         "    retry(req);\n  }\n}\n\n")
ORIGINAL = filler("before") + ROUTE + filler("after")
# Two hunks: one the merge places soundly (before2), one it cannot (lines moved into a new function, shown
# there by a marker: a merge in file order cannot fetch them).
UPDATE = ("// ... existing code ...\nfunction before2(x) {\n  const y = x * 2;\n  return y + 20;\n}\n"
          "// ... existing code ...\nfunction deliver(req) {\n  // ... the lines that send it, moved from route ...\n"
          "}\n\nfunction route(req) {\n  if (req.ok) {\n    deliver(req);\n  } else {\n// ... existing code ...\n")


def test_regions_are_the_merges_changed_runs_with_unchanged_lines_around_them():
    candidate = merge(ORIGINAL, UPDATE, "javascript")
    regions = changed_regions(candidate, context=2)
    orig, merged = split_lines(ORIGINAL), split_lines(candidate.text)
    assert len(regions) == 2
    for r in regions:  # a window's edges are the original's own lines
        assert merged[r.start] == orig[r.original_start] and merged[r.end - 1] == orig[r.original_end - 1]
    # Outside the regions the merge is the original, line for line.
    outside = [line for n, line in enumerate(merged) if not any(r.start <= n < r.end for r in regions)]
    assert outside == [line for n, line in enumerate(orig)
                       if not any(r.original_start <= n < r.original_end for r in regions)]


def test_only_a_region_whose_change_fails_on_its_own_is_rewritten_from_the_hunk_there():
    candidate = merge(ORIGINAL, UPDATE, "javascript")
    regions = changed_regions(candidate)
    failing = failing_regions(ORIGINAL, UPDATE, "javascript", "", candidate, regions)
    assert len(failing) == 1 and "function route" in "".join(split_lines(ORIGINAL)[failing[0].original_start:
                                                                                      failing[0].original_end])
    snippet = region_snippet(UPDATE, split_lines(candidate.text)[failing[0].start:failing[0].end])
    assert "deliver(req);" in snippet and "before2" not in snippet and snippet.startswith("// ... existing code ...")


def test_where_the_targets_region_differs_from_the_merges_only_by_blank_lines_the_merges_stand():
    merged = "  push(x) {\n    add(x);\n  }\n\n  close() {\n    stop();\n  }\n};\n}\n"
    written = "  push(x) {\n    add(x);\n  }\n  close() {\n    stop();\n\n  }\n}\n"
    # The blank line dropped between the methods and the one added in close() are layout: the merge's. The
    # code it changed (`};` and `}` made one `}`) is the target's.
    assert with_merges_blank_lines(written, merged) == "  push(x) {\n    add(x);\n  }\n\n  close() {\n    stop();\n  }\n}\n"
    assert with_merges_blank_lines(merged, merged) == merged


def test_a_region_the_target_cannot_read_within_the_bound_is_refused_before_any_pass():
    from apply_edit.engine.api import CostCurve
    from apply_edit.models import FunctionModel
    from conftest import EOS, ByteTokenizer

    target = FunctionModel(lambda seq: [1.0 / (EOS + 1)] * (EOS + 1), eos=[EOS])
    target.cost_curve = lambda: CostCurve({0: {0: 1.0}}, prefill={100: 10.0})  # 10 tokens a second
    run = Applier(target, ByteTokenizer()).stream(ApplyRequest(ORIGINAL, UPDATE, language="javascript"))
    assert isinstance(run, RegionRun)
    with pytest.raises(ApplyRefused, match=r"rewrite of lines [\d-]+ \(original [\d-]+\) \(not started: reading "
                                           r"its [\d,]+-token prompt alone takes about [\d.]+ s on this target"):
        run.result()
    assert target.calls == 0 and run.stats.regions_written == [] and run.outcome.path == "refused"


def test_measuring_the_targets_pass_costs_the_first_time_is_not_the_applys_time():
    import time

    from apply_edit.engine.api import CostCurve
    from apply_edit.models import FunctionModel
    from conftest import EOS, ByteTokenizer

    target = FunctionModel(lambda seq: [1.0 / (EOS + 1)] * (EOS + 1), eos=[EOS])
    measured = []

    def cost_curve():  # the first call measures (here: sleeps), later ones read the result
        if not measured:
            time.sleep(0.5)
            measured.append(CostCurve({0: {0: 0.001}}, prefill={100: 0.001}))
        return measured[0]

    target.cost_curve = cost_curve
    run = Applier(target, ByteTokenizer()).stream(ApplyRequest(ORIGINAL, UPDATE, language="javascript"),
                                                  ApplyOptions(model_seconds=0.4))
    assert isinstance(run, RegionRun)
    with pytest.raises(ApplyRefused) as refused:  # the uniform target writes nothing that passes
        run.result()
    assert "not started" not in str(refused.value) and target.calls > 0  # before: refused unread, 0.5 > 0.4 s


@pytest.mark.model
def test_a_file_too_long_for_the_target_has_the_failing_region_written_by_it_and_the_rest_copied():
    from apply_edit.models.transformers_target import TransformersTarget

    target = TransformersTarget.load(TEST_MODEL, dtype="fp32", log=lambda *_: None)
    target.context_limit = lambda: 1200  # the whole file's prompt and answer exceed it; a region's do not
    request = ApplyRequest(ORIGINAL, UPDATE, language="javascript")
    run = Applier(target).stream(request)
    assert isinstance(run, RegionRun)
    pieces = []
    try:
        for piece in run:
            pieces.append(piece)
        refused = False
    except ApplyRefused:
        refused = True
    assert "".join(pieces) == run.text and len(run.stats.regions_written) == 1
    region = failing_regions(ORIGINAL, UPDATE, "javascript", "", request.merged, changed_regions(request.merged))[0]
    merged = split_lines(request.merged.text)
    assert run.text.startswith("".join(merged[:region.start]))  # the merge's text before the region, as it is
    if refused:
        assert "no sound result" in run.outcome.reason
    else:
        assert run.outcome.path == "merge+model" and run.text.endswith("".join(merged[region.end:]))


@pytest.mark.model
def test_a_region_run_cancelled_while_the_target_writes_decides_nothing():
    import threading
    import time

    from apply_edit.models.transformers_target import TransformersTarget

    target = TransformersTarget.load(TEST_MODEL, dtype="fp32", log=lambda *_: None)
    request = ApplyRequest(ORIGINAL, UPDATE, language="javascript")
    run = Applier(target).stream(request)
    assert isinstance(run, RegionRun)  # the file fits the model's context: the region is written all the same
    pieces, finished = [], threading.Event()

    def read():
        try:
            pieces.extend(run)
        except ApplyRefused:
            pass
        finally:
            finished.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 120
    while not run.model_text and not finished.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert run.model_text and not finished.is_set()  # the target has begun the region, not ended it
    run.cancel()
    assert finished.wait(60)
    # No outcome, no path: a face writes nothing (`in_place.commit_in_place` runs only on a final answer);
    # what was sent is the merge's text before the region.
    assert run.outcome is None and run.stats.path == "" and "".join(pieces) == run.text
    assert run.text and request.merged.text.startswith(run.text) and "function deliver" not in run.text


QUEUE = ('const EventEmitter = require("events");\n\nmodule.exports = class Queue extends EventEmitter {\n'
         '  constructor(limit) {\n    super();\n    this.limit = limit;\n    this.items = [];\n  }\n\n'
         '  push(item) {\n    if (this.items.length >= this.limit) {\n      throw new Error("queue is full");\n    }\n'
         '    this.items.push(item);\n    this.emit("push", item);\n  }\n\n'
         '  shift() {\n    const item = this.items.shift();\n    this.emit("shift", item);\n    return item;\n  }\n\n'
         '  close() {\n    this.emit("close");\n  }\n};\n')


@pytest.mark.model
def test_the_default_model_writes_a_region_the_merge_cannot_place():
    # Written for this test: the class is no longer assigned (`};` becomes `}`) and close() empties the
    # queue. The alignment keeps the old `};` beside the new `}` (the snippet shows no marker after it),
    # which does not parse. The second reading (each hunk placed by its own lines) places it right; taken
    # away here, as where both readings fail, the target rewrites that region, and only it.
    from apply_edit.models.transformers_target import TransformersTarget

    update = '// ... existing code ...\n\n  close() {\n    this.items = [];\n    this.emit("close");\n  }\n}\n'
    expected = QUEUE.replace('  close() {\n    this.emit("close");\n  }\n};\n',
                             '  close() {\n    this.items = [];\n    this.emit("close");\n  }\n}\n')
    request = ApplyRequest(QUEUE, update, language="javascript")
    assert request.merged.anchored.text == expected
    request.merged.anchored = None
    assert not request.judge.merge_sound
    run = Applier(TransformersTarget.load("qwen2.5-coder-0.5b", dtype="fp32", log=lambda *_: None)).stream(request)
    assert isinstance(run, RegionRun)
    pieces = list(run)
    assert "".join(pieces) == run.text == expected
    assert run.outcome.path == "merge+model" and len(run.stats.regions_written) == 1
