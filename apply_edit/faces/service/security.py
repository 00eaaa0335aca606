"""Who may talk to the service, and how: loopback by default, optional TLS, optional bearer token.

The token travels as `authorization: Bearer <token>` call metadata. Over the network it needs TLS; on
loopback it may go in clear (gRPC's local credentials carry it over plain TCP to a local server only).
Health stays open without a token, as load balancers and probes expect; everything else needs it.
"""

from __future__ import annotations

import hmac
import ipaddress
from pathlib import Path

import grpc

OPEN_METHODS = ("/grpc.health.v1.Health/",)


class SecurityError(ValueError):
    """A TLS or token setting that cannot work (unreadable file, token in clear text over the network)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost: it may resolve anywhere
        return False


def host_of(address: str) -> str:
    """'host:port' or '[v6]:port' → host."""
    return address.rsplit(":", 1)[0] if ":" in address else address


def hosts_of(target: str) -> list[str]:
    """The hosts a gRPC target names: 'host:port', or replicas in gRPC's name syntax
    ('ipv4:10.0.0.1:50051,10.0.0.2:50051', 'ipv6:[::1]:50051', 'dns:///name:port')."""
    scheme, _, rest = target.partition(":")
    if scheme not in ("ipv4", "ipv6", "dns"):
        return [host_of(target)]
    if scheme == "dns":  # dns:host:port, dns:///host:port or dns://resolver/host:port
        rest = rest.rsplit("/", 1)[-1]
    return [host_of(address) for address in rest.split(",")]


def check_binding(host: str, allow_remote: bool, tls: bool, token: str | None) -> None:
    """The rules every server object enforces (not only the CLI): loopback unless allowed, and no bearer
    token in clear text over the network."""
    remote = not is_loopback(host)
    if remote and not allow_remote:
        raise SecurityError(f"host {host} is reachable from other machines; allow it explicitly (--allow-remote, "
                            f"with a token and TLS), or keep the default 127.0.0.1")
    if token and remote and not tls:
        raise SecurityError(f"a bearer token on {host} without TLS would travel in clear text; add a TLS "
                            f"certificate and key")


def read_token(path: str | Path) -> str:
    """The token in a file (surrounding whitespace ignored): non-empty printable ASCII, as metadata needs."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecurityError(f"cannot read token file {path}: {getattr(exc, 'strerror', None) or exc}")
    if not token:
        raise SecurityError(f"token file {path} is empty")
    if not (token.isascii() and token.isprintable()) or any(c.isspace() for c in token):
        raise SecurityError(f"token file {path}: the token must be printable ASCII without spaces")
    return token


def read_pem(path: str | Path, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SecurityError(f"cannot read {what} {path}: {exc.strerror or exc}")
    if b"-----BEGIN " not in data:
        raise SecurityError(f"{what} {path} is not PEM (no '-----BEGIN' line)")
    return data


class BearerTokenAuth(grpc.ServerInterceptor):
    """Refuses every call but health without the right token (UNAUTHENTICATED), before the request is parsed.

    The comparison is constant-time, so response timing does not reveal how much of a guess was right.
    """

    def __init__(self, token: str, on_denied=lambda method: None):
        self._expected = f"Bearer {token}".encode()
        self._on_denied = on_denied

    def intercept_service(self, continuation, details):
        if details.method.startswith(OPEN_METHODS):
            return continuation(details)
        given = dict(details.invocation_metadata).get("authorization")
        if given is not None and hmac.compare_digest(given.encode(), self._expected):
            return continuation(details)
        handler = continuation(details)
        if handler is None:  # unknown method: let gRPC say UNIMPLEMENTED as usual
            return None
        self._on_denied(details.method)
        reason = ("missing bearer token: this server needs 'authorization: Bearer <token>' (apply-edit: --token-file)"
                  if given is None else "wrong bearer token")
        return _denying(handler, reason)


def _denying(handler: grpc.RpcMethodHandler, reason: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that only aborts; the request bytes are never deserialized."""

    def deny(request, context):
        context.abort(grpc.StatusCode.UNAUTHENTICATED, reason)

    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(deny)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(deny)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(deny)
    return grpc.stream_stream_rpc_method_handler(deny)


def server_credentials(cert_path: str | Path, key_path: str | Path) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials([(read_pem(key_path, "TLS key"), read_pem(cert_path, "TLS certificate"))])


def channel_credentials(address: str, tls: bool = False, tls_ca: str | Path | None = None,
                        token: str | None = None) -> grpc.ChannelCredentials | None:
    """Credentials for a channel to `address`, or None for a plain channel (no TLS, no token)."""
    if tls or tls_ca:
        creds = grpc.ssl_channel_credentials(read_pem(tls_ca, "TLS CA certificate") if tls_ca else None)
    elif token is not None:
        if not all(map(is_loopback, hosts_of(address))):
            raise SecurityError(f"the token would cross the network to {address} in clear text; use --tls "
                                f"(or --tls-ca FILE for a private CA)")
        creds = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    else:
        return None
    if token is not None:
        creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
    return creds
