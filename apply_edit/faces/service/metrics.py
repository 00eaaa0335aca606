"""Prometheus metrics of the service, on a registry of their own (one per server)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120)


def size_class(original: str) -> str:
    """Coarse request size for labels: small < 4 KB <= medium < 32 KB <= large."""
    n = len(original.encode("utf-8", "surrogatepass"))
    return "small" if n < 4096 else "medium" if n < 32768 else "large"


class Metrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        labels = ("language", "size")
        self.requests = Counter("apply_edit_requests", "Apply requests by final gRPC status", ("status",) + labels,
                                registry=self.registry)
        self.ttft = Histogram("apply_edit_ttft_seconds", "Request start to first text", labels, buckets=SECONDS,
                              registry=self.registry)
        self.ttlt = Histogram("apply_edit_ttlt_seconds", "Request start to last text", labels, buckets=SECONDS,
                              registry=self.registry)
        self.tokens_per_pass = Histogram("apply_edit_tokens_per_target_pass", "New tokens per target forward pass",
                                         labels, buckets=(1, 2, 4, 8, 12, 16, 24, 32, 48, 64), registry=self.registry)
        self.acceptance = Histogram("apply_edit_acceptance_rate", "Share of drafted tokens the target accepted",
                                    labels, buckets=(0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0),
                                    registry=self.registry)
        # Which path produced each answer (decide.PATHS; "unjudged" for the model pipeline): a bounded set.
        self.paths = Counter("apply_edit_answers", "Answers by the path that produced them", ("path",),
                             registry=self.registry)
        self.queue_depth = Gauge("apply_edit_queue_depth", "Requests admitted and waiting for the model",
                                 registry=self.registry)
        self.warmups = Counter("apply_edit_warmups", "Warm calls (a file read ahead of its edits) by final status",
                               ("status",), registry=self.registry)

    def watch_prefix_cache(self, cache) -> None:
        """Gauges read from the target's prefix store (models/prefix_cache.py) at each scrape."""
        for name, doc, read in (
                ("apply_edit_prefix_cache_bytes", "Bytes of prompt prefixes' keys and values held", lambda: cache.bytes_held),
                ("apply_edit_prefix_cache_prefixes", "Prompt prefixes held", lambda: len(cache)),
                ("apply_edit_prefix_cache_lookups", "Requests that looked for a stored prefix", lambda: cache.lookups),
                ("apply_edit_prefix_cache_hits", "Requests that started from a stored prefix", lambda: cache.hits),
                ("apply_edit_prefix_cache_tokens_reused", "Prompt tokens read from stored prefixes, not prefilled",
                 lambda: cache.tokens_reused)):
            Gauge(name, doc, registry=self.registry).set_function(read)

    def serve(self, host: str, port: int) -> tuple[str, int]:
        """Serves /metrics on host:port (unauthenticated: keep it on loopback); the address bound."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server.server_address[:2]
