"""The server's lifecycle: bind, serve health and reflection, load the model, drain on shutdown.

One process, one model (`core.ModelService`), two faces: gRPC on `port`, and with `http_port` the
OpenAI-compatible HTTP face (`http.py`, FastAPI under uvicorn) — same queue, limits, token, TLS and metrics.

Health (`grpc.health.v1.Health`, for "" and for the ApplyEdit service; HTTP `/health`) is NOT_SERVING
(503) until the model is loaded, SERVING after, and NOT_SERVING again once a graceful shutdown starts
(in-flight requests finish, new ones are refused).

Security (service/security.py), enforced here for any embedder: loopback unless `allow_remote`; with
`tls` (certificate and key files) both ports speak TLS; with `token` every call but health needs it, and
a token on a remote host needs TLS.
"""

from __future__ import annotations

import signal
import socket
import threading
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ...request.apply import Applier
from ...request.runs import ApplyOptions
from ...models.threads import choose_threads
from ...models.target import Target
from ...models.transformers_target import TransformersTarget
from .client import keepalive_options
from .core import ModelService
from .metrics import Metrics
from .security import BearerTokenAuth, check_binding, server_credentials
from .servicer import SERVICE, ApplyEditServicer

MiB = 1 << 20


# How soon the main thread notices a signal that a worker thread received.
SIGNAL_POLL_S = 0.25


class ApplyServer:
    def __init__(self, model: str, host: str = "127.0.0.1", port: int = 50051, dtype: str | None = None,
                 max_queue: int = 8, k: int = ApplyOptions.k, metrics_port: int | None = None,
                 max_request_bytes: int = 4 * MiB, grace_s: float = 30.0, tls: tuple[str, str] | None = None,
                 token: str | None = None, log=print, allow_remote: bool = False, http_port: int | None = None,
                 model_names: tuple[str, ...] = (), http_timeout_s: float | None = None,
                 metrics_host: str = "127.0.0.1", prefix_cache_bytes: int = 256 * MiB):
        check_binding(host, allow_remote, bool(tls), token)
        check_binding(metrics_host, allow_remote, True, None)
        self.metrics_host = metrics_host
        self.model_name, self.host, self.port, self.dtype = model, host, port, dtype
        self.metrics_port, self.grace_s, self.log = metrics_port, grace_s, log
        self.prefix_cache_bytes = prefix_cache_bytes
        self.credentials = server_credentials(*tls) if tls else None
        self.tls, self.http_port = tls, http_port
        self.metrics = Metrics()
        self.model = ModelService(model, self.metrics, max_queue=max_queue)
        self.servicer = ApplyEditServicer(self.model, default_k=k, max_request_bytes=max_request_bytes)
        self.health = health.HealthServicer()
        # Threads: the running request, the queue, and a few spare so that refusals are answered at once.
        limit = 2 * max_request_bytes + MiB  # above our own limit, so that we answer with a clear message
        def denied(method: str) -> None:
            self.metrics.requests.labels("UNAUTHENTICATED", "unknown", "unknown").inc()

        interceptors = [BearerTokenAuth(token, on_denied=denied)] if token else []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_queue + 5), interceptors=interceptors,
                                  options=[("grpc.max_receive_message_length", limit),
                                           ("grpc.max_send_message_length", limit), *keepalive_options()])
        self.server.add_generic_rpc_handlers((self.servicer.handler(),))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = (SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)
        reflection.enable_server_reflection(names, self.server)
        self._stopped = threading.Event()
        self._draining = threading.Event()
        self._http = None
        if http_port is not None:
            from .http import create_app

            # Editors send the model name they were configured with: the model's own, or these.
            self.http_model_names = tuple(dict.fromkeys((model, *model_names, "apply-edit", "auto")))
            self.http_app = create_app(self.model, model_names=self.http_model_names, token=token,
                                       max_request_bytes=max_request_bytes, default_k=k, timeout_s=http_timeout_s,
                                       draining=self._draining.is_set)

    def _set_health(self, status) -> None:
        for name in ("", SERVICE):
            self.health.set(name, status)

    def start(self) -> int:
        """Bind and start answering (health says NOT_SERVING until `load_model`); returns the port."""
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        address = f"{self.host}:{self.port}"
        if self.credentials:
            self.port = self.server.add_secure_port(address, self.credentials)
        else:
            self.port = self.server.add_insecure_port(address)
        if not self.port:
            raise OSError(f"could not bind {address}")
        self.server.start()
        if self.http_port is not None:
            self.http_port = self._start_http()
        if self.metrics_port is not None:
            # Metrics carry no token: they stay on loopback even when the API is open to the network.
            self.metrics_address = self.metrics.serve(self.metrics_host, self.metrics_port)
        return self.port

    def _start_http(self) -> int:
        """Binds the HTTP port here (a clear error at once, and port 0 works), then serves it on a thread."""
        import uvicorn

        family = socket.AF_INET6 if ":" in self.host.strip("[]") else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host.strip("[]"), self.http_port))
        except OSError as exc:
            sock.close()
            raise OSError(f"could not bind HTTP {self.host}:{self.http_port}: {exc.strerror or exc}")
        sock.listen(128)
        ssl = {"ssl_certfile": self.tls[0], "ssl_keyfile": self.tls[1]} if self.tls else {}
        config = uvicorn.Config(self.http_app, log_level="warning", lifespan="off", access_log=False,
                                timeout_graceful_shutdown=int(self.grace_s), **ssl)
        self._http = uvicorn.Server(config)
        self._http_thread = threading.Thread(target=self._http.run, kwargs={"sockets": [sock]},
                                             name="apply-edit-http-server", daemon=True)
        self._http_thread.start()
        return sock.getsockname()[1]

    def load_model(self, target: Target | None = None) -> None:
        """Load the model here (or take `target`: a loaded one, or one on a serving engine) and serve."""
        if target is None:
            choose_threads()
            # A server starts rarely and runs long: every cached weight file is re-hashed before serving.
            target = TransformersTarget.load(self.model_name, dtype=self.dtype, log=self.log, full_hash=True)
        target.keep_prefixes(self.prefix_cache_bytes)  # a file's next apply, or its warm-up, reads on from here
        if target.prefix_cache is not None:
            self.metrics.watch_prefix_cache(target.prefix_cache)
        applier = Applier(target)
        applier.cost_curve()  # measure (or read) the verify-cost curve now, not in the first request
        self.model.applier = applier
        self._set_health(health_pb2.HealthCheckResponse.SERVING)

    def stop(self, grace: float | None = None) -> None:
        """Graceful: NOT_SERVING at once, refuse new requests, let in-flight ones finish (up to grace)."""
        self.health.enter_graceful_shutdown()
        self._draining.set()
        grpc_done = self.server.stop(self.grace_s if grace is None else grace)
        if self._http is not None:
            self._http.force_exit = grace == 0
            self._http.should_exit = True
        grpc_done.wait()
        if self._http is not None:
            self._http_thread.join(timeout=(self.grace_s if grace is None else grace) + 5)
        self._stopped.set()

    def wait(self) -> None:
        """Block until stopped. The wait wakes every so often: a signal the kernel delivers to a worker thread
        is only handled once the main thread runs Python again, and a wait with no timeout never does."""
        while not self._stopped.wait(SIGNAL_POLL_S):
            pass

    def stop_on_signals(self) -> None:
        def handle(signum, frame):
            self.log(f"signal {signum}: draining in-flight requests, refusing new ones")
            threading.Thread(target=self.stop, daemon=True).start()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)
