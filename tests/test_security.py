"""TLS, bearer-token auth and message size limits of the gRPC service."""

import shutil
import subprocess
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from apply_edit.request.runs import ApplyOptions
from apply_edit.faces.cases import load_case
from apply_edit.faces.cli import main
from apply_edit.faces.service.client import RemoteError, RemoteRun, connect, request_message
from apply_edit.faces.service.security import SecurityError, channel_credentials, is_loopback, read_token
from apply_edit.faces.service.server import ApplyServer
from apply_edit.v1 import apply_edit_pb2_grpc as pb_grpc
from conftest import FIXTURES, free_port

TOKEN = "s3cret-token_0123456789"
CASE = load_case(FIXTURES / "py_add_method")
SHORT = ApplyOptions(max_new_tokens=20, pipeline="model")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A self-signed certificate for localhost/127.0.0.1, and a second, unrelated one."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make test certificates")
    d = tmp_path_factory.mktemp("certs")
    for name in ("server", "other"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-keyout", d / f"{name}.key", "-out", d / f"{name}.crt", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    return d


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def start(**kw) -> ApplyServer:
    """A server without a model: authenticated Apply calls get UNAVAILABLE (still loading), not a decode."""
    metrics_port = free_port()
    server = ApplyServer("smollm2-135m", port=0, metrics_port=metrics_port, log=lambda *_: None, **kw)
    server.start()
    server.metrics_port = metrics_port
    return server


def apply_error(channel, metadata=None) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        list(pb_grpc.ApplyEditStub(channel).Apply(request_message(CASE.request(), SHORT), metadata=metadata,
                                                  timeout=30))
    return err.value


def test_token_file_must_hold_one_printable_token(tmp_path):
    for content, message in [("", "is empty"), ("  \n", "is empty"), ("two words", "printable ASCII"),
                             ("caf\u00e9", "printable ASCII")]:
        (tmp_path / "t").write_text(content)
        with pytest.raises(SecurityError, match=message):
            read_token(tmp_path / "t")
    with pytest.raises(SecurityError, match="cannot read token file"):
        read_token(tmp_path / "missing")
    (tmp_path / "t").write_text(f"  {TOKEN}\n")
    assert read_token(tmp_path / "t") == TOKEN


def test_a_token_never_crosses_the_network_in_clear_text():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("[::1]")
    assert not is_loopback("10.0.0.7") and not is_loopback("build-box.example")
    with pytest.raises(SecurityError, match="clear text"):
        channel_credentials("10.0.0.7:50051", token=TOKEN)
    assert channel_credentials("10.0.0.7:50051") is None  # no token, no TLS: a plain channel
    assert channel_credentials("127.0.0.1:50051", token=TOKEN) is not None  # loopback: local credentials
    # Replicas named in gRPC's syntax: every one of them must be on this machine.
    assert channel_credentials("ipv4:127.0.0.1:50051,127.0.0.1:50052", token=TOKEN) is not None
    assert channel_credentials("dns:///localhost:50051", token=TOKEN) is not None
    with pytest.raises(SecurityError, match="clear text"):
        channel_credentials("ipv4:127.0.0.1:50051,10.0.0.7:50051", token=TOKEN)


def test_wrong_or_missing_token_is_unauthenticated_and_health_stays_open():
    server = start(token=TOKEN)
    try:
        address = f"127.0.0.1:{server.port}"
        with grpc.insecure_channel(address) as plain:
            missing = apply_error(plain)
            assert missing.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "missing bearer token" in missing.details()
            wrong = apply_error(plain, metadata=(("authorization", "Bearer " + TOKEN[:-1] + "X"),))
            assert wrong.code() == grpc.StatusCode.UNAUTHENTICATED and wrong.details() == "wrong bearer token"
            prefix = apply_error(plain, metadata=(("authorization", "Bearer " + TOKEN[:5]),))
            assert prefix.code() == grpc.StatusCode.UNAUTHENTICATED
            # Probes need no token; reflection (the API's shape) does.
            status = health_pb2_grpc.HealthStub(plain).Check(health_pb2.HealthCheckRequest(), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.NOT_SERVING
            with pytest.raises(grpc.RpcError) as err:
                list(reflection_pb2_grpc.ServerReflectionStub(plain).ServerReflectionInfo(
                    iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10))
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # The right token passes auth and reaches the service (which says the model is still loading).
        with connect(address, token=TOKEN) as authed:
            assert apply_error(authed).code() == grpc.StatusCode.UNAVAILABLE
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
        assert 'apply_edit_requests_total{language="unknown",size="unknown",status="UNAUTHENTICATED"} 4.0' in metrics
    finally:
        server.stop(0)


def test_tls_server_needs_a_client_that_trusts_its_certificate(certs):
    server = start(tls=(certs / "server.crt", certs / "server.key"), token=TOKEN)
    try:
        address = f"localhost:{server.port}"
        with connect(address, tls_ca=certs / "server.crt", token=TOKEN) as ok:
            assert apply_error(ok).code() == grpc.StatusCode.UNAVAILABLE  # through TLS and auth
        with connect(address, tls_ca=certs / "server.crt") as no_token:
            assert apply_error(no_token).code() == grpc.StatusCode.UNAUTHENTICATED
        for wrong in (connect(address, tls_ca=certs / "other.crt", token=TOKEN), connect(address, token=TOKEN)):
            with wrong:  # a certificate from another CA; plain text to a TLS port
                assert apply_error(wrong).code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(RemoteError, match="not serving within 1s \\(UNAVAILABLE"):
            connect(address, wait_s=1, tls_ca=certs / "other.crt")
    finally:
        server.stop(0)


def test_bad_tls_files_are_one_clear_error(certs, tmp_path):
    (tmp_path / "junk.pem").write_text("not a certificate")
    with pytest.raises(SecurityError, match="not PEM"):
        ApplyServer("smollm2-135m", tls=(tmp_path / "junk.pem", certs / "server.key"), log=lambda *_: None)
    with pytest.raises(SecurityError, match="cannot read TLS CA certificate"):
        connect("localhost:1", tls_ca=tmp_path / "missing.pem")


def test_serve_refuses_a_token_in_clear_text_over_the_network(token_file, capsys):
    assert main(["serve", "--host", "0.0.0.0", "--allow-remote", "--token-file", str(token_file)]) == 1
    assert "clear text" in capsys.readouterr().err


def test_metrics_stay_on_loopback_when_the_api_is_open_to_the_network():
    # Metrics carry no token: with --allow-remote the API binds every interface, the metrics do not.
    server = start(host="0.0.0.0", allow_remote=True)
    try:
        assert server.metrics_address[0] == "127.0.0.1"
        assert b"apply_edit_requests" in urllib.request.urlopen(
            f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read()
    finally:
        server.stop(0)
    with pytest.raises(SecurityError, match="allow"):
        ApplyServer("smollm2-135m", port=0, metrics_port=free_port(), metrics_host="0.0.0.0", log=lambda *_: None)


def test_message_limits_on_both_sides():
    server = start(max_request_bytes=10_000)
    try:
        big = CASE.request()
        big.original = "x = 1\n" * 300_000  # 1.8 MB: above the server's gRPC limit (2 x 10 kB + 1 MiB)
        with connect(f"127.0.0.1:{server.port}", max_message_bytes=20_000) as channel:
            with pytest.raises(RemoteError, match="RESOURCE_EXHAUSTED: .*larger than max"):
                RemoteRun(channel, big, SHORT, timeout=10).result()  # refused before it leaves the client
        with connect(f"127.0.0.1:{server.port}") as channel:  # gRPC's own limit on the server side
            with pytest.raises(RemoteError, match="RESOURCE_EXHAUSTED: .*larger than max"):
                RemoteRun(channel, big, SHORT, timeout=10).result()
    finally:
        server.stop(0)


@pytest.mark.model
def test_cli_rewrites_in_place_over_tls_with_a_token_and_not_without(certs, token_file, tmp_path, capsys):
    from apply_edit.models.transformers_target import TransformersTarget

    server = start(tls=(certs / "server.crt", certs / "server.key"), token=TOKEN, max_request_bytes=20_000)
    try:
        server.load_model(TransformersTarget.load("smollm2-135m"))
        capsys.readouterr()  # the model's loading messages
        target = tmp_path / "calc.py"
        target.write_text(CASE.original)
        (tmp_path / "wrong").write_text("not-the-token")
        address = f"localhost:{server.port}"
        common = ["apply", str(target), "--update", str(CASE.path.parent / "update.py"), "-i", "--force",
                  "--server", address, "--tls-ca", str(certs / "server.crt"), "--max-new-tokens", "40"]
        assert main(common + ["--token-file", str(tmp_path / "wrong")]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "UNAUTHENTICATED: wrong bearer token" in err[0] and "unchanged" in err[0]
        assert target.read_text() == CASE.original
        assert main(common + ["--token-file", str(token_file)]) == 0
        assert target.read_text() != CASE.original and "wrote" in capsys.readouterr().err
        # The server's own request limit: a clear INVALID_ARGUMENT, the file untouched.
        target.write_text("x = 1\n" * 5000)
        assert main(common + ["--token-file", str(token_file)]) == 1
        assert "at most 20000 bytes" in capsys.readouterr().err and target.read_text() == "x = 1\n" * 5000
    finally:
        server.stop(0)
