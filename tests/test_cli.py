"""The command line: errors are one clear line, files are never half-written."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from apply_edit.faces.cli import main
from apply_edit.request.runs import ApplyRequest
from conftest import FIXTURES


def test_a_sound_merge_is_written_without_provisioning_or_loading_the_model(tmp_path, monkeypatch, capsys):
    src = FIXTURES / "py_edit_loop_body"
    f = tmp_path / "original.py"
    f.write_text((src / "original.py").read_text())
    monkeypatch.setenv("APPLY_EDIT_CACHE", str(tmp_path / "cache"))  # empty: loading would provision
    assert main(["apply", str(f), "--update", str(src / "update.py"), "-i"]) == 0
    assert f.read_text() == (src / "expected.py").read_text()
    assert not (tmp_path / "cache").exists()
    assert "the model did not run" in capsys.readouterr().err
    # A mistyped --model is still an error, with no traceback, although the merge needs no model.
    assert main(["apply", str(f), "--update", str(src / "update.py"), "--model", "qwen-nope"]) == 1
    assert "unknown model 'qwen-nope'" in capsys.readouterr().err


def test_an_apply_the_merge_answers_never_imports_torch(tmp_path):
    # Importing torch is most of such an apply's time: the merge path must not reach it (nor grpc,
    # nor transformers). A fresh interpreter, so that no other test's imports count.
    src = FIXTURES / "py_edit_loop_body"
    f = tmp_path / "original.py"
    f.write_text((src / "original.py").read_text())
    script = ("import sys\nfrom apply_edit.faces.cli import main\n"
              f"assert main(['apply', {str(f)!r}, '--update', {str(src / 'update.py')!r}, '-i']) == 0\n"
              "print(sorted(m for m in ('torch', 'transformers', 'grpc') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"  # after the diff -i prints
    assert f.read_text() == (src / "expected.py").read_text()


@pytest.mark.parametrize("argv, message", [
    (["apply", "missing.py", "--update", "missing.py"], "does not exist"),
    (["bench", "no-such-dir"], "not a directory"),
    (["serve", "--host", "0.0.0.0"], "--allow-remote"),
    (["serve", "--host", "build-box.example"], "--allow-remote"),
    (["bench", "fixtures", "--methods", "spec-k8,spec-typical-7"], "unknown method"),
    (["bench", "fixtures", "--resume"], "give --json"),
    (["serve", "--tls-cert", "server.crt"], "both --tls-cert and --tls-key"),
    (["serve", "--token-file", "no-such-token"], "cannot read token file"),
    (["apply", "README.md", "--update", "README.md", "--server", "10.0.0.7:1", "--token-file", "pyproject.toml"],
     "printable ASCII"),
    (["model", "fetch", "gpt-17"], "unknown model"),
])
def test_bad_input_is_one_clear_line(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("apply-edit: error:") and message in err[0]


def test_the_default_server_deadline_grows_with_the_request_and_0_means_none(tmp_path, monkeypatch):
    from apply_edit.faces.cases import load_case
    from apply_edit.faces.service import client

    sizes = [client.default_deadline_s(ApplyRequest("x = 1\n" * n, "x = 2\n")) for n in (0, 1, 100, 10_000)]
    assert 60 < sizes[0] < 61 and sizes == sorted(set(sizes))  # a minute at least, more for every byte
    slowest = load_case(Path(__file__).parent.parent / "fixtures" / "c_real_zlib_zran_check_realloc_fseeko")
    assert client.default_deadline_s(ApplyRequest(slowest.original, slowest.update)) > 2 * 1124  # its measured wall

    deadlines = []

    class Run:  # in place of RemoteRun: notes the deadline it was given, then fails as a server could
        def __init__(self, channel, request, options, timeout=None):
            deadlines.append(timeout)

        def __iter__(self):
            raise client.RemoteError("UNAVAILABLE: test")

    monkeypatch.setattr(client, "RemoteRun", Run)
    monkeypatch.setattr(client, "connect", lambda *args, **kw: None)
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    for extra in ([], ["--timeout", "0"], ["--timeout", "7.5"]):
        assert main(["apply", str(f), "--update", str(f), "--server", "127.0.0.1:1", *extra]) == 1
    assert deadlines == [client.default_deadline_s(ApplyRequest("x = 1\n", "x = 1\n")), None, 7.5]


def test_non_utf8_file_is_refused(tmp_path, capsys):
    f = tmp_path / "a.py"
    f.write_bytes(b"\xff\xfe binary")
    assert main(["apply", str(f), "--update", str(f)]) == 1
    assert "not UTF-8" in capsys.readouterr().err


@pytest.mark.model
def test_apply_in_place_end_to_end(tmp_path):
    """The console script on the small real model: progress, diff, atomic write, stats."""
    src = Path(__file__).parent.parent / "fixtures" / "py_add_method"
    f = tmp_path / "cache.py"
    f.write_text((src / "original.py").read_text())
    os.chmod(f, 0o640)
    exe = Path(sys.executable).parent / "apply-edit"
    argv = [str(exe), "apply", str(f), "--update", str(src / "update.py"), "-i", "--model", "smollm2-135m",
            "--max-new-tokens", "120"]
    # 120 tokens cannot hold the file, but the merge is structurally sure and passes the checks: the
    # default writes it, wherever the model stopped or departed.
    verified = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert verified.returncode == 0, verified.stderr
    assert f.read_text() == (src / "expected.py").read_text()
    assert "path: merge" in verified.stderr and verified.stdout.startswith("--- a/cache.py")
    assert "the model did not run" in verified.stderr
    f.write_text((src / "original.py").read_text())
    # The model's own output (120 tokens) drops most of the file: the checks refuse to write it.
    argv += ["--pipeline", "model"]
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 1
    reason = [line for line in refused.stderr.splitlines() if line.startswith("apply-edit: error:")]
    assert len(reason) == 1 and "not writing" in reason[0] and "--force" in reason[0]
    assert f.read_text() == (src / "original.py").read_text()
    done = subprocess.run(argv + ["--force"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "target passes" in done.stderr
    new = f.read_text()
    if new != (src / "original.py").read_text():
        assert done.stdout.startswith("--- a/cache.py")
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.py"]


@pytest.mark.model
def test_bench_runs_methods_side_by_side_and_writes_records(tmp_path, capsys):
    import json

    out = tmp_path / "bench.json"
    fixtures = Path(__file__).parent.parent / "fixtures"
    chart = tmp_path / "speedup.png"
    methods = ["plain", "prompt-lookup", "spec-model", "spec-k8", "spec-adaptive", "oracle", "spec-typical-0.3", "spec"]
    # The smallest fixture: each method pays its own prefill, the bulk of this test's time.
    assert main(["bench", str(fixtures), "--cases", "ts_small_file_whole_rewrite", "--methods", ",".join(methods),
                 "--model", "smollm2-135m", "--dtype", "fp32", "--max-new-tokens", "80", "--json", str(out),
                 "--chart", str(chart)]) == 0
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = json.loads(out.read_text())
    assert [r["method"] for r in records] == methods
    for r in records[2:6]:  # every exact drafting method gives plain's output
        assert r["identical_to_plain"] is True, r["method"]
    assert records[2]["candidate_is_output"] in (True, False)  # merge drafting reports its candidate
    judged = records[7]
    assert judged["path"] in ("model", "model+merge", "merge", "refused")
    records = records[:3]
    for r in records:
        for key in ("case", "method", "wall_s", "ttft_s", "target_passes", "new_tokens", "exact"):
            assert key in r
    plain, lookup, spec = records
    # 80 tokens are not the file: plain's output is written, and once (spec's is the same text).
    assert "output" in plain and spec["identical_to_plain"] is True and "output" not in spec
    assert spec["target_passes"] < plain["target_passes"] == plain["new_tokens"]
    table = capsys.readouterr().out
    assert "vs plain" in table and "ts_small_file_whole_rewrite" in table

    # Resumed: the saved case is kept as it was, only the new one runs.
    assert main(["bench", str(fixtures), "--cases", "ts_small_file_whole_rewrite,js_edit_first_lines", "--methods", "plain,spec",
                 "--model", "smollm2-135m", "--dtype", "fp32", "--max-new-tokens", "40", "--json", str(out),
                 "--resume"]) == 0
    resumed = json.loads(out.read_text())
    assert [(r["case"], r["method"]) for r in resumed] == [("ts_small_file_whole_rewrite", "plain"),
                                                          ("ts_small_file_whole_rewrite", "spec"),
                                                          ("js_edit_first_lines", "plain"),
                                                          ("js_edit_first_lines", "spec")]
    assert resumed[0] == plain and resumed[1] == judged
    assert "1 done before" in capsys.readouterr().err
