"""The gRPC contract without a model: the generated modules are the .proto's, and metric labels come
from a bounded set."""

import importlib.util
from pathlib import Path

from apply_edit.faces.service.servicer import language_label
from apply_edit.v1 import apply_edit_pb2 as pb

ROOT = Path(__file__).parent.parent


def test_generated_modules_match_the_proto(tmp_path):
    """The installed *_pb2 modules are what protoc makes of the .proto now (none is hand-written or stale)."""
    spec = importlib.util.spec_from_file_location("build_backend", ROOT / "proto" / "build_backend.py")
    build_backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_backend)
    build_backend.generate(tmp_path)
    for name in ("apply_edit_pb2.py", "apply_edit_pb2_grpc.py", "apply_edit_pb2.pyi"):
        fresh = (tmp_path / "apply_edit/v1" / name).read_text()
        installed = (ROOT / "apply_edit/v1" / name).read_text()
        assert fresh == installed, f"{name} is out of date: reinstall (pip install -e .)"


def test_metric_labels_come_from_a_bounded_set():
    assert language_label(pb.ApplyRequest(path="src/app.ts")) == "typescript"
    assert language_label(pb.ApplyRequest(language="Python")) == "python"
    assert language_label(pb.ApplyRequest(language="x" * 50)) == "other"
    assert language_label(pb.ApplyRequest()) == "unknown"


def test_the_regions_the_model_wrote_and_the_target_s_verdicts_reach_a_grpc_client():
    from apply_edit.request.runs import ApplyOptions, ApplyStats
    from apply_edit.faces.service.client import RemoteRun
    from apply_edit.faces.service.servicer import stats_message

    stats = ApplyStats(method="spec", path="merge+model",
                       regions_written=["wrote lines 41-62 (original 41-61): 121 tokens in 5.1 s"],
                       verdicts=["kept the old line: 9.2 nats"])
    message = pb.Stats.FromString(stats_message(stats, "qwen").SerializeToString())
    client = RemoteRun.__new__(RemoteRun)  # its reading of the final message, without a server
    client.stats = ApplyStats(method=ApplyOptions().method)
    client._take(message)
    assert (client.stats.path, client.stats.regions_written, client.stats.verdicts) == \
        ("merge+model", stats.regions_written, stats.verdicts)
